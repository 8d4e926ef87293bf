/**
 * `npm start`: the whole stack in one process on embedded defaults. Environment (all optional):
 * PORT, DEV_API_TOKEN, DATA_DIR, and the timing variables documented in API.md / README.md.
 */
import { startLocalRuntime } from "./runtime";

// Local runs print EMF metrics only when asked; in Lambda they go to CloudWatch.
process.env.POWERTOOLS_METRICS_DISABLED ??= "true";
// Node 20 is the dev/CI runtime (Lambdas deploy on nodejs22.x); the SDK's Node 20 notice is noise here.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

async function main(): Promise<void> {
  const port = process.env.PORT ? Number(process.env.PORT) : 8787;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, got "${process.env.PORT}"`);
  const runtime = await startLocalRuntime({
    port,
    host: process.env.HOST ?? "127.0.0.1",
    dataDir: process.env.DATA_DIR || undefined,
    devApiToken: process.env.DEV_API_TOKEN || undefined,
    env: process.env,
  });

  console.log(
    [
      "",
      "  sandbox control plane: local runtime",
      `  web console     ${runtime.url}/  (sign in with the dev API token below)`,
      `  HTTP API        ${runtime.url}/v1`,
      `  health          ${runtime.url}/v1/health`,
      `  ops summary     ${runtime.url}/v1/ops/summary  (admin token: the dev API token is one)`,
      `  WebSocket       ${runtime.wsUrl}?sessionId=<id>&token=<token>`,
      `  storage         ${process.env.DATA_DIR ? `dynalite on disk at ${process.env.DATA_DIR}` : "dynalite in memory"}`,
      `  sandboxes       ${runtime.config.DEFAULT_SANDBOX_PROVIDER} provider`,
      `  dev API token   ${runtime.devApiToken}`,
      "",
      `  try: curl -s -H "Authorization: Bearer ${runtime.devApiToken}" -d '{"title":"hello"}' ${runtime.url}/v1/sessions`,
      "",
    ].join("\n"),
  );

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    console.log(`\n  ${signal}: shutting down...`);
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    runtime
      .close()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        console.error("shutdown failed:", err instanceof Error ? err.message : err);
        process.exit(1);
      });
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  console.error("local runtime failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
