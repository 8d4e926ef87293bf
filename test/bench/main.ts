/**
 * `npm run bench`: prints figures (never asserts timings).
 *   1. every Lambda function's bundle size and cold import time (esbuild with the CDK stack's options), and (1b) the relay image's bundle against its size before issue 21;
 *   2. provider SDK packaging: SDK bundled into the function vs in a layer (sizes, cold import);
 *   3. control-plane HTTP overhead over the local runtime, DynamoDB requests and cost per request type;
 *      3b. the prompt queue: one turn's queue requests and their cost against the session's prompt history;
 *   4. lifecycle flows on a zero-latency provider: flow overhead, AWS calls and cost per 1,000 session lifecycles;
 *   5. the streaming relay: streams held by one process (10,000 target), fan-out latency (quiet, and during heartbeats and a takeover), memory per held stream,
 *      DynamoDB requests per held stream and per relay with their monthly cost (beside dd49683's figures); 5b. resume to first delta; 5c. the backstop scan's reads at 10,000 running sessions;
 *   6. idle-detection lag: grace expiry -> idle snapshot start over the event-driven idle checks (p50, p99), checks per session;
 *   7. local sandbox start with and without the sidecar, and the sandbox credentials' cost per call;
 *   8. org secrets: cost per secret per month, KMS envelope in the table vs Secrets Manager (measured ops, list prices);
 *   9. prebuilds: new session to running from the base vs from a prebuild snapshot, and the builder's duration;
 *  10. usage metering (issue 16): DynamoDB requests per running-session-hour, per org-day and per lifecycle.
 *  11. slack: the Slack functions' bundles and cold import, the ack's latency (p50/p99) over the local runtime.
 *  12. ops (issue 19): the dashboards against CloudWatch's limits, rendered to HTML; the monthly cost of dashboards and alarms; the provider-call metric's overhead.
 *  13. clients: the typed client's browser bundle, the OpenAPI document and its Lambda, the CLI's start.
 *  14. console: the web console's bundle sizes (gzip, without the terminal: target < 150 KB) and first load in headless chromium.
 *  15. automations (issue 18): firing to session created (p50/p99) and the AWS calls per run;
 *      "automation grace": run end to session paused, less the grace (p50/p99/max, real OpenCode).
 * `BENCH_ONLY=<section name>[,...]` (e.g. `BENCH_ONLY=prebuilds npm run bench`) runs only those sections.
 * layers/README.md records the packaging decision drawn from section 2.
 */
// Quiet the runtime before anything loads it: static imports are hoisted, so the rest is imported dynamically.
process.env.POWERTOOLS_LOG_LEVEL ??= "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED ??= "true";
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const { mkdtempSync, rmSync } = await import("node:fs");
const os = await import("node:os");
const path = await import("node:path");
const { fileURLToPath } = await import("node:url");

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const tmpDir = mkdtempSync(path.join(os.tmpdir(), "sandbox-cp-bench-"));
const started = performance.now();
let failed = false;

console.log(`sandbox-control-plane bench — node ${process.version}, ${os.cpus().length} CPU(s) ${os.cpus()[0]?.model ?? ""}, ${os.platform()}/${os.arch()}`);

const only = process.env.BENCH_ONLY?.split(",").map((s) => s.trim()).filter(Boolean) ?? [];

async function section(name: string, run: () => Promise<unknown>): Promise<void> {
  if (only.length > 0 && !only.includes(name)) return;
  try {
    await run();
  } catch (err) {
    failed = true;
    console.error(`\n!! section "${name}" failed:`, err instanceof Error ? (err.stack ?? err.message) : err);
  }
}

try {
  await section("lambda bundles", async () => (await import("./bundle-sizes")).benchLambdaBundles(repoRoot, tmpDir));
  await section("relay bundle", async () => (await import("./bundle-sizes")).benchRelayBundle(repoRoot, tmpDir));
  await section("provider packaging", async () => (await import("./provider-packaging")).benchProviderPackaging(repoRoot, tmpDir));
  await section("http overhead", async () => (await import("./http-overhead")).benchHttpOverhead());
  await section("prompt queue", async () => (await import("./prompt-queue")).benchPromptQueue());
  await section("lifecycle flows", async () => (await import("./lifecycle-flows")).benchLifecycleFlows());
  await section("relay", async () => (await import("./relay")).benchRelay());
  await section("relay resume", async () => (await import("./relay-resume")).benchRelayResume());
  await section("relay backstop", async () => (await import("./relay-backstop")).benchRelayBackstop());
  await section("idle lag", async () => (await import("./idle-lag")).benchIdleLag());
  await section("sandbox start", async () => (await import("./sandbox-start")).benchSandboxStart());
  await section("org secrets", async () => (await import("./org-secrets")).benchOrgSecrets());
  await section("prebuilds", async () => (await import("./prebuilds")).benchPrebuilds());
  await section("metering", async () => (await import("./metering")).benchMetering());
  await section("slack", async () => (await import("./slack")).benchSlack(repoRoot, tmpDir));
  await section("ops", async () => (await import("./ops")).benchOps(tmpDir));
  await section("automations", async () => (await import("./automations")).benchAutomations());
  await section("automation grace", async () => (await import("./automations")).benchAutomationIdleGrace());
  await section("clients", async () => (await import("./clients")).benchClients(repoRoot, tmpDir));
  await section("console", async () => (await import("./console")).benchConsole());
} finally {
  rmSync(tmpDir, { recursive: true, force: true });
}

console.log(`\nbench finished in ${((performance.now() - started) / 1000).toFixed(1)} s${failed ? " (with failed sections, see above)" : ""}`);
process.exitCode = failed ? 1 : 0;
