/**
 * Process entry for the sidecar inside a sandbox (seed 003 §6.4 phase 2 step 5).
 * Usage: `node --import tsx sandbox/sidecar/main.ts`, configured by SIDECAR_PORT, SIDECAR_HOST,
 * SIDECAR_TOKEN_FILE (or SIDECAR_TOKEN), SESSION_ID, WORKSPACE_DIR, SIDECAR_STATE_DIR, CADDY_ADMIN_URL, SERVICES_FILE,
 * SIDECAR_SOCKET, CONTROL_PLANE_URL (config.ts).
 * Prints one `sidecar listening on <url>` line once it accepts connections. SIGTERM closes the
 * server; services keep running so a restarted sidecar adopts them.
 */
import { readSandboxKey } from "../shared/sandbox-key-file";
import { sidecarKeySource, sidecarOptionsFromEnv } from "./config";
import { startSidecar } from "./server";

let options;
try {
  options = sidecarOptionsFromEnv(process.env);
  // Before anything listens: the boot writes the key to our stdin and closes it.
  const source = sidecarKeySource(process.env);
  if (source) options = { ...options, token: await readSandboxKey(source) };
} catch (err) {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(2);
}

const sidecar = await startSidecar(options);
console.log(`sidecar listening on ${sidecar.url}`);

const stop = () => {
  void sidecar.close().finally(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
