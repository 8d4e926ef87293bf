/**
 * Modal sandbox provider (seed 003 §6.2; memory snapshots: seed 002 §1a-1f). Stateless: every
 * call finds the sandbox again through the SDK (by name = session id, or by id). The SDK client
 * is injected so tests pass a double that records calls; `createModalSdk` builds the real one.
 *
 * Backend (issue 22 §2): modal@0.11 creates V2 sandboxes unless `MODAL_SANDBOX_V2` (or the
 * `.modal.toml` profile) says otherwise, and `fromName` and `list` follow the same flag. The
 * provider sets it itself from `MODAL_SANDBOX_BACKEND` (default `v2`), so the backend never
 * depends on the ambient environment. V2: the SDK's default and Modal's current backend; memory
 * snapshots work on it (`experimentalEnableSnapshot`), and its docs list encrypted tunnels only,
 * so SSH (only for sessions with an SSH key) is a TLS tunnel to port 22 (`sshTransport: "tls"`:
 * `ssh -o ProxyCommand='openssl s_client -quiet -connect %h:%p'`); a V2 sandbox that returns no
 * tunnel for it fails the create naming the port and the backend. V1: SSH is raw TCP on an
 * unencrypted tunnel, as before. Switching v1 -> v2 keeps every sandbox findable (V2's `fromName`
 * falls back to V1 names, its list returns both, a memory snapshot restores on the backend it was
 * taken on); v2 -> v1 loses sight of running V2 sandboxes, so switch back only with none running.
 *
 * SDK calls (modal@0.11):
 *   create:  apps.fromName(appName, {createIfMissing: true}) → images.fromId | images.fromRegistry → sandboxes.create(app, image, params{name, tags})
 *            → sandbox.tunnels() → sandbox.exec(["node", "/opt/sandbox/boot.mjs", "start", "--spec", "-"]) with the
 *            boot spec on stdin (sandbox/boot: phase 1 blocks the exec) → readiness poll through the tunnel
 *   ensure:  sandboxes.fromName(appName, sessionId) → sandbox.poll() (null = running) → sandbox.tunnels()
 *            → sandbox.getTags() (the expiry recorded at create: modal@0.11 exposes no creation time or timeout)
 *   mem restore: sandboxSnapshots.fromId(id) → sandboxes.experimentalFromSnapshot(snap, {name}) → sandbox.setTags(tags)
 *            → tunnels → readiness
 *   listSandboxes: apps.fromName(appName, {createIfMissing: true}) → sandboxes.list({appId, tags: {control-plane}}) (the SDK walks the pages;
 *            running sandboxes only) → sandbox.getTags() each (the listing carries only ids) for the session id
 *   snapshot: sandboxes.fromId → sandbox.snapshotFilesystem({ttlMs}) (image id; the TTL always explicit:
 *            MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS, 0 = `ttlMs: null`, kept until deleted; the SDK's default is 30 days)
 *   memorySnapshot: sandboxes.fromId → V2: sandbox.experimentalSnapshot() (the SDK waits up to 165 s); V1: cpClient.sandboxSnapshot({sandboxId})
 *            → cpClient.sandboxSnapshotWait({snapshotId, timeout}) repeated until 120 s in all (the SDK's own V1 path waits
 *            only 55 s); `mem:` + snapshot id, expires 7 days after creation
 *   deleteSnapshot: images.delete(imageId) (NotFoundError = already gone); `mem:` ids: nothing to call (below)
 *   terminate: sandboxes.fromId | sandboxes.fromName → sandbox.terminate()
 *   checkSandboxes: sandboxes.fromId → sandbox.poll()
 *   execCommand: sandboxes.fromId → sandbox.exec(argv, {workdir: absolute, timeoutMs: whole seconds})
 */
import { ModalClient, type SandboxCreateParams, type SandboxListParams } from "modal";
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
import { redactSecrets } from "../../observability/redact-secrets";
import { failureKindOf, toProviderError, type ProviderFailureKind } from "../provider-errors";
import { normalizeExecOptions, requireValidEnvNames, wholeSecondsMs } from "../sandbox-inputs";
import {
  SANDBOX_PORTS,
  buildSandboxEnv,
  defaultReadinessDeps,
  imageBootSpec,
  runImageBoot,
  sandboxKeyOf,
  deliverSandboxKey,
  writeFileViaExec,
  waitForOpenCodeReady,
  type ReadinessDeps,
  type SandboxExec,
  sidecarUrlOnPreview,
} from "../sandbox-boot";

/** seed 002 §5c: the caller clears `snapshotId` when `ensureSandbox` fails with this operation. */
export const RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION = "restoreFromMemorySnapshot";
/** seed 002 §1 "`mem:` prefix distinguishes memory snapshot IDs"; only this provider interprets it. */
export const MEMORY_SNAPSHOT_PREFIX = "mem:";

const PROVIDER = "modal";
const TUNNEL_TIMEOUT_MS = 30_000;
/** seed 003 §6.2 step 4: 2 CPU, 4 GB RAM. */
const SANDBOX_CPU = 2;
const SANDBOX_MEMORY_MIB = 4096;
/** Tag keys on every sandbox this provider creates or restores: `listSandboxes` filters by the first. */
export const MODAL_CONTROL_PLANE_TAG = "control-plane";
export const MODAL_SESSION_TAG = "session-id";
/**
 * Tag key holding the sandbox's expiry (epoch ms), recorded when it is created or restored: the
 * SDK's sandbox handle exposes neither its creation time nor its timeout, and a recovered sandbox
 * needs its expiry for the expiry migration. A sandbox without it recovers with `expiresAt: null`.
 */
export const MODAL_EXPIRES_AT_TAG = "expires-at";
/** `getTags` calls in flight at once while listing. */
const LIST_TAGS_CONCURRENCY = 8;

// ---- The SDK surface this provider uses: a structural subset of `ModalClient` (checked below). ----

export interface ModalTunnelLike {
  readonly url: string;
  /** The TLS endpoint of an encrypted tunnel (`Tunnel.host`/`port`). */
  readonly host?: string;
  readonly port?: number;
  unencryptedHost?: string | undefined;
  unencryptedPort?: number | undefined;
}

export interface ModalProcessLike {
  stdin: { writeText(text: string): Promise<void>; close(): Promise<void> };
  stdout: { readText(): Promise<string> };
  stderr: { readText(): Promise<string> };
  wait(): Promise<number>;
}

export interface ModalSandboxLike {
  readonly sandboxId: string;
  exec(command: string[], params?: { workdir?: string; timeoutMs?: number }): Promise<ModalProcessLike>;
  tunnels(timeoutMs?: number): Promise<Record<number, ModalTunnelLike>>;
  /** `ttlMs`: lifetime from creation (the SDK's default: 30 days); `null`: kept until deleted. */
  snapshotFilesystem(params?: { ttlMs?: number | null }): Promise<{ readonly imageId: string }>;
  experimentalSnapshot(): Promise<{ readonly snapshotId: string }>;
  terminate(): Promise<void>;
  /** `null` while running, else the exit code. */
  poll(): Promise<number | null>;
  /** Replaces the sandbox's whole tag set. */
  setTags(tags: Record<string, string>): Promise<void>;
  getTags(): Promise<Record<string, string>>;
}

/** The App handle: passed back to the SDK unchanged, its id scopes `sandboxes.list`. */
export interface ModalAppRef {
  readonly appId: string;
}
/** Opaque SDK handles the provider passes back to the SDK unchanged. */
export type ModalImageRef = object;
export type ModalSnapshotRef = object;

export interface ModalSdk {
  apps: { fromName(name: string, params?: { createIfMissing?: boolean }): Promise<ModalAppRef> };
  images: {
    fromId(imageId: string): Promise<ModalImageRef>;
    fromRegistry(tag: string): ModalImageRef;
    /** Irreversible; a missing image throws `NotFoundError`. */
    delete(imageId: string): Promise<void>;
  };
  sandboxes: {
    create(app: ModalAppRef, image: ModalImageRef, params?: SandboxCreateParams): Promise<ModalSandboxLike>;
    fromId(sandboxId: string): Promise<ModalSandboxLike>;
    fromName(appName: string, name: string): Promise<ModalSandboxLike>;
    experimentalFromSnapshot(snapshot: ModalSnapshotRef, params?: { name?: string | null }): Promise<ModalSandboxLike>;
    /** Running sandboxes only; the SDK pages through the listing itself. */
    list(params?: SandboxListParams): AsyncIterable<ModalSandboxLike>;
  };
  sandboxSnapshots: { fromId(snapshotId: string): Promise<ModalSnapshotRef> };
  /**
   * Modal's control-plane gRPC client (`ModalClient.cpClient`): the two calls the SDK's V1
   * `experimentalSnapshot` makes, called here so the wait can be the seed's 120 s.
   */
  cpClient: ModalControlPlaneLike;
}

/** `GenericResult.status` values (modal_proto `GenericResult.GenericStatus`) a snapshot wait answers. */
export const MODAL_GENERIC_STATUS = { SUCCESS: 1, TIMEOUT: 4 } as const;

export interface ModalControlPlaneLike {
  sandboxSnapshot(request: { sandboxId: string }): Promise<{ readonly snapshotId: string }>;
  /** `timeout` in seconds; answers `TIMEOUT` (4) while the snapshot is still being taken. */
  sandboxSnapshotWait(request: { snapshotId: string; timeout: number }): Promise<{ readonly result?: { readonly status: number; readonly exception: string } | undefined }>;
}

/** `MODAL_SANDBOX_BACKEND`: which Modal sandbox backend the provider's client uses (see the header). */
export type ModalSandboxBackend = "v1" | "v2";
export const DEFAULT_MODAL_SANDBOX_BACKEND: ModalSandboxBackend = "v2";

export interface ModalProviderConfig {
  /** Created on first use when missing (`createIfMissing`), so it need not match the image tool's app. */
  appName: string;
  /** Default `v2`; must be the backend the SDK client was built for (`createModalSdk`). */
  sandboxBackend?: ModalSandboxBackend;
  /** Registry tag, or a Modal image id (`im-...`, e.g. from deploy.py's `get_image_id`). */
  baseImage?: string;
  /** `MODAL_BASE_SNAPSHOT_ID`: base layer image id, used when the call has no snapshot. */
  baseSnapshotId?: string;
  timeoutSeconds: number;
  tokenId?: string;
  tokenSecret?: string;
  gitFreshness?: GitFreshnessConfig;
  /** The deployment's model keys (DEPLOYMENT_MODEL_VARS), for sessions without their own. */
  modelEnv?: Record<string, string>;
  /**
   * `MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS`: lifetime of every filesystem snapshot; 0 (the
   * default) keeps them until the control plane deletes them (issue 22 §3: a paused session's
   * durable snapshot must not expire behind its back). Always passed explicitly to the SDK.
   */
  filesystemSnapshotTtlSeconds?: number;
}

/**
 * Modal memory snapshots expire 7 days after creation (Modal's sandbox snapshot docs); the
 * SDK has no call to extend or delete one.
 */
export const MODAL_MEMORY_SNAPSHOT_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;

/** Seed 002 / ARCHITECTURE.md §5: a memory snapshot may take up to 120 s before it counts as failed. */
export const MODAL_MEMORY_SNAPSHOT_WAIT_MS = 120_000;
/**
 * The longest one `SandboxSnapshotWait` asks Modal's server to hold (the SDK's and Modal's Python
 * client's own value: Modal's long polls stay under a minute), so the 120 s are several calls.
 */
const SNAPSHOT_WAIT_CALL_SECONDS = 55;

export interface ModalProviderDeps {
  now?: () => number;
  readiness?: ReadinessDeps;
}

/**
 * The real client. Typed as `ModalSdk` so a mismatch with the installed SDK fails typecheck.
 * The backend is set on the client's profile, the flag modal@0.11 reads in `sandboxes.create`,
 * `fromName` and `list` (otherwise `MODAL_SANDBOX_V2` or `.modal.toml`, default V2).
 */
export function createModalSdk(config: Pick<ModalProviderConfig, "tokenId" | "tokenSecret" | "sandboxBackend">): ModalSdk {
  const client = new ModalClient({
    ...(config.tokenId ? { tokenId: config.tokenId } : {}),
    ...(config.tokenSecret ? { tokenSecret: config.tokenSecret } : {}),
  });
  client.profile.sandboxV2 = (config.sandboxBackend ?? DEFAULT_MODAL_SANDBOX_BACKEND) === "v2";
  const sdk: ModalSdk = client;
  return sdk;
}

export function parseModalSandboxBackend(value: string | undefined): ModalSandboxBackend {
  if (value === undefined || value === "") return DEFAULT_MODAL_SANDBOX_BACKEND;
  if (value === "v1" || value === "v2") return value;
  throw new ValidationError(`modal provider: MODAL_SANDBOX_BACKEND must be "v1" or "v2", got ${JSON.stringify(value.slice(0, 32))}`);
}

/** gRPC status codes (nice-grpc `Status`) the SDK surfaces on `ClientError.code`. */
const GRPC = { DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, ABORTED: 10, UNAVAILABLE: 14, UNAUTHENTICATED: 16 } as const;

/** Maps Modal SDK errors (modal's own classes by name, or nice-grpc `ClientError` by code). */
export function classifyModalError(err: unknown): ProviderFailureKind {
  if (!(err instanceof Error)) return "other";
  const code = (err as { code?: unknown }).code;
  if (err.name === "ClientError" && typeof code === "number") {
    if (code === GRPC.NOT_FOUND) return "not_found";
    if (code === GRPC.UNAUTHENTICATED || code === GRPC.PERMISSION_DENIED) return "auth";
    if (code === GRPC.ALREADY_EXISTS) return "already_exists";
    if (code === GRPC.UNAVAILABLE || code === GRPC.DEADLINE_EXCEEDED || code === GRPC.RESOURCE_EXHAUSTED || code === GRPC.ABORTED) {
      return "transient";
    }
    return "other";
  }
  switch (err.name) {
    case "NotFoundError":
      return "not_found";
    case "AlreadyExistsError":
      return "already_exists";
    case "TimeoutError":
    case "SandboxTimeoutError":
    case "InternalFailure":
    case "ResourceExhaustedError":
      return "transient";
    default:
      return "other";
  }
}

export function isMemorySnapshotId(id: string | null | undefined): id is string {
  return typeof id === "string" && id.startsWith(MEMORY_SNAPSHOT_PREFIX);
}

export class ModalSandboxProvider implements SandboxProvider {
  readonly type = "modal" as const;
  /** Modal has no native pause: sessions snapshot + terminate (seed 003 §9). */
  readonly supportsPause = false;
  readonly supportsAutoPause = false;
  readonly supportsMemorySnapshot = true;

  /** A memory snapshot restores the processes (the sidecar with its key); anything else boots. */
  keepsProcesses(snapshotId: string | null | undefined): boolean {
    return isMemorySnapshotId(snapshotId);
  }

  private readonly now: () => number;
  private readonly readiness: ReadinessDeps;

  constructor(
    private readonly sdk: ModalSdk,
    private readonly config: ModalProviderConfig,
    deps: ModalProviderDeps = {},
  ) {
    this.now = deps.now ?? Date.now;
    this.readiness = deps.readiness ?? defaultReadinessDeps;
  }

  async ensureSandbox(opts: CreateSandboxOpts): Promise<EnsureSandboxResult> {
    const live = await this.findLiveSandbox(opts.sessionId);
    if (live) return { ...(await this.describe(live, "ensureSandbox")), recovered: true };
    try {
      return { ...(await this.createSandbox(opts)), recovered: false };
    } catch (err) {
      // A concurrent ensure created the session's sandbox first (names are unique per app): recover it.
      if (failureKindOf(err) !== "already_exists") throw err;
      const winner = await this.findLiveSandbox(opts.sessionId);
      if (!winner) throw err;
      return { ...(await this.describe(winner, "ensureSandbox")), recovered: true };
    }
  }

  async createSandbox(opts: CreateSandboxOpts): Promise<CreateSandboxResult> {
    if (isMemorySnapshotId(opts.snapshotId)) return this.restoreFromMemorySnapshot(opts, opts.snapshotId);
    let sandbox: ModalSandboxLike | null = null;
    try {
      const expiresAt = this.expiresAt();
      const params = this.createParams(opts, expiresAt);
      const app = await this.app();
      const image = await this.resolveImage(opts);
      sandbox = await this.sdk.sandboxes.create(app, image, params);
      const urls = await this.tunnelUrls(sandbox, Boolean(opts.sshPublicKey));
      // The image's boot (sandbox/boot): phase 1 blocks this exec, phase 2 runs on in the sandbox.
      const spec = imageBootSpec(opts, { restored: Boolean(opts.snapshotId), now: this.now(), gitFreshness: this.config.gitFreshness ?? null });
      await deliverSandboxKey(writeFileViaExec(execVia(sandbox)), opts);
      await runImageBoot(execVia(sandbox), "start", { stdin: JSON.stringify(spec) });
      await waitForOpenCodeReady(urls.tunnelUrl, this.readiness, { sandboxKey: sandboxKeyOf(opts) });
      return { sandboxId: sandbox.sandboxId, ...urls, expiresAt };
    } catch (err) {
      // A half-booted sandbox named after the session would be "recovered" by the next ensure.
      if (sandbox) await sandbox.terminate().catch(() => undefined);
      throw this.error("createSandbox", err);
    }
  }

  /** seed 002 §1d/1e: no boot sequence (processes are still running), no silent fallback. */
  private async restoreFromMemorySnapshot(opts: CreateSandboxOpts, memId: string): Promise<CreateSandboxResult> {
    let sandbox: ModalSandboxLike | null = null;
    try {
      const snapshot = await this.sdk.sandboxSnapshots.fromId(memId.slice(MEMORY_SNAPSHOT_PREFIX.length));
      // The session id as name keeps the restored sandbox discoverable by `fromName`.
      const expiresAt = this.expiresAt();
      sandbox = await this.sdk.sandboxes.experimentalFromSnapshot(snapshot, { name: opts.sessionId });
      // The restore params take no tags, so tag here for `listSandboxes`. Best effort: an untagged sandbox is
      // only invisible to the orphan sweeper (it still has its timeout), while failing would discard the snapshot.
      await sandbox.setTags(this.tags(opts.sessionId, expiresAt)).catch(() => undefined);
      const urls = await this.tunnelUrls(sandbox, false);
      // seed 003 §6.2: restore blocks on readiness so callers never race OpenCode's /session.
      // The restored OpenCode kept the password of the sandbox snapshotted: the same session's key.
      await waitForOpenCodeReady(urls.tunnelUrl, this.readiness, { sandboxKey: sandboxKeyOf(opts) });
      return { sandboxId: sandbox.sandboxId, ...urls, expiresAt };
    } catch (err) {
      if (sandbox) await sandbox.terminate().catch(() => undefined);
      throw toProviderError(PROVIDER, RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION, err, classifyModalError, "memory snapshot restore failed");
    }
  }

  async snapshot(_sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    try {
      const sandbox = await this.sdk.sandboxes.fromId(sandboxId);
      const ttlSeconds = this.config.filesystemSnapshotTtlSeconds ?? 0;
      const takenAt = this.now();
      const image = await sandbox.snapshotFilesystem({ ttlMs: ttlSeconds > 0 ? ttlSeconds * 1_000 : null });
      return { snapshotId: image.imageId, expiresAt: ttlSeconds > 0 ? takenAt + ttlSeconds * 1_000 : null };
    } catch (err) {
      throw this.error("snapshot", err);
    }
  }

  async pause(_sessionId: string, _sandboxId: string): Promise<PauseResult> {
    throw new ProviderError(PROVIDER, "pause", "Modal does not support pause; snapshot and terminate instead", { retryable: false });
  }

  /** seed 002 memory-only policy: no fallback to a filesystem snapshot when this fails. */
  async memorySnapshot(_sessionId: string, sandboxId: string): Promise<SnapshotResult> {
    try {
      const sandbox = await this.sdk.sandboxes.fromId(sandboxId);
      const takenAt = this.now();
      const snapshotId = this.backend === "v1" ? await this.memorySnapshotV1(sandbox.sandboxId) : (await sandbox.experimentalSnapshot()).snapshotId;
      return { snapshotId: `${MEMORY_SNAPSHOT_PREFIX}${snapshotId}`, expiresAt: takenAt + MODAL_MEMORY_SNAPSHOT_LIFETIME_MS };
    } catch (err) {
      throw this.error("memorySnapshot", err);
    }
  }

  /**
   * The V1 memory snapshot with the seed's 120 s wait: modal@0.11's `experimentalSnapshot` makes
   * these same two calls but gives up after one 55 s wait. The wait is idempotent, so it is asked
   * again with the time left until the snapshot succeeds, fails, or 120 s have passed.
   */
  private async memorySnapshotV1(sandboxId: string): Promise<string> {
    const started = this.now();
    const { snapshotId } = await this.sdk.cpClient.sandboxSnapshot({ sandboxId });
    for (;;) {
      const leftSeconds = Math.ceil((started + MODAL_MEMORY_SNAPSHOT_WAIT_MS - this.now()) / 1_000);
      if (leftSeconds <= 0) {
        throw new ProviderError(PROVIDER, "memorySnapshot", `memory snapshot ${snapshotId} of sandbox ${sandboxId} was not ready within ${MODAL_MEMORY_SNAPSHOT_WAIT_MS / 1_000} s`, {
          retryable: false,
          context: { kind: "other", snapshotId },
        });
      }
      const waited = await this.sdk.cpClient.sandboxSnapshotWait({ snapshotId, timeout: Math.min(SNAPSHOT_WAIT_CALL_SECONDS, leftSeconds) });
      const status = waited.result?.status;
      if (status === MODAL_GENERIC_STATUS.SUCCESS) return snapshotId;
      if (status !== MODAL_GENERIC_STATUS.TIMEOUT) {
        const reason = waited.result?.exception || `status ${status ?? "missing"}`;
        throw new ProviderError(PROVIDER, "memorySnapshot", `memory snapshot ${snapshotId} of sandbox ${sandboxId} failed: ${redactSecrets(reason)}`, {
          retryable: false,
          context: { kind: "other", snapshotId },
        });
      }
    }
  }

  /**
   * Filesystem snapshots are images: `images.delete`, a missing one is success. Memory snapshots
   * (`mem:`) cannot be deleted: modal@0.11 has no call for it (`sandboxSnapshots` only has
   * `fromId`), so they are left to Modal's own 7-day expiry and this is a no-op for them.
   */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    if (isMemorySnapshotId(snapshotId)) return;
    try {
      await this.sdk.images.delete(snapshotId);
    } catch (err) {
      if (classifyModalError(err) === "not_found") return;
      throw this.error("deleteSnapshot", err);
    }
  }

  /** Idempotent (seed 003 §1): a sandbox that is already gone is success. */
  async terminate(sessionId: string, sandboxId?: string | null): Promise<void> {
    try {
      const sandbox = sandboxId
        ? await this.sdk.sandboxes.fromId(sandboxId)
        : await this.sdk.sandboxes.fromName(this.config.appName, sessionId);
      await sandbox.terminate();
    } catch (err) {
      if (classifyModalError(err) === "not_found") return;
      throw this.error("terminate", err);
    }
  }

  /** Side-effect free: `poll` only reads the sandbox's exit status. */
  async checkSandboxes(sandboxIds: string[]): Promise<string[]> {
    const unique = [...new Set(sandboxIds)];
    const alive = await Promise.all(
      unique.map(async (id) => {
        try {
          const sandbox = await this.sdk.sandboxes.fromId(id);
          return (await sandbox.poll()) === null;
        } catch (err) {
          if (classifyModalError(err) === "not_found") return false;
          throw this.error("checkSandboxes", err);
        }
      }),
    );
    return unique.filter((_, i) => alive[i]);
  }

  /**
   * Running sandboxes of the app tagged by this control plane (Modal has no pause). The listing yields
   * bare handles, so the session id comes from each sandbox's tags; the start time is not exposed.
   */
  async listSandboxes(): Promise<ListedSandbox[]> {
    try {
      const app = await this.app();
      const sandboxes: ModalSandboxLike[] = [];
      const seen = new Set<string>();
      for await (const sandbox of this.sdk.sandboxes.list({ appId: app.appId, tags: { [MODAL_CONTROL_PLANE_TAG]: this.config.appName } })) {
        if (seen.has(sandbox.sandboxId)) continue;
        seen.add(sandbox.sandboxId);
        sandboxes.push(sandbox);
      }
      const listed: (ListedSandbox | null)[] = [];
      for (let i = 0; i < sandboxes.length; i += LIST_TAGS_CONCURRENCY) {
        listed.push(...(await Promise.all(sandboxes.slice(i, i + LIST_TAGS_CONCURRENCY).map((s) => this.listed(s)))));
      }
      return listed.filter((s): s is ListedSandbox => s !== null);
    } catch (err) {
      throw this.error("listSandboxes", err);
    }
  }

  async health(): Promise<boolean> {
    try {
      await this.app();
      return true;
    } catch {
      return false;
    }
  }

  async resolveTunnels(sandboxId: string): Promise<SandboxTunnels> {
    try {
      const sandbox = await this.sdk.sandboxes.fromId(sandboxId);
      const urls = await this.tunnelUrls(sandbox, false);
      return { openCodeUrl: urls.tunnelUrl, previewUrl: urls.previewUrl, sidecarUrl: sidecarUrlOnPreview(urls.previewUrl) };
    } catch (err) {
      throw this.error("resolveTunnels", err);
    }
  }

  /** `cwd` made absolute (relative: from the workspace) and `timeoutMs` whole seconds before the SDK sees them. */
  async execCommand(sandboxId: string, argv: string[], opts: { cwd?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    try {
      const options = normalizeExecOptions(PROVIDER, "execCommand", opts);
      const sandbox = await this.sdk.sandboxes.fromId(sandboxId);
      return await execVia(sandbox)(argv, options);
    } catch (err) {
      throw this.error("execCommand", err);
    }
  }

  // ---- internals ----

  /** The app, created when missing (issue 22 §5): it need not be the image tool's app. */
  private app(): Promise<ModalAppRef> {
    return this.sdk.apps.fromName(this.config.appName, { createIfMissing: true });
  }

  private get backend(): ModalSandboxBackend {
    return this.config.sandboxBackend ?? DEFAULT_MODAL_SANDBOX_BACKEND;
  }

  private tags(sessionId: string, expiresAt: number): Record<string, string> {
    return { [MODAL_CONTROL_PLANE_TAG]: this.config.appName, [MODAL_SESSION_TAG]: sessionId, [MODAL_EXPIRES_AT_TAG]: String(expiresAt) };
  }

  /** Null when the sandbox ended between the listing and the tag lookup. */
  private async listed(sandbox: ModalSandboxLike): Promise<ListedSandbox | null> {
    try {
      const tags = await sandbox.getTags();
      return { sandboxId: sandbox.sandboxId, sessionId: tags[MODAL_SESSION_TAG] ?? null, startedAt: null, state: "running" };
    } catch (err) {
      if (classifyModalError(err) === "not_found") return null;
      throw err;
    }
  }

  /** seed 003 §6.2 `findSandbox()`: the session id is the sandbox name, so lookup is 1:1. */
  private async findLiveSandbox(sessionId: string): Promise<ModalSandboxLike | null> {
    try {
      const sandbox = await this.sdk.sandboxes.fromName(this.config.appName, sessionId);
      return (await sandbox.poll()) === null ? sandbox : null;
    } catch (err) {
      if (classifyModalError(err) === "not_found") return null;
      throw this.error("ensureSandbox", err);
    }
  }

  /** A live sandbox found again: its URLs, and the expiry tagged on it when it was created (null without the tag). */
  private async describe(sandbox: ModalSandboxLike, operation: string): Promise<CreateSandboxResult> {
    try {
      const urls = await this.tunnelUrls(sandbox, false);
      const recorded = Number((await sandbox.getTags())[MODAL_EXPIRES_AT_TAG]);
      return { sandboxId: sandbox.sandboxId, ...urls, expiresAt: Number.isSafeInteger(recorded) && recorded > 0 ? recorded : null };
    } catch (err) {
      throw this.error(operation, err);
    }
  }

  /** seed 003 §6.2 step 2: restore snapshot > base snapshot > base image. */
  private async resolveImage(opts: CreateSandboxOpts): Promise<ModalImageRef> {
    if (opts.snapshotId) return this.sdk.images.fromId(opts.snapshotId);
    const base = opts.baseSnapshotId ?? this.config.baseSnapshotId;
    if (base) return this.sdk.images.fromId(base);
    const image = this.config.baseImage;
    if (!image) throw new ProviderError(PROVIDER, "createSandbox", "no snapshot, base snapshot or base image configured");
    return image.startsWith("im-") ? this.sdk.images.fromId(image) : this.sdk.images.fromRegistry(image);
  }

  /** Checked before any SDK call: env names Modal accepts, a timeout in whole seconds. */
  private createParams(opts: CreateSandboxOpts, expiresAt: number): SandboxCreateParams {
    const env = buildSandboxEnv(opts, this.config.modelEnv ?? {});
    requireValidEnvNames(PROVIDER, "createSandbox", env);
    const v2 = this.backend === "v2";
    return {
      name: opts.sessionId,
      tags: this.tags(opts.sessionId, expiresAt),
      env,
      timeoutMs: this.timeoutMs(),
      cpu: SANDBOX_CPU,
      memoryMiB: SANDBOX_MEMORY_MIB,
      // V2 offers encrypted (TLS) tunnels only: SSH is one of them, opened for sessions with a key.
      encryptedPorts: [SANDBOX_PORTS.opencode, SANDBOX_PORTS.preview, ...(v2 && opts.sshPublicKey ? [SANDBOX_PORTS.ssh] : [])],
      ...(v2 ? {} : { unencryptedPorts: [SANDBOX_PORTS.ssh] }),
      // seed 002 §1a: without this the sandbox cannot be memory-snapshotted later.
      experimentalEnableSnapshot: true,
    };
  }

  /** `wantSsh`: the create opened port 22 for the session's key, so a missing tunnel is an error. */
  private async tunnelUrls(sandbox: ModalSandboxLike, wantSsh: boolean): Promise<Omit<CreateSandboxResult, "sandboxId" | "expiresAt">> {
    const tunnels = await sandbox.tunnels(TUNNEL_TIMEOUT_MS);
    const opencode = tunnels[SANDBOX_PORTS.opencode];
    if (!opencode) throw new ProviderError(PROVIDER, "resolveTunnels", `no tunnel for port ${SANDBOX_PORTS.opencode}`);
    const ssh = tunnels[SANDBOX_PORTS.ssh];
    const urls = { tunnelUrl: opencode.url, previewUrl: tunnels[SANDBOX_PORTS.preview]?.url ?? null };
    if (ssh?.unencryptedHost && ssh.unencryptedPort) return { ...urls, sshHost: ssh.unencryptedHost, sshPort: ssh.unencryptedPort, sshTransport: "tcp" };
    if (this.backend === "v2" && ssh?.host && ssh.port) return { ...urls, sshHost: ssh.host, sshPort: ssh.port, sshTransport: "tls" };
    if (wantSsh) {
      throw new ProviderError(
        PROVIDER,
        "createSandbox",
        `the session has an SSH key but Modal returned no tunnel for port ${SANDBOX_PORTS.ssh} on the ${this.backend} sandbox backend (MODAL_SANDBOX_BACKEND)`,
        { retryable: false, context: { kind: "other" } },
      );
    }
    return urls;
  }

  private timeoutMs(): number {
    return wholeSecondsMs(PROVIDER, "createSandbox", this.config.timeoutSeconds * 1_000);
  }

  private expiresAt(): number {
    return this.now() + this.timeoutMs();
  }

  private error(operation: string, err: unknown): ProviderError {
    return toProviderError(PROVIDER, operation, err, classifyModalError);
  }
}

function execVia(sandbox: ModalSandboxLike): SandboxExec {
  return async (argv, opts = {}) => {
    const proc = await sandbox.exec(argv, {
      ...(opts.cwd ? { workdir: opts.cwd } : {}),
      ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}),
    });
    // Stdin, not argv: no length limit, and nothing shows in the sandbox's process list.
    if (opts.stdin !== undefined) {
      await proc.stdin.writeText(opts.stdin);
      await proc.stdin.close();
    }
    const [stdout, stderr, exitCode] = await Promise.all([proc.stdout.readText(), proc.stderr.readText(), proc.wait()]);
    return { stdout, stderr, exitCode };
  };
}
