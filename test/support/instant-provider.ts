/**
 * An in-memory `SandboxProvider` with zero latency, for benchmarks and fast race tests: it keeps
 * the port's semantics (ports/sandbox-provider.ts) without processes. Sandbox ids are numbered
 * in creation order (`isb_1`, `isb_2`...), so a test can tell which actor created which sandbox.
 * Native pause (the sandbox id is the snapshot id, resumed by `createSandbox`) and memory
 * snapshots are on by default and can be switched off to play a provider without them.
 */
import { ProviderError } from "../../functions/domain/errors";
import type { ProviderType } from "../../functions/domain/session";
import type {
  CreateSandboxOpts,
  CreateSandboxResult,
  EnsureSandboxResult,
  ListedSandbox,
  PauseResult,
  SandboxProvider,
  SnapshotResult,
  SandboxTunnels,
} from "../../functions/ports/sandbox-provider";

export interface InstantSandboxProviderOptions {
  type?: ProviderType;
  /** The OpenCode base URL every sandbox reports. Default "http://instant.invalid". */
  tunnelUrl?: string;
  /** The preview proxy URL every sandbox reports (a function: each sandbox its own). Default null (none). */
  previewUrl?: string | null | ((sandboxId: string) => string | null);
  /** `expiresAt` = now + this. Default 3600. */
  timeoutSeconds?: number;
  supportsPause?: boolean;
  supportsAutoPause?: boolean;
  supportsMemorySnapshot?: boolean;
  /**
   * Memory snapshots expire this long after they are taken (Modal: 7 days), reported as the
   * snapshot's `expiresAt`; restoring one past it fails as Modal's restore does. Default: never.
   */
  memorySnapshotLifetimeMs?: number;
  now?: () => number;
}

/** A snapshot the provider took: deleted ones stay listed so a test can see what was deleted. */
export interface InstantSnapshot {
  snapshotId: string;
  sandboxId: string;
  takenAt: number;
  expiresAt: number | null;
  deleted: boolean;
}

export interface InstantSandbox {
  sandboxId: string;
  sessionId: string;
  state: "running" | "paused" | "terminated";
  /** The snapshot the sandbox was created or resumed from, if any. */
  restoredFrom: string | null;
  createdAt: number;
  expiresAt: number;
}

export class InstantSandboxProvider implements SandboxProvider {
  readonly type: ProviderType;
  readonly supportsPause: boolean;
  readonly supportsAutoPause: boolean;
  readonly supportsMemorySnapshot: boolean;

  private readonly tunnelUrl: string;
  private readonly previewUrl: (sandboxId: string) => string | null;
  private readonly timeoutSeconds: number;
  private readonly now: () => number;
  private readonly sandboxes = new Map<string, InstantSandbox>();
  private readonly snapshots = new Map<string, InstantSnapshot>();
  private readonly memorySnapshotLifetimeMs: number | null;
  private sandboxCounter = 0;
  private snapshotCounter = 0;

  constructor(options: InstantSandboxProviderOptions = {}) {
    this.type = options.type ?? "local";
    this.tunnelUrl = options.tunnelUrl ?? "http://instant.invalid";
    const preview = options.previewUrl ?? null;
    this.previewUrl = typeof preview === "function" ? preview : () => preview;
    this.timeoutSeconds = options.timeoutSeconds ?? 3600;
    this.supportsPause = options.supportsPause ?? true;
    this.supportsAutoPause = options.supportsAutoPause ?? false;
    this.supportsMemorySnapshot = options.supportsMemorySnapshot ?? true;
    this.now = options.now ?? Date.now;
    this.memorySnapshotLifetimeMs = options.memorySnapshotLifetimeMs ?? null;
    if (this.supportsAutoPause && !this.supportsPause) throw new Error("supportsAutoPause requires supportsPause");
  }

  /** Ids of running sandboxes, in creation order. */
  live(): string[] {
    return [...this.sandboxes.values()].filter((s) => s.state === "running").map((s) => s.sandboxId);
  }

  /** A copy of what the provider knows about a sandbox, or null. */
  sandbox(sandboxId: string): InstantSandbox | null {
    const found = this.sandboxes.get(sandboxId);
    return found ? { ...found } : null;
  }

  /** The sandbox dies outside the control plane (crash, provider-side expiry). */
  kill(sandboxId: string): void {
    const found = this.sandboxes.get(sandboxId);
    if (found) found.state = "terminated";
  }

  /** A copy of what the provider knows about a snapshot it took, or null. */
  snapshotInfo(snapshotId: string): InstantSnapshot | null {
    const found = this.snapshots.get(snapshotId);
    return found ? { ...found } : null;
  }

  /** Ids of the snapshots taken and not deleted, in order. */
  storedSnapshots(): string[] {
    return [...this.snapshots.values()].filter((s) => !s.deleted).map((s) => s.snapshotId);
  }

  /** A memory snapshot or a paused sandbox comes back with its processes (its sidecar's key too). */
  keepsProcesses(snapshotId: string | null | undefined): boolean {
    if (!snapshotId) return false;
    return snapshotId.startsWith("mem:") || this.sandboxes.get(snapshotId)?.state === "paused";
  }

  /** Every create call's options, in order (what the provision step asked for). */
  readonly createCalls: CreateSandboxOpts[] = [];

  async ensureSandbox(opts: CreateSandboxOpts): Promise<EnsureSandboxResult> {
    const current = opts.currentSandboxId ? this.sandboxes.get(opts.currentSandboxId) : undefined;
    const candidates = [current, ...[...this.sandboxes.values()].reverse()];
    const live = candidates.find((s) => s !== undefined && s.state === "running" && s.sessionId === opts.sessionId);
    if (live) return { ...this.resultOf(live), recovered: true };
    return { ...(await this.createSandbox(opts)), recovered: false };
  }

  /** A paused sandbox's id as `snapshotId` resumes that sandbox under its own id (native pause). */
  async createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult> {
    this.createCalls.push(opts);
    const restoreFrom = opts.snapshotId ?? opts.baseSnapshotId ?? null;
    if (restoreFrom?.startsWith("mem:") && !this.supportsMemorySnapshot) {
      throw this.fail("createSandbox", `memory snapshot ${restoreFrom} cannot be restored by this provider`);
    }
    const taken = opts.snapshotId ? this.snapshots.get(opts.snapshotId) : undefined;
    if (taken && (taken.deleted || (taken.expiresAt !== null && this.now() >= taken.expiresAt))) {
      // Modal's restore of a memory snapshot past its lifetime fails for good (RestoreFailed).
      const operation = taken.snapshotId.startsWith("mem:") ? "restoreFromMemorySnapshot" : "createSandbox";
      throw this.fail(operation, `snapshot ${taken.snapshotId} is ${taken.deleted ? "deleted" : "expired"}`);
    }
    const paused = opts.snapshotId ? this.sandboxes.get(opts.snapshotId) : undefined;
    if (paused?.state === "paused") {
      paused.state = "running";
      paused.restoredFrom = paused.sandboxId;
      paused.expiresAt = this.now() + this.timeoutSeconds * 1000;
      return this.resultOf(paused);
    }
    this.sandboxCounter += 1;
    const createdAt = this.now();
    const sandbox: InstantSandbox = {
      sandboxId: `isb_${this.sandboxCounter}`,
      sessionId: opts.sessionId,
      state: "running",
      restoredFrom: restoreFrom,
      createdAt,
      expiresAt: createdAt + this.timeoutSeconds * 1000,
    };
    this.sandboxes.set(sandbox.sandboxId, sandbox);
    return this.resultOf(sandbox);
  }

  async snapshot(_sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    this.running("snapshot", sandboxId);
    return this.took(this.nextSnapshotId(), sandboxId, null);
  }

  async pause(_sessionId: string, sandboxId: string): Promise<PauseResult> {
    if (!this.supportsPause) throw this.fail("pause", "this provider cannot pause", sandboxId);
    const found = this.sandboxes.get(sandboxId);
    // Already paused is success, as for E2B.
    if (found?.state === "paused") return { snapshotId: sandboxId };
    this.running("pause", sandboxId).state = "paused";
    return { snapshotId: sandboxId };
  }

  async memorySnapshot(_sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    if (!this.supportsMemorySnapshot) throw this.fail("memorySnapshot", "this provider has no memory snapshots", sandboxId);
    this.running("memorySnapshot", sandboxId);
    const lifetime = this.memorySnapshotLifetimeMs;
    return this.took(`mem:${this.nextSnapshotId()}`, sandboxId, lifetime === null ? null : this.now() + lifetime);
  }

  /** Idempotent. A paused sandbox's id is its snapshot: deleting it ends that sandbox (as E2B's kill). */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    const taken = this.snapshots.get(snapshotId);
    if (taken) taken.deleted = true;
    if (this.sandboxes.get(snapshotId)?.state === "paused") this.kill(snapshotId);
  }

  private took(snapshotId: string, sandboxId: string, expiresAt: number | null): SnapshotResult {
    this.snapshots.set(snapshotId, { snapshotId, sandboxId, takenAt: this.now(), expiresAt, deleted: false });
    return expiresAt === null ? { snapshotId } : { snapshotId, expiresAt };
  }

  async terminate(sessionId: string, sandboxId?: string | null): Promise<void> {
    if (sandboxId) {
      this.kill(sandboxId);
      return;
    }
    for (const s of this.sandboxes.values()) if (s.sessionId === sessionId) s.state = "terminated";
  }

  async checkSandboxes(sandboxIds: string[]): Promise<string[]> {
    return sandboxIds.filter((id) => this.sandboxes.get(id)?.state === "running");
  }

  /** Running and paused sandboxes, in creation order. */
  async listSandboxes(): Promise<ListedSandbox[]> {
    const listed: ListedSandbox[] = [];
    for (const s of this.sandboxes.values()) {
      if (s.state === "terminated") continue;
      listed.push({ sandboxId: s.sandboxId, sessionId: s.sessionId, startedAt: s.createdAt, state: s.state });
    }
    return listed;
  }

  async health(): Promise<boolean> {
    return true;
  }

  async resolveTunnels(sandboxId: string): Promise<SandboxTunnels> {
    this.running("resolveTunnels", sandboxId);
    return { openCodeUrl: this.tunnelUrl, previewUrl: this.previewUrl(sandboxId), sidecarUrl: null };
  }

  private running(operation: string, sandboxId: string): InstantSandbox {
    const found = this.sandboxes.get(sandboxId);
    if (!found || found.state !== "running") throw this.fail(operation, `sandbox ${sandboxId} is not running`, sandboxId);
    return found;
  }

  private nextSnapshotId(): string {
    this.snapshotCounter += 1;
    return `isnap_${this.snapshotCounter}`;
  }

  private resultOf(sandbox: InstantSandbox): CreateSandboxResult {
    return { sandboxId: sandbox.sandboxId, tunnelUrl: this.tunnelUrl, previewUrl: this.previewUrl(sandbox.sandboxId), expiresAt: sandbox.expiresAt };
  }

  private fail(operation: string, message: string, sandboxId?: string): ProviderError {
    return new ProviderError(this.type, operation, message, { retryable: false, context: sandboxId ? { sandboxId } : {} });
  }
}
