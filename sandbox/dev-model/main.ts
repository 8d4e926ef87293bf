/**
 * Process entry for the development model inside a local sandbox's process group.
 * Usage: `node --import tsx sandbox/dev-model/main.ts [--port N]` (default: an allocated port).
 * Prints one `dev-model listening on <url>` line: the local provider waits for it.
 */
import { startDevModelServer } from "./server";

function portArg(argv: string[]): number {
  const i = argv.indexOf("--port");
  const raw = i >= 0 ? argv[i + 1] : process.env.DEV_MODEL_PORT;
  const port = raw === undefined ? 0 : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`dev-model: --port must be an integer port, got ${String(raw)}`);
    process.exit(2);
  }
  return port;
}

const server = await startDevModelServer({ port: portArg(process.argv.slice(2)) });
console.log(`dev-model listening on ${server.url}`);

const stop = () => {
  void server.close().finally(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
