/**
 * Process entry of the sandbox boot, the one boot implementation every provider runs
 * (seed 003 §6.4). In the image: `node /opt/sandbox/boot.mjs <mode> ...`; on a host:
 * `node --import tsx sandbox/boot/main.ts <mode> ...`.
 *
 *   run --spec FILE       the boot process itself (supervisor.ts): phase 1, report over IPC,
 *                         phase 2, then lives as long as OpenCode. The local provider spawns it.
 *   start --spec FILE|-   for providers that exec commands in a sandbox (Modal, E2B): saves the
 *                         spec, starts `run` detached, waits for phase 1 and exits 0 once
 *                         OpenCode answers (stdout: the ready report) or 1 (stderr: why).
 *   resume --spec FILE|-  a sandbox resumed with its processes (E2B pause): git freshness pull only.
 *
 * Logs are JSON lines on stdout (boot-runner.ts). `-` reads the spec from stdin.
 */
import { spawn } from "node:child_process";
import { mkdir, open, readFile, writeFile } from "node:fs/promises";
import { awaitBootOutcome, describeOutcome } from "./boot-outcome";
import { phase1DeadlineMs, planResume } from "./boot-plan";
import { jsonLineLog, errorMessage, runPhase } from "./boot-runner";
import { parseBootSpec, type BootSpec } from "./boot-spec";
import { sandboxFiles } from "./layout";
import { endRecordedServices } from "../sidecar/service-state";
import { agentAuthorization, deriveAgentPassword } from "../shared/access-token";
import { redactKnown } from "../shared/redact-secrets";
import { takeSandboxKeyFile } from "../shared/sandbox-key-file";
import { ProcessTable } from "./processes";
import { createStepExecutor } from "./step-executor";
import { BootSupervisor, defaultFetch, defaultSleep, type BootReport } from "./supervisor";

const USAGE = "usage: boot <run|start|resume> --spec <file|->";
/**
 * The sandbox key, taken from its key file by `run` (sandbox/shared/sandbox-key-file.ts): the
 * boot holds it only to hand it to the sidecar. No log line ever carries it (nor an access token
 * minted from it), whatever a step's error text echoed.
 */
let sandboxKey: string | undefined;
function scrubCredentials(line: string): string {
  // The key, OpenCode's password derived from it, and that password's Basic header value.
  const secrets = sandboxKey ? [sandboxKey, deriveAgentPassword(sandboxKey), agentAuthorization(deriveAgentPassword(sandboxKey)).replace(/^Basic /, "")] : [];
  return redactKnown(line, secrets);
}
const log = jsonLineLog((line) => process.stdout.write(scrubCredentials(line)));

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString("utf8");
}

async function loadSpec(arg: string): Promise<BootSpec> {
  const raw = arg === "-" ? await readStdin() : await readFile(arg, "utf8");
  return parseBootSpec(JSON.parse(raw));
}

/** Sends over IPC and waits for the write, so a report is never lost to an exit right after. */
function sendReport(report: BootReport): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(report, undefined, {}, () => {
      // The starter only needs the one report: let go of the channel so the boot outlives it.
      if (process.connected) process.disconnect();
      resolve();
    });
  });
}

async function run(spec: BootSpec): Promise<number> {
  // Taken (read and removed) before anything starts: no child, snapshot or later boot sees the file.
  try {
    sandboxKey = await takeSandboxKeyFile(sandboxFiles(spec.layout).sandboxKey);
  } catch (err) {
    const error = errorMessage(err);
    log("error", "boot.failed", { step: "read sandbox key", error });
    await sendReport({ type: "boot.failed", step: "read sandbox key", error });
    return 1;
  }
  const supervisor = new BootSupervisor(spec, { env: process.env, sandboxKey, log, report: sendReport });
  const stop = (signal: NodeJS.Signals) => {
    log("info", "boot.stop", { signal });
    void supervisor.stop().finally(() => process.exit(0));
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
  const expires = spec.layout.expiresInSeconds;
  if (expires !== null) {
    // The sandbox ends itself at expiry, so expiry holds while no control plane runs: the whole
    // process group (this boot included) gets SIGTERM, and the sidecar's services end with it.
    setTimeout(() => {
      log("warn", "boot.expired", { afterSeconds: expires });
      void endRecordedServices(sandboxFiles(spec.layout).sidecarState)
        .catch((err: unknown) => log("warn", "boot.expired", { error: errorMessage(err) }))
        .finally(() => process.kill(0, "SIGTERM"));
    }, Math.round(expires * 1000)).unref();
  }
  return supervisor.run();
}

async function start(spec: BootSpec, script: string): Promise<number> {
  const files = sandboxFiles(spec.layout);
  await mkdir(files.stateDir, { recursive: true });
  await writeFile(files.bootSpec, JSON.stringify(spec), { mode: 0o600 });
  await mkdir(spec.layout.logDir, { recursive: true });
  const bootLog = `${spec.layout.logDir}/boot.log`;
  const out = await open(bootLog, "w");
  const child = spawn(process.execPath, [...process.execArgv, script, "run", "--spec", files.bootSpec], {
    cwd: spec.layout.home,
    env: process.env,
    detached: true,
    stdio: ["ignore", out.fd, out.fd, "ipc"],
  });
  await out.close();
  const outcome = await awaitBootOutcome(child, phase1DeadlineMs(spec));
  if (outcome.type === "boot.ready") {
    process.stdout.write(`${JSON.stringify(outcome)}\n`);
    return 0;
  }
  if (outcome.type === "boot.timeout" && child.pid !== undefined) {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  const logTail = (await readFile(bootLog, "utf8").catch(() => "")).slice(-2_000);
  process.stderr.write(`${JSON.stringify({ ...outcome, error: describeOutcome(outcome), logTail })}\n`);
  return 1;
}

async function resume(spec: BootSpec): Promise<number> {
  const execute = createStepExecutor({ env: process.env, processes: new ProcessTable(), sleep: defaultSleep, fetch: defaultFetch });
  const result = await runPhase(2, planResume(spec), execute, { log, now: Date.now });
  return result.ok ? 0 : 1;
}

async function main(argv: string[]): Promise<number> {
  const [mode, flag, specArg] = argv;
  if (flag !== "--spec" || !specArg || (mode !== "run" && mode !== "start" && mode !== "resume")) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let spec: BootSpec;
  try {
    spec = await loadSpec(specArg);
  } catch (err) {
    const error = errorMessage(err);
    log("error", "boot.failed", { step: "read spec", error });
    await sendReport({ type: "boot.failed", step: "read spec", error });
    if (mode === "start") process.stderr.write(`${JSON.stringify({ type: "boot.failed", step: "read spec", error })}\n`);
    return 1;
  }
  if (mode === "run") return run(spec);
  if (mode === "start") return start(spec, process.argv[1] ?? "");
  return resume(spec);
}

process.exit(await main(process.argv.slice(2)));
