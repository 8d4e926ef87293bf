/**
 * The `local` sandbox provider (seed 003 §4 port, API.md "Local runtime"): a sandbox is a real
 * process group rooted in `<dataDir>/sandboxes/<sandboxId>/` (`workspace/`, `home/`) running real
 * OpenCode, plus the development model when no LLM key is configured. Stateless: every call
 * reads the per-sandbox registry file, so any provider instance can check, recover or kill any
 * sandbox. No pause and no memory snapshots; `snapshot` copies workspace + home.
 *
 * Boot: the sandbox's process-group leader is the boot process (sandbox/boot/main.ts `run`,
 * the same boot the image runs): it clones the repos, writes OpenCode's config, plugin and
 * tools, starts OpenCode (and the development model) and reports over IPC once `/session`
 * answers; it lives exactly as long as OpenCode, so "leader alive" means "sandbox alive".
 *
 * Expiry: the sandbox enforces `sandboxTimeoutSeconds` itself (the boot SIGTERMs its own group
 * at expiry), so it holds even when the control plane is down.
 *
 * Sidecar: on by default (phase 2, after create returns), authenticated by the `SIDECAR_TOKEN`
 * of the create call's env vars, which reaches the sandbox as a 0600 file its boot takes (never
 * as an environment variable: sandbox/shared/sandbox-key-file.ts). Its services run as their own process groups, so terminate
 * ends them too, from the sidecar's persisted state (`endRecordedServices`).
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { awaitBootOutcome, describeOutcome } from "../../../sandbox/boot/boot-outcome";
import { phase1DeadlineMs } from "../../../sandbox/boot/boot-plan";
import { sandboxFiles } from "../../../sandbox/boot/layout";
import { endRecordedServices } from "../../../sandbox/sidecar/service-state";
import { writeSandboxKeyFile } from "../../../sandbox/shared/sandbox-key-file";
import { sandboxKeyOf } from "../sandbox-boot";
import { ProviderError } from "../../domain/errors";
import type { GitFreshnessConfig } from "../../domain/git-freshness";
import { redactSecrets } from "../../observability/redact-secrets";
import type {
  CreateSandboxOpts,
  CreateSandboxResult,
  EnsureSandboxResult,
  ExecResult,
  ListedSandbox,
  PauseResult,
  SandboxProvider,
  SnapshotResult,
  SandboxTunnels,
} from "../../ports/sandbox-provider";
import { copyAgentState, removeDir, repointSessions, writeSnapshotMeta } from "./filesystem-snapshot";
import { devModelRequiredKeySha256, homeEnv, localBootSpec, sandboxEnv, sandboxPaths, sidecarSocketPath, usesDevModel } from "./opencode-launch";
import { groupIsOurs, killGroup, leaderAlive, processStartTime } from "../../../sandbox/shared/process-group";
import { allocatePort, groupReaped, run } from "./host-commands";
import { processEnvironment } from "../../config/config";
import { listSandboxRecords, readSandboxRecord, writeSandboxRecord, type SandboxRecord } from "./sandbox-registry";

export interface LocalSandboxProviderOptions {
  dataDir: string;
  /** Defaults to the `opencode-ai` package's binary in this repository. */
  opencodeBin?: string;
  /** Provider env: `ANTHROPIC_API_KEY` (+ `ANTHROPIC_BASE_URL`) switches to the real model. Not read from `process.env`. */
  env?: Record<string, string>;
  readyTimeoutMs?: number;
  /** Default 3600; fractional seconds accepted. */
  sandboxTimeoutSeconds?: number;
  /** Start the sidecar (sandbox/sidecar) in every sandbox, on an allocated port. Default true. */
  sidecar?: boolean;
  /** seed 003 §6.7 on restore; default off. */
  gitFreshness?: GitFreshnessConfig;
}

const PROVIDER = "local";
const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../../..");
const BOOT_MAIN = resolve(repoRoot, "sandbox/boot/main.ts");
const DEFAULT_OPENCODE_BIN = resolve(repoRoot, "node_modules/.bin/opencode");

function tsxLoaderUrl(): string {
  return pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
}

function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}

function fail(operation: string, message: string, opts: { cause?: unknown; retryable?: boolean; sandboxId?: string } = {}): ProviderError {
  return new ProviderError(PROVIDER, operation, redactSecrets(message), {
    cause: opts.cause,
    retryable: opts.retryable,
    context: opts.sandboxId ? { sandboxId: opts.sandboxId } : {},
  });
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function isLive(record: SandboxRecord): boolean {
  return leaderAlive(record.pgid, record.leaderStartTime);
}

export class LocalSandboxProvider implements SandboxProvider {
  readonly type = "local" as const;
  readonly supportsPause = false;
  readonly supportsAutoPause = false;
  readonly supportsMemorySnapshot = false;

  private readonly dataDir: string;
  private readonly opencodeBin: string;
  private readonly env: Record<string, string>;
  private readonly readyTimeoutMs: number;
  private readonly timeoutSeconds: number;
  private readonly sidecar: boolean;
  private readonly gitFreshness: GitFreshnessConfig | null;

  constructor(options: LocalSandboxProviderOptions) {
    this.dataDir = resolve(options.dataDir);
    this.opencodeBin = options.opencodeBin ?? DEFAULT_OPENCODE_BIN;
    this.env = options.env ?? {};
    this.readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
    this.timeoutSeconds = options.sandboxTimeoutSeconds ?? 3600;
    this.sidecar = options.sidecar ?? true;
    this.gitFreshness = options.gitFreshness ?? null;
  }

  async ensureSandbox(opts: CreateSandboxOpts): Promise<EnsureSandboxResult> {
    const candidates: SandboxRecord[] = [];
    if (opts.currentSandboxId) {
      const current = await readSandboxRecord(this.dataDir, opts.currentSandboxId);
      if (current && current.sessionId === opts.sessionId) candidates.push(current);
    }
    const forSession = (await listSandboxRecords(this.dataDir))
      .filter((r) => r.sessionId === opts.sessionId)
      .sort((a, b) => b.createdAt - a.createdAt);
    candidates.push(...forSession);
    const live = candidates.find(isLive);
    if (live) return { ...this.resultOf(live), recovered: true };
    return { ...(await this.createSandbox(opts)), recovered: false };
  }

  async createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult> {
    const sandboxId = newId("lsb");
    const paths = sandboxPaths(this.dataDir, sandboxId);
    try {
      const restoreFrom = opts.snapshotId ?? opts.baseSnapshotId ?? null;
      if (restoreFrom?.startsWith("mem:")) throw fail("createSandbox", "memory snapshots are not supported by the local provider");
      if (restoreFrom) await this.restoreInto(restoreFrom, paths);
      await mkdir(paths.workspace, { recursive: true });
      await mkdir(paths.home, { recursive: true });
      return this.resultOf(await this.boot(opts, sandboxId, paths, restoreFrom));
    } catch (err) {
      await this.destroy(sandboxId);
      if (err instanceof ProviderError) throw err;
      throw fail("createSandbox", errorText(err), { cause: err, retryable: true, sandboxId });
    }
  }

  async snapshot(sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    const record = await readSandboxRecord(this.dataDir, sandboxId);
    if (!record) throw fail("snapshot", `unknown sandbox ${sandboxId}`, { sandboxId });
    const snapshotId = newId("lsnap");
    const root = `${this.dataDir}/snapshots/${snapshotId}`;
    try {
      await copyAgentState(record, { workspace: `${root}/workspace`, home: `${root}/home` });
      await writeSnapshotMeta(root, { snapshotId, sessionId, sandboxId, workspace: record.workspace, createdAt: Date.now() });
      return { snapshotId };
    } catch (err) {
      await removeDir(root);
      throw fail("snapshot", errorText(err), { cause: err, retryable: true, sandboxId });
    }
  }

  /** Idempotent: an unknown (or already deleted) snapshot is success; an id that is no snapshot id names nothing. */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    if (!/^[A-Za-z0-9_-]+$/.test(snapshotId)) return;
    try {
      await removeDir(`${this.dataDir}/snapshots/${snapshotId}`);
    } catch (err) {
      throw fail("deleteSnapshot", errorText(err), { cause: err, retryable: true });
    }
  }

  async pause(_sessionId: string, sandboxId: string): Promise<PauseResult> {
    throw fail("pause", "the local provider cannot pause; take a snapshot and terminate instead", { sandboxId });
  }

  async memorySnapshot(_sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    throw fail("memorySnapshot", "the local provider has no memory snapshots", { sandboxId });
  }

  async terminate(sessionId: string, sandboxId?: string | null): Promise<void> {
    const ids = sandboxId
      ? [sandboxId]
      : (await listSandboxRecords(this.dataDir)).filter((r) => r.sessionId === sessionId).map((r) => r.sandboxId);
    for (const id of ids) await this.destroy(id);
  }

  async checkSandboxes(sandboxIds: string[]): Promise<string[]> {
    const records = await Promise.all(sandboxIds.map((id) => readSandboxRecord(this.dataDir, id)));
    return records.filter((r): r is SandboxRecord => r !== null && isLive(r)).map((r) => r.sandboxId);
  }

  /** Every registry record whose process group leader is still ours and alive; no pause here, so all are running. */
  async listSandboxes(): Promise<ListedSandbox[]> {
    let records: SandboxRecord[];
    try {
      records = await listSandboxRecords(this.dataDir);
    } catch (err) {
      throw fail("listSandboxes", errorText(err), { cause: err, retryable: true });
    }
    return records
      .filter(isLive)
      .map((r) => ({ sandboxId: r.sandboxId, sessionId: r.sessionId, startedAt: r.createdAt, state: "running" as const }));
  }

  async health(): Promise<boolean> {
    try {
      return (await run(this.opencodeBin, ["--version"], { timeoutMs: 20_000 })).exitCode === 0;
    } catch {
      return false;
    }
  }

  async resolveTunnels(sandboxId: string): Promise<SandboxTunnels> {
    const record = await readSandboxRecord(this.dataDir, sandboxId);
    if (!record || !isLive(record)) throw fail("resolveTunnels", `sandbox ${sandboxId} is not running`, { sandboxId });
    return { openCodeUrl: record.openCodeUrl, previewUrl: null, sidecarUrl: record.sidecarPort === null ? null : `http://127.0.0.1:${record.sidecarPort}` };
  }

  /** Runs argv in the workspace with the sandbox's home; session env vars are not persisted, so not applied. */
  async execCommand(sandboxId: string, argv: string[], opts: { cwd?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    const record = await readSandboxRecord(this.dataDir, sandboxId);
    if (!record || !isLive(record)) throw fail("execCommand", `sandbox ${sandboxId} is not running`, { sandboxId });
    const [file, ...args] = argv;
    if (!file) throw fail("execCommand", "argv is empty", { sandboxId });
    const cwd = this.insideWorkspace(record.workspace, opts.cwd ?? ".", "execCommand");
    try {
      return await run(file, args, {
        cwd,
        env: { PATH: processEnvironment().PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8", ...homeEnv(record.home), SANDBOX_ID: sandboxId },
        timeoutMs: opts.timeoutMs ?? 60_000,
      });
    } catch (err) {
      throw fail("execCommand", errorText(err), { cause: err, sandboxId });
    }
  }

  private resultOf(record: SandboxRecord): CreateSandboxResult {
    return { sandboxId: record.sandboxId, tunnelUrl: record.openCodeUrl, previewUrl: null, expiresAt: record.expiresAt };
  }

  /** Resolves a path under the workspace; a path escaping it is a caller error. */
  private insideWorkspace(workspace: string, path: string, operation: string): string {
    const full = resolve(workspace, path);
    if (full !== workspace && !full.startsWith(workspace + sep)) throw fail(operation, `path ${path} leaves the workspace`);
    return full;
  }

  private async restoreInto(snapshotId: string, paths: { workspace: string; home: string }): Promise<void> {
    if (!/^[A-Za-z0-9_-]+$/.test(snapshotId)) throw fail("createSandbox", `unknown snapshot ${snapshotId}`);
    const root = `${this.dataDir}/snapshots/${snapshotId}`;
    let meta: { workspace?: unknown };
    try {
      meta = JSON.parse(await readFile(`${root}/snapshot.json`, "utf8")) as { workspace?: unknown };
    } catch (err) {
      throw fail("createSandbox", `unknown snapshot ${snapshotId}`, { cause: err });
    }
    await copyAgentState({ workspace: `${root}/workspace`, home: `${root}/home` }, paths);
    if (typeof meta.workspace !== "string") return;
    try {
      await repointSessions(paths.home, meta.workspace, paths.workspace);
    } catch (err) {
      throw fail("createSandbox", `restoring snapshot ${snapshotId}: ${errorText(err)}`, { cause: err });
    }
  }

  /**
   * Spawns the boot as the leader of a new process group and waits for its phase-1 report. The
   * record is written before the wait, so a boot that fails or hangs is still found and killed.
   */
  private async boot(opts: CreateSandboxOpts, sandboxId: string, paths: { root: string; workspace: string; home: string }, restoredFrom: string | null): Promise<SandboxRecord> {
    const devModelPort = usesDevModel(opts, this.env) ? await allocatePort() : null;
    const openCodePort = await allocatePort();
    const sidecarPort = this.sidecar ? await allocatePort() : null;
    const createdAt = Date.now();
    const spec = localBootSpec({
      opts,
      paths,
      // A base layer has no repos yet: only a session snapshot counts as restored.
      restored: Boolean(opts.snapshotId),
      now: createdAt,
      repoRoot,
      node: { bin: process.execPath, tsxLoaderUrl: tsxLoaderUrl() },
      opencodeBin: this.opencodeBin,
      openCodePort,
      devModelPort,
      devModelRequiredKeySha256: devModelRequiredKeySha256(this.env),
      sidecarPort,
      sidecarSocket: sidecarPort === null ? null : sidecarSocketPath(sandboxId),
      readinessBudgetMs: this.readyTimeoutMs,
      timeoutSeconds: this.timeoutSeconds,
      gitFreshness: this.gitFreshness,
    });
    const specPath = `${paths.root}/boot-spec.json`;
    await writeFile(specPath, JSON.stringify(spec), { mode: 0o600 });
    // The key as a file the boot takes before it starts anything (never in the boot's environment).
    const sandboxKey = sandboxKeyOf(opts);
    if (sandboxKey) await writeSandboxKeyFile(sandboxFiles(paths).sandboxKey, sandboxKey);
    const env = sandboxEnv({
      hostPath: processEnvironment().PATH ?? "/usr/bin:/bin",
      home: paths.home,
      sessionId: opts.sessionId,
      sandboxId,
      providerEnv: this.env,
      opts,
    });
    const logPath = `${paths.root}/sandbox.log`;
    // The log is a file, not a pipe: the sandbox must outlive the process that started it.
    const log = await open(logPath, "a");
    const child = spawn(process.execPath, ["--import", tsxLoaderUrl(), BOOT_MAIN, "run", "--spec", specPath], {
      cwd: paths.workspace,
      env,
      detached: true,
      stdio: ["ignore", log.fd, log.fd, "ipc"],
    });
    await log.close();
    const pgid = child.pid;
    if (pgid === undefined) {
      await awaitBootOutcome(child, 1_000);
      throw fail("createSandbox", "the boot process did not start", { retryable: true, sandboxId });
    }
    const record: SandboxRecord = {
      sandboxId,
      sessionId: opts.sessionId,
      pgid,
      leaderStartTime: processStartTime(pgid),
      openCodePort,
      openCodeUrl: `http://127.0.0.1:${openCodePort}`,
      devModelPort,
      sidecarPort,
      workspace: paths.workspace,
      home: paths.home,
      createdAt,
      expiresAt: createdAt + Math.round(this.timeoutSeconds * 1000),
      restoredFrom,
    };
    await writeSandboxRecord(this.dataDir, record);
    const outcome = await awaitBootOutcome(child, phase1DeadlineMs(spec));
    if (outcome.type === "boot.ready") return record;
    const tail = redactSecrets((await readFile(logPath, "utf8").catch(() => "")).slice(-800));
    // A step that failed (a missing repository) is the caller's; a boot that died or hung may pass on retry.
    const retryable = outcome.type !== "boot.failed" || outcome.step.startsWith("wait for");
    throw fail("createSandbox", `${describeOutcome(outcome)}; log tail: ${tail}`, { retryable, sandboxId });
  }

  /**
   * Kills the group (if any), then the sidecar's services (their own groups, recorded in its
   * state), then removes the sandbox directory. Unknown ids are a no-op; so is a second call.
   */
  private async destroy(sandboxId: string): Promise<void> {
    if (!/^[A-Za-z0-9_-]+$/.test(sandboxId)) return;
    const paths = sandboxPaths(this.dataDir, sandboxId);
    const record = await readSandboxRecord(this.dataDir, sandboxId);
    // Signal the group while our leader runs, or when the leader is gone but members remain (the
    // kernel does not recycle a pgid that still has members); a recycled leader pid is a stranger.
    // First, so the sidecar (stopped by SIGTERM, which lets a start in flight record its pid)
    // starts nothing after the services are read below.
    if (record && groupIsOurs(record.pgid, record.leaderStartTime)) {
      const stopped = await killGroup(record.pgid);
      if (!stopped) throw fail("terminate", `processes of sandbox ${sandboxId} survived SIGKILL`, { retryable: true, sandboxId });
      await groupReaped(record.pgid);
    }
    // The sidecar's state dir is the boot layout's (`<home>/.proliferate/sidecar`).
    const survivors = await endRecordedServices(sandboxFiles(paths).sidecarState);
    if (survivors.length > 0) {
      throw fail("terminate", `services of sandbox ${sandboxId} survived SIGKILL: ${survivors.join(", ")}`, { retryable: true, sandboxId });
    }
    await removeDir(paths.root);
    await rm(sidecarSocketPath(sandboxId), { force: true });
  }
}
