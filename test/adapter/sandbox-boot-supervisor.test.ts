/**
 * Issue 25 §5: the boot supervises OpenCode. Real child processes: the boot's own process table
 * starts an `opencode` executable (a small stand-in HTTP server with OpenCode's `serve --port`
 * command line, so the test is about the supervisor, not about OpenCode), the test kills it
 * with SIGKILL, and the supervisor restarts it with backoff; one that keeps crashing makes the
 * boot give up and end (the sandbox with it, which the control plane notices as lost).
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { allocatePort } from "../../functions/providers/local/host-commands";
import { localBootSpec, sandboxPaths } from "../../functions/providers/local/opencode-launch";
import { BootSupervisor, type BootReport } from "../../sandbox/boot/supervisor";
import { waitFor } from "../support/wait-for";

const REPO_ROOT = resolve(fileURLToPath(import.meta.url), "../../..");
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

/** `opencode serve --port N --hostname H`: answers every request 200; exits 3 at once while `crash` exists next to it. */
const STAND_IN = `#!${process.execPath}
const { existsSync } = require("node:fs");
const { join } = require("node:path");
if (existsSync(join(__dirname, "crash"))) process.exit(3);
const port = Number(process.argv[process.argv.indexOf("--port") + 1]);
require("node:http").createServer((req, res) => res.end("[]")).listen(port, "127.0.0.1");
`;

const dirs: string[] = [];
const supervisors: BootSupervisor[] = [];

afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function boot(options: { backoffMs: number[] }) {
  const root = await mkdtemp(join(tmpdir(), "boot-supervisor-"));
  dirs.push(root);
  const bin = join(root, "bin");
  await mkdir(bin);
  const opencode = join(bin, "opencode");
  await writeFile(opencode, STAND_IN);
  await chmod(opencode, 0o755);
  const paths = sandboxPaths(root, "sb");
  await mkdir(paths.workspace, { recursive: true });
  await mkdir(paths.home, { recursive: true });
  const port = await allocatePort();
  const spec = localBootSpec({
    opts: { sessionId: "ses_supervised", repos: [], envVars: {} },
    paths,
    restored: false,
    now: 1_750_000_000_000,
    repoRoot: REPO_ROOT,
    node: { bin: process.execPath, tsxLoaderUrl: TSX },
    opencodeBin: opencode,
    openCodePort: port,
    devModelPort: null,
    sidecarPort: null,
    readinessBudgetMs: 20_000,
    timeoutSeconds: 600,
    gitFreshness: null,
  });
  const logs: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
  const reports: BootReport[] = [];
  const supervisor = new BootSupervisor(spec, {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: paths.home },
    log: (level, msg, fields = {}) => logs.push({ level, msg, fields }),
    report: (r) => {
      reports.push(r);
    },
    restartBackoffMs: options.backoffMs,
    crashWindowMs: 60_000,
  });
  supervisors.push(supervisor);
  let exitCode: number | null = null;
  const ended = supervisor.run().then((code) => {
    exitCode = code;
    return code;
  });
  await waitFor(() => Promise.resolve(reports[0] ?? null), { until: (r) => r !== null, message: "the boot's ready report", timeoutMs: 30_000 });
  expect(reports[0]?.type).toBe("boot.ready");
  const answers = async () => (await fetch(`http://127.0.0.1:${port}/session`).then((r) => r.ok).catch(() => false)) === true;
  return { supervisor, logs, ended, exitCode: () => exitCode, answers, crashNextStarts: () => writeFile(join(bin, "crash"), "") };
}

describe("the boot supervises OpenCode", () => {
  it("a killed OpenCode is restarted (a new process, answering again) and the boot keeps running", async () => {
    const b = await boot({ backoffMs: [100, 100, 100] });
    for (let round = 1; round <= 2; round++) {
      const before = b.supervisor.pidOf("opencode");
      expect(before).toBeGreaterThan(0);
      process.kill(before ?? 0, "SIGKILL");
      const after = await waitFor(() => Promise.resolve(b.supervisor.pidOf("opencode")), { until: (pid) => pid !== null && pid !== before, message: `OpenCode restarted (round ${round})`, timeoutMs: 20_000 });
      expect(after).not.toBe(before);
      await waitFor(b.answers, { until: (ok) => ok, message: "the restarted OpenCode answering", timeoutMs: 20_000 });
      await waitFor(() => Promise.resolve(b.logs.filter((l) => l.msg === "opencode.restarted").length), { until: (n) => n === round, message: "the restart logged" });
    }
    expect(b.logs.filter((l) => l.msg === "opencode.exited").map((l) => l.fields.signal)).toEqual(["SIGKILL", "SIGKILL"]);
    expect(b.exitCode()).toBeNull();
  }, 60_000);

  it("one that keeps crashing: the boot gives up after the last backoff step and ends with its exit code", async () => {
    const b = await boot({ backoffMs: [50, 50, 50] });
    await b.crashNextStarts();
    process.kill(b.supervisor.pidOf("opencode") ?? 0, "SIGKILL");
    expect(await b.ended).toBe(3);
    // Killed once, then three restarts that each crashed: the fourth exit within the window ends it.
    expect(b.logs.filter((l) => l.msg === "opencode.exited")).toHaveLength(3);
    expect(b.logs.filter((l) => l.msg === "opencode.restarted")).toHaveLength(0);
    expect(b.logs.at(-1)).toMatchObject({ level: "error", msg: "boot.exit", fields: { reason: "opencode keeps crashing", code: 3 } });
    expect(await b.answers()).toBe(false);
  }, 60_000);
});
