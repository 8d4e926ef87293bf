/**
 * E2B sandbox provider (seed 003 §6.3). Native pause/resume: a paused sandbox's id is its
 * snapshot id, and `connect` resumes it. The SDK surface is injected so tests pass a double;
 * `createE2BSdk` wraps the real `Sandbox` statics.
 *
 * SDK calls (e2b@2.x):
 *   create:   Sandbox.create(template, {envs, metadata, timeoutMs, lifecycle: {onTimeout: "pause", autoResume: false}})
 *             → files.write(boot spec) → commands.run("node /opt/sandbox/boot.mjs start --spec <file>")
 *             (sandbox/boot: phase 1 blocks the command) → getHost(4096/20000) → readiness poll
 *   resume:   Sandbox.connect(snapshotId, {timeoutMs}) → [restored processes] (below)
 *   snapshot restore: Sandbox.create(snapshotTemplate, {...as create}) → [restored processes]. E2B snapshots
 *             hold memory: the sandbox starts with OpenCode, Caddy and the sidecar running (issue 22 §1), so
 *             it is treated like a resume, never booted on top of its own processes. A 404 (the snapshot was
 *             deleted: a bare `SandboxError` with statusCode 404) is the restore failure `resumeSandbox`.
 *   [restored processes]: files.write(env JSON) → commands.run(jq export) → health (restored-processes.ts:
 *             OpenCode with this key's password, the sidecar through the preview) → healthy: [git freshness]
 *             files.write(boot spec) → commands.run("boot.mjs resume") | unhealthy: commands.run(stop the
 *             restored boot) → key file + boot spec → commands.run("boot.mjs start") (restored: true)
 *   ensure:   Sandbox.getInfo(currentSandboxId) (running + same sessionId) → Sandbox.connect(id) → getHost
 *             → Sandbox.getInfo(id).endAt (the recovered sandbox's expiry, after connect lengthened it)
 *   resolveTunnels / execCommand: Sandbox.getInfo(id) (running only) → Sandbox.connect(id, {timeoutMs: what is
 *             left of its timeout}): `connect` resumes a paused sandbox, for 300 s without a timeout
 *   pause:    Sandbox.pause(sandboxId, {keepMemory: true})
 *   snapshot: Sandbox.createSnapshot(sandboxId) → `e2b-snapshot:` + snapshotId (restored with Sandbox.create)
 *   deleteSnapshot: `e2b-snapshot:` ids: Sandbox.deleteSnapshot(id) (false = already gone); paused sandbox ids:
 *             Sandbox.getInfo(id) → paused: Sandbox.kill(id) (a paused sandbox's data is kept until killed)
 *   terminate: Sandbox.kill(id) (false = already gone) | Sandbox.list({query: {metadata: {sessionId}}}) → kill each
 *   checkSandboxes: Sandbox.list({query: {metadata: {managedBy}, state: ["running"]}}) paginated
 *   listSandboxes: Sandbox.list({query: {metadata: {managedBy}, state: ["running", "paused"]}}) paginated
 */
import { Sandbox, type SandboxInfo, type SandboxListOpts, type SandboxOpts } from "e2b";
import { ProviderError, ValidationError } from "../../domain/errors";
import type { GitFreshnessConfig } from "../../domain/git-freshness";
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
import { toProviderError, type ProviderFailureKind } from "../provider-errors";
import { checkRestoredProcesses, stopRestoredBootCommand } from "../restored-processes";
import { normalizeExecOptions, requireValidEnvNames } from "../sandbox-inputs";
import {
  SANDBOX_PATHS,
  SANDBOX_PORTS,
  buildSandboxEnv,
  buildShellEnv,
  defaultReadinessDeps,
  imageBootSpec,
  runImageBoot,
  shellJoin,
  sandboxKeyOf,
  deliverSandboxKey,
  waitForOpenCodeReady,
  type ReadinessDeps,
  type SandboxExec,
  sidecarUrlOnPreview,
} from "../sandbox-boot";

/**
 * A failed resume of a paused sandbox, or a restore from a snapshot template E2B no longer has:
 * reported, never replaced by a fresh sandbox (seed 003 §9); the flow clears the snapshot.
 */
export const RESUME_SANDBOX_OPERATION = "resumeSandbox";
/** Prefix for ids from `snapshot()` (E2B snapshot templates), told apart from paused sandbox ids. */
export const E2B_SNAPSHOT_PREFIX = "e2b-snapshot:";
/** Metadata tag on every sandbox this control plane creates: `checkSandboxes` lists by it. */
export const MANAGED_BY_METADATA = { managedBy: "sandbox-control-plane" } as const;

const PROVIDER = "e2b";
/** E2B's default template: a plain image without sandbox/image's boot script. */
const E2B_STOCK_TEMPLATE = "base";

// ---- The SDK surface this provider uses (a structural subset of e2b's `Sandbox`). ----

export interface E2BCommandResultLike {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface E2BSandboxLike {
  readonly sandboxId: string;
  getHost(port: number): string;
  files: { write(path: string, data: string): Promise<unknown> };
  commands: { run(cmd: string, opts?: { cwd?: string; timeoutMs?: number }): Promise<E2BCommandResultLike> };
}

export interface E2BPaginatorLike {
  readonly hasNext: boolean;
  nextItems(): Promise<SandboxInfo[]>;
}

export interface E2BSdk {
  create(template: string, opts: SandboxOpts): Promise<E2BSandboxLike>;
  connect(sandboxId: string, opts?: { timeoutMs?: number }): Promise<E2BSandboxLike>;
  kill(sandboxId: string): Promise<boolean>;
  pause(sandboxId: string, opts: { keepMemory: boolean }): Promise<boolean>;
  createSnapshot(sandboxId: string): Promise<{ snapshotId: string }>;
  /** `true` if deleted, `false` if not found. */
  deleteSnapshot(snapshotId: string): Promise<boolean>;
  getInfo(sandboxId: string): Promise<SandboxInfo>;
  list(opts: SandboxListOpts): E2BPaginatorLike;
}

export interface E2BProviderConfig {
  /**
   * `E2B_TEMPLATE`: the template built from sandbox/image (`sandbox/image/main.ts e2b`), which has
   * the boot script. Required: E2B's default `base` template has none, so every create would fail.
   */
  template: string;
  timeoutSeconds: number;
  apiKey?: string;
  domain?: string;
  gitFreshness?: GitFreshnessConfig;
  /** The deployment's model keys (DEPLOYMENT_MODEL_VARS), for sessions without their own. */
  modelEnv?: Record<string, string>;
}

export interface E2BProviderDeps {
  now?: () => number;
  readiness?: ReadinessDeps;
}

/** The real SDK: e2b's `Sandbox` statics with the connection options bound. */
export function createE2BSdk(config: Pick<E2BProviderConfig, "apiKey" | "domain">): E2BSdk {
  const conn = { ...(config.apiKey ? { apiKey: config.apiKey } : {}), ...(config.domain ? { domain: config.domain } : {}) };
  return {
    create: (template, opts) => Sandbox.create(template, { ...conn, ...opts }),
    connect: (id, opts) => Sandbox.connect(id, { ...conn, ...opts }),
    kill: (id) => Sandbox.kill(id, conn),
    pause: (id, opts) => Sandbox.pause(id, { ...conn, ...opts }),
    createSnapshot: (id) => Sandbox.createSnapshot(id, conn),
    deleteSnapshot: (id) => Sandbox.deleteSnapshot(id, conn),
    getInfo: (id) => Sandbox.getInfo(id, conn),
    list: (opts) => Sandbox.list({ ...conn, ...opts }),
  };
}

/**
 * Maps e2b's error classes by name (2.x: SandboxNotFoundError ⊂ NotFoundError, AuthenticationError, ...).
 * Calls without a dedicated 404 mapping (a create from a deleted snapshot template) throw a bare
 * `SandboxError` carrying `statusCode: 404`: not found too.
 */
export function classifyE2BError(err: unknown): ProviderFailureKind {
  if (!(err instanceof Error)) return "other";
  const status = (err as { statusCode?: unknown }).statusCode;
  if (status === 404) return "not_found";
  if (status === 401 || status === 403) return "auth";
  switch (err.name) {
    case "NotFoundError":
    case "SandboxNotFoundError":
      return "not_found";
    case "AuthenticationError":
      return "auth";
    case "TimeoutError":
    case "RateLimitError":
    case "ServiceBusyError":
      return "transient";
    default:
      return "other";
  }
}

export class E2BSandboxProvider implements SandboxProvider {
  readonly type = "e2b" as const;
  readonly supportsPause = true;
  /** Sandboxes are created with `lifecycle.onTimeout = "pause"`. */
  readonly supportsAutoPause = true;
  readonly supportsMemorySnapshot = false;

  /**
   * Both kinds of E2B snapshot come back with their processes: a paused sandbox (resumed by
   * `connect`) and a snapshot template (`createSnapshot` keeps memory; a sandbox created from it
   * starts with the snapshotted processes running, the sidecar with the key it booted with).
   */
  keepsProcesses(snapshotId: string | null | undefined): boolean {
    return Boolean(snapshotId);
  }

  private readonly now: () => number;
  private readonly readiness: ReadinessDeps;

  constructor(
    private readonly sdk: E2BSdk,
    private readonly config: E2BProviderConfig,
    deps: E2BProviderDeps = {},
  ) {
    this.now = deps.now ?? Date.now;
    this.readiness = deps.readiness ?? defaultReadinessDeps;
    if (!config.template.trim() || config.template === E2B_STOCK_TEMPLATE) {
      throw new ValidationError(
        `e2b provider: E2B_TEMPLATE must name the template built from sandbox/image (npx tsx sandbox/image/main.ts e2b <name>); E2B's "${E2B_STOCK_TEMPLATE}" template has no boot script`,
      );
    }
  }

  /** seed 003 §6.3 `findSandbox()`: E2B generates ids, so recovery goes through `currentSandboxId`. */
  async ensureSandbox(opts: CreateSandboxOpts): Promise<EnsureSandboxResult> {
    const liveId = await this.findLiveSandbox(opts.sessionId, opts.currentSandboxId);
    if (liveId) {
      try {
        const sandbox = await this.sdk.connect(liveId, { timeoutMs: this.timeoutMs() });
        // The expiry as E2B has it now (connect only ever lengthens a running sandbox's timeout),
        // so the control plane arms the expiry migration of a recovered sandbox too.
        const { endAt } = await this.sdk.getInfo(sandbox.sandboxId);
        const expiresAt = endAt instanceof Date && Number.isFinite(endAt.getTime()) ? endAt.getTime() : null;
        return { ...this.urls(sandbox), sandboxId: sandbox.sandboxId, expiresAt, recovered: true };
      } catch (err) {
        throw this.error("ensureSandbox", err);
      }
    }
    return { ...(await this.createSandbox(opts)), recovered: false };
  }

  async createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult> {
    if (opts.snapshotId && !opts.snapshotId.startsWith(E2B_SNAPSHOT_PREFIX)) return this.resume(opts, opts.snapshotId);
    if (opts.snapshotId) return this.restoreFromSnapshot(opts, opts.snapshotId);
    let sandbox: E2BSandboxLike | null = null;
    try {
      sandbox = await this.sdk.create(this.config.template, this.createOptions(opts));
      await this.boot(sandbox, opts, false);
      return { sandboxId: sandbox.sandboxId, ...this.urls(sandbox), expiresAt: this.expiresAt() };
    } catch (err) {
      if (sandbox) await this.sdk.kill(sandbox.sandboxId).catch(() => undefined);
      throw this.error("createSandbox", err);
    }
  }

  /**
   * Resume a paused sandbox (seed 003 §6.3 step 2). Processes survived the pause, so no boot;
   * env vars are re-injected through a JSON file because the secrets may have rotated.
   */
  private async resume(opts: CreateSandboxOpts, sandboxId: string): Promise<CreateSandboxResult> {
    try {
      const sandbox = await this.sdk.connect(sandboxId, { timeoutMs: this.timeoutMs() });
      await this.adoptRestoredProcesses(sandbox, opts);
      return { sandboxId: sandbox.sandboxId, ...this.urls(sandbox), expiresAt: this.expiresAt() };
    } catch (err) {
      throw toProviderError(PROVIDER, RESUME_SANDBOX_OPERATION, err, classifyE2BError, `resume of paused sandbox ${sandboxId} failed`);
    }
  }

  /**
   * A sandbox from a snapshot template (issue 22 §1): it starts with the snapshotted memory, so
   * OpenCode, Caddy and the sidecar are already running; handled like a resume. A snapshot that
   * no longer exists is the restore failure (`resumeSandbox`, not retryable), so the flow clears it.
   */
  private async restoreFromSnapshot(opts: CreateSandboxOpts, snapshotId: string): Promise<CreateSandboxResult> {
    let sandbox: E2BSandboxLike;
    try {
      sandbox = await this.sdk.create(snapshotId.slice(E2B_SNAPSHOT_PREFIX.length), this.createOptions(opts));
    } catch (err) {
      if (classifyE2BError(err) === "not_found") throw toProviderError(PROVIDER, RESUME_SANDBOX_OPERATION, err, classifyE2BError, `snapshot ${snapshotId} no longer exists`);
      throw this.error("createSandbox", err);
    }
    try {
      await this.adoptRestoredProcesses(sandbox, opts);
      return { sandboxId: sandbox.sandboxId, ...this.urls(sandbox), expiresAt: this.expiresAt() };
    } catch (err) {
      await this.sdk.kill(sandbox.sandboxId).catch(() => undefined);
      throw this.error("createSandbox", err);
    }
  }

  private createOptions(opts: CreateSandboxOpts): SandboxOpts {
    const envs = buildSandboxEnv(opts, this.config.modelEnv ?? {});
    requireValidEnvNames(PROVIDER, "createSandbox", envs);
    return {
      envs,
      metadata: { sessionId: opts.sessionId, ...MANAGED_BY_METADATA },
      timeoutMs: this.timeoutMs(),
      // Never resumed by traffic: only the control plane resumes (and so re-arms the expiry migration).
      lifecycle: { onTimeout: "pause", autoResume: false },
    };
  }

  /** The image's boot (sandbox/boot): phase 1 blocks this exec, phase 2 runs on in the sandbox. */
  private async boot(sandbox: E2BSandboxLike, opts: CreateSandboxOpts, restored: boolean): Promise<void> {
    const spec = imageBootSpec(opts, { restored, now: this.now(), gitFreshness: this.config.gitFreshness ?? null });
    await sandbox.files.write(SANDBOX_PATHS.bootRequest, JSON.stringify(spec));
    await deliverSandboxKey(writeKeyFile(sandbox), opts);
    await runImageBoot(execVia(sandbox), "start", { file: SANDBOX_PATHS.bootRequest });
    await waitForOpenCodeReady(this.urls(sandbox).tunnelUrl, this.readiness, { sandboxKey: sandboxKeyOf(opts) });
  }

  /**
   * A sandbox that came back with its memory (restored-processes.ts): re-export the session's
   * env for new shells, then keep healthy processes (git freshness pull only) or, when they do
   * not answer with this session's key, stop them and boot again on the restored filesystem.
   */
  private async adoptRestoredProcesses(sandbox: E2BSandboxLike, opts: CreateSandboxOpts): Promise<void> {
    const exec = execVia(sandbox);
    await sandbox.files.write(SANDBOX_PATHS.envJson, JSON.stringify(buildShellEnv(opts)));
    const exportEnv =
      `jq -r 'to_entries[] | "export \\(.key)=\\(.value | @sh)"' ${SANDBOX_PATHS.envJson} > ${SANDBOX_PATHS.envProfile}` +
      ` && (grep -qs 'env.proliferate' /home/user/.bashrc || echo '. ${SANDBOX_PATHS.envProfile}' >> /home/user/.bashrc)`;
    const exported = await exec(["sh", "-c", exportEnv]);
    if (exported.exitCode !== 0) throw new Error(`export env exited ${exported.exitCode}: ${exported.stderr.slice(0, 2_000)}`);
    const health = await checkRestoredProcesses(this.urls(sandbox), this.readiness, sandboxKeyOf(opts));
    if (!health.healthy) {
      const stopped = await exec(stopRestoredBootCommand(), { timeoutMs: 30_000 });
      if (stopped.exitCode !== 0) throw new Error(`stopping the restored processes exited ${stopped.exitCode}: ${stopped.stderr.slice(0, 500)}`);
      await this.boot(sandbox, opts, true);
      return;
    }
    const freshness = opts.gitFreshness ?? this.config.gitFreshness ?? null;
    if (freshness?.enabled) {
      const spec = imageBootSpec(opts, { restored: true, now: this.now(), gitFreshness: freshness });
      await sandbox.files.write(SANDBOX_PATHS.bootRequest, JSON.stringify(spec));
      // Best effort (seed 003 §6.7): a failed pull never fails the resume; the cadence stays, so the next one retries.
      await runImageBoot(exec, "resume", { file: SANDBOX_PATHS.bootRequest }).catch(() => undefined);
    }
  }

  /** A snapshot template of the running sandbox; E2B pauses it only while the snapshot is taken. */
  async snapshot(_sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    try {
      const info = await this.sdk.createSnapshot(sandboxId);
      return { snapshotId: `${E2B_SNAPSHOT_PREFIX}${info.snapshotId}` };
    } catch (err) {
      throw this.error("snapshot", err);
    }
  }

  /** Native pause keeping memory; the sandbox id is the snapshot id. Already paused is success. */
  async pause(_sessionId: string, sandboxId: string): Promise<PauseResult> {
    try {
      await this.sdk.pause(sandboxId, { keepMemory: true });
      return { snapshotId: sandboxId };
    } catch (err) {
      throw this.error("pause", err);
    }
  }

  async memorySnapshot(_sessionId: string, _sandboxId: string): Promise<SnapshotResult> {
    throw new ProviderError(PROVIDER, "memorySnapshot", "E2B has no memory snapshots; use pause", { retryable: false });
  }

  /**
   * Neither kind expires at E2B (its docs: a paused sandbox's data is kept until it is killed; a
   * snapshot "is a persistent image that survives sandbox deletion"), so both are deleted here.
   * A snapshot template goes with `deleteSnapshot`. A paused sandbox's id is its snapshot: it is
   * killed only while it is paused; a running one is a live sandbox, not a snapshot (it ends
   * with `terminate`), so that is a no-op. Idempotent: a snapshot that is already gone is success.
   */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    try {
      if (snapshotId.startsWith(E2B_SNAPSHOT_PREFIX)) {
        await this.sdk.deleteSnapshot(snapshotId.slice(E2B_SNAPSHOT_PREFIX.length));
        return;
      }
      let info: SandboxInfo;
      try {
        info = await this.sdk.getInfo(snapshotId);
      } catch (err) {
        if (classifyE2BError(err) === "not_found") return;
        throw err;
      }
      if (info.state !== "paused") return;
      try {
        await this.sdk.kill(snapshotId);
      } catch (err) {
        if (classifyE2BError(err) !== "not_found") throw err;
      }
    } catch (err) {
      throw this.error("deleteSnapshot", err);
    }
  }

  /** Idempotent: `kill` answers false for a sandbox that is already gone. */
  async terminate(sessionId: string, sandboxId?: string | null): Promise<void> {
    try {
      const ids = sandboxId ? [sandboxId] : (await this.listAll({ metadata: { sessionId } })).map((s) => s.sandboxId);
      for (const id of ids) {
        try {
          await this.sdk.kill(id);
        } catch (err) {
          if (classifyE2BError(err) !== "not_found") throw err;
        }
      }
    } catch (err) {
      throw this.error("terminate", err);
    }
  }

  /** `list` never resumes a paused sandbox (seed 003 §6.3); only running sandboxes count as alive. */
  async checkSandboxes(sandboxIds: string[]): Promise<string[]> {
    if (sandboxIds.length === 0) return [];
    try {
      const running = new Set(
        (await this.listAll({ metadata: { ...MANAGED_BY_METADATA }, state: ["running"] })).map((s) => s.sandboxId),
      );
      return [...new Set(sandboxIds)].filter((id) => running.has(id));
    } catch (err) {
      throw this.error("checkSandboxes", err);
    }
  }

  /** Running and paused sandboxes tagged by this control plane (a paused one still holds storage). */
  async listSandboxes(): Promise<ListedSandbox[]> {
    try {
      const infos = await this.listAll({ metadata: { ...MANAGED_BY_METADATA }, state: ["running", "paused"] });
      return infos.map((info) => {
        const startedAt = info.startedAt instanceof Date ? info.startedAt.getTime() : Number.NaN;
        return {
          sandboxId: info.sandboxId,
          sessionId: info.metadata.sessionId ?? null,
          startedAt: Number.isFinite(startedAt) ? startedAt : null,
          state: info.state === "paused" ? "paused" : "running",
        };
      });
    } catch (err) {
      throw this.error("listSandboxes", err);
    }
  }

  async health(): Promise<boolean> {
    try {
      await this.sdk.list({ limit: 1 }).nextItems();
      return true;
    } catch {
      return false;
    }
  }

  /** Only for running sandboxes: `connect` would resume a paused one. */
  async resolveTunnels(sandboxId: string): Promise<SandboxTunnels> {
    try {
      const sandbox = await this.connectRunning(sandboxId, "resolveTunnels");
      const urls = this.urls(sandbox);
      return { openCodeUrl: urls.tunnelUrl, previewUrl: urls.previewUrl, sidecarUrl: sidecarUrlOnPreview(urls.previewUrl) };
    } catch (err) {
      throw this.error("resolveTunnels", err);
    }
  }

  /** Running sandboxes only, like `resolveTunnels`: an exec never resumes a paused sandbox. */
  async execCommand(sandboxId: string, argv: string[], opts: { cwd?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    try {
      const options = normalizeExecOptions(PROVIDER, "execCommand", opts);
      const sandbox = await this.connectRunning(sandboxId, "execCommand");
      return await execVia(sandbox)(argv, options);
    } catch (err) {
      throw this.error("execCommand", err);
    }
  }

  // ---- internals ----

  /**
   * A handle on a running sandbox (issue 22 §5): the state is checked first, and `connect` gets
   * what is left of the sandbox's timeout, so it neither lengthens a running sandbox's life nor,
   * if the sandbox paused in between, resumes it for E2B's 300 s default.
   */
  private async connectRunning(sandboxId: string, operation: string): Promise<E2BSandboxLike> {
    const info = await this.sdk.getInfo(sandboxId);
    if (info.state !== "running") throw new ProviderError(PROVIDER, operation, `sandbox is ${info.state}`, { context: { kind: "other" } });
    const endAt = info.endAt instanceof Date ? info.endAt.getTime() : Number.NaN;
    const left = Number.isFinite(endAt) ? Math.max(1_000, Math.ceil((endAt - this.now()) / 1_000) * 1_000) : this.timeoutMs();
    return this.sdk.connect(sandboxId, { timeoutMs: left });
  }

  private async findLiveSandbox(sessionId: string, currentSandboxId: string | null | undefined): Promise<string | null> {
    if (!currentSandboxId) return null;
    try {
      const info = await this.sdk.getInfo(currentSandboxId);
      // A paused sandbox is not live: `createSandbox` resumes it through the session's snapshotId.
      return info.state === "running" && info.metadata.sessionId === sessionId ? info.sandboxId : null;
    } catch (err) {
      if (classifyE2BError(err) === "not_found") return null;
      throw this.error("ensureSandbox", err);
    }
  }

  private async listAll(query: NonNullable<SandboxListOpts["query"]>): Promise<SandboxInfo[]> {
    const paginator = this.sdk.list({ query });
    const out: SandboxInfo[] = [];
    while (paginator.hasNext) out.push(...(await paginator.nextItems()));
    return out;
  }

  private urls(sandbox: E2BSandboxLike): { tunnelUrl: string; previewUrl: string } {
    return {
      tunnelUrl: `https://${sandbox.getHost(SANDBOX_PORTS.opencode)}`,
      previewUrl: `https://${sandbox.getHost(SANDBOX_PORTS.preview)}`,
    };
  }

  private timeoutMs(): number {
    return this.config.timeoutSeconds * 1_000;
  }

  private expiresAt(): number {
    return this.now() + this.timeoutMs();
  }

  private error(operation: string, err: unknown): ProviderError {
    return toProviderError(PROVIDER, operation, err, classifyE2BError);
  }
}

/**
 * The sandbox key file for the boot (`deliverSandboxKey`): `commands.run` has no stdin here, so
 * the files API writes it and a chmod narrows it to 0600. The boot removes it before it starts
 * any other process, so nothing of the agent's runs while it exists.
 */
function writeKeyFile(sandbox: E2BSandboxLike): (path: string, content: string) => Promise<void> {
  return async (path, content) => {
    await sandbox.files.write(path, content);
    const r = await execVia(sandbox)(["chmod", "600", path]);
    if (r.exitCode !== 0) throw new Error(`chmod ${path} exited ${r.exitCode}`);
  };
}

/** `commands.run` throws `CommandExitError` (which carries the result) on a non-zero exit. */
function execVia(sandbox: E2BSandboxLike): SandboxExec {
  return async (argv, opts = {}) => {
    try {
      const r = await sandbox.commands.run(shellJoin(argv), {
        ...(opts.cwd ? { cwd: opts.cwd } : {}),
        ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}),
      });
      return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode };
    } catch (err) {
      const r = err as Partial<E2BCommandResultLike>;
      if (err instanceof Error && err.name === "CommandExitError" && typeof r.exitCode === "number") {
        return { stdout: r.stdout ?? "", stderr: r.stderr ?? "", exitCode: r.exitCode };
      }
      throw err;
    }
  };
}
