import { BOOT_EXEC_TIMEOUT_MS } from "../../../functions/providers/sandbox-boot";
import { AlreadyExistsError, NotFoundError, SandboxTimeoutError, type SandboxListParams } from "modal";
import { CREATE_SECRETS, sessionCreateOpts } from "../../support/builders";
import { describe, expect, it } from "vitest";
import { ProviderError } from "../../../functions/domain/errors";
import {
  ModalSandboxProvider,
  RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION,
  type ModalProviderConfig,
  type ModalSandboxLike,
  type ModalSdk,
  type ModalTunnelLike,
} from "../../../functions/providers/modal/modal-provider";
import type { CreateSandboxOpts } from "../../../functions/ports/sandbox-provider";
import { parseBootSpec, type BootSpec } from "../../../sandbox/boot/boot-spec";
import { imageLayout } from "../../../sandbox/boot/layout";
import { agentAuthorization, deriveAgentPassword } from "../../../sandbox/shared/access-token";
import { describeProviderContract } from "../../support/provider-contract";

/** nice-grpc's ClientError shape (name + numeric status code), as the Modal SDK rethrows it. */
function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`/modal.client.ModalClient/Call ${code}: ${details}`), { name: "ClientError", code });
}

type Call = [string, ...unknown[]];

class FakeModalSandbox implements ModalSandboxLike {
  running = true;
  /** The ports opened at create (a memory restore gets the snapshotted sandbox's: the usual two). */
  ports: { encrypted: number[]; unencrypted: number[] } = { encrypted: [4096, 20000], unencrypted: [] };
  execs: string[][] = [];
  /** What each exec received on stdin (closed streams only). */
  stdins: string[] = [];
  constructor(
    private readonly sdk: FakeModal,
    readonly sandboxId: string,
    readonly name: string | undefined,
    public tags: Record<string, string> = {},
  ) {}
  async exec(command: string[], params?: { workdir?: string; timeoutMs?: number }) {
    this.sdk.record("sandbox.exec", this.sandboxId, command, params);
    this.execs.push(command);
    const exitCode = this.sdk.execExitCode(command);
    let input = "";
    return {
      stdin: {
        writeText: async (text: string) => {
          input += text;
        },
        close: async () => {
          this.stdins.push(input);
        },
      },
      stdout: { readText: async () => "" },
      stderr: { readText: async () => (exitCode ? this.sdk.execStderr : "") },
      wait: async () => exitCode,
    };
  }
  async tunnels(timeoutMs?: number): Promise<Record<number, ModalTunnelLike>> {
    this.sdk.record("sandbox.tunnels", this.sandboxId, timeoutMs);
    this.sdk.maybeFail("tunnels");
    // Like Modal: a tunnel per port opened at create; the V2 backend has encrypted (TLS) tunnels only.
    const out: Record<number, ModalTunnelLike> = {};
    for (const port of this.ports.encrypted) out[port] = { url: `https://${this.sandboxId}-${port}.modal.run`, host: `${this.sandboxId}-${port}.modal.run`, port: 443 };
    if (!this.sdk.v2) for (const port of this.ports.unencrypted) out[port] = { url: "https://unused", unencryptedHost: "r1.modal.host", unencryptedPort: 40000 + port };
    return out;
  }
  async snapshotFilesystem() {
    this.sdk.record("sandbox.snapshotFilesystem", this.sandboxId);
    return { imageId: `im-fs-${this.sandboxId}` };
  }
  async experimentalSnapshot() {
    this.sdk.record("sandbox.experimentalSnapshot", this.sandboxId);
    this.sdk.maybeFail("experimentalSnapshot");
    return { snapshotId: `sn-${this.sandboxId}` };
  }
  async terminate() {
    this.sdk.record("sandbox.terminate", this.sandboxId);
    this.sdk.maybeFail("terminate");
    this.running = false;
  }
  async poll() {
    this.sdk.record("sandbox.poll", this.sandboxId);
    return this.running ? null : 0;
  }
  async setTags(tags: Record<string, string>) {
    this.sdk.record("sandbox.setTags", this.sandboxId, tags);
    this.sdk.maybeFail("setTags");
    this.tags = { ...tags };
  }
  async getTags() {
    this.sdk.record("sandbox.getTags", this.sandboxId);
    this.sdk.maybeFail("getTags");
    // Like the real SDK, a sandbox that ended after the listing is no longer found.
    if (this.sdk.goneAfterListing.has(this.sandboxId)) throw grpcError(5, `Sandbox ${this.sandboxId} not found`);
    return { ...this.tags };
  }
}

/** Records every SDK call; `failures` injects an error on the named call. */
class FakeModal implements ModalSdk {
  calls: Call[] = [];
  byId = new Map<string, FakeModalSandbox>();
  failures = new Map<string, Error>();
  failingExec: string | null = null;
  execStderr = "boom";
  /** Ids whose `getTags` fails NOT_FOUND, as if the sandbox ended between the listing and the lookup. */
  goneAfterListing = new Set<string>();
  /** Sandboxes per listing page (the SDK pages with `beforeTimestamp` internally). */
  listPageSize = 1;
  /** The backend the client was built for (the provider's `sandboxBackend`). */
  v2 = true;
  private next = 0;

  record(...call: Call) {
    this.calls.push(call);
  }
  maybeFail(method: string) {
    const err = this.failures.get(method);
    if (err) throw err;
  }
  execExitCode(command: string[]) {
    return this.failingExec && command.join(" ").includes(this.failingExec) ? 1 : 0;
  }
  callNames() {
    return this.calls.map((c) => c[0]);
  }

  /** Apps that exist; like Modal, `fromName` of a missing one is NotFoundError unless `createIfMissing`. */
  appNames = new Set<string>(["sandbox-app"]);
  apps = {
    fromName: async (name: string, params?: { createIfMissing?: boolean }) => {
      this.record("apps.fromName", name, ...(params ? [params] : []));
      this.maybeFail("apps.fromName");
      if (!this.appNames.has(name)) {
        if (!params?.createIfMissing) throw new NotFoundError(`App '${name}' not found`);
        this.appNames.add(name);
      }
      return { appId: `ap-${name}` };
    },
  };
  images = {
    fromId: async (imageId: string) => {
      this.record("images.fromId", imageId);
      return { imageId };
    },
    fromRegistry: (tag: string) => {
      this.record("images.fromRegistry", tag);
      return { tag };
    },
    delete: async (imageId: string) => {
      this.record("images.delete", imageId);
    },
  };
  sandboxes = {
    create: async (app: object, image: object, params?: unknown) => {
      this.record("sandboxes.create", app, image, params);
      this.maybeFail("sandboxes.create");
      const name = (params as { name?: string } | undefined)?.name;
      if (name && [...this.byId.values()].some((s) => s.running && s.name === name)) {
        throw new AlreadyExistsError(`Sandbox with name '${name}' already exists`);
      }
      const p = params as { tags?: Record<string, string>; encryptedPorts?: number[]; unencryptedPorts?: number[] } | undefined;
      const sb = this.add(name, p?.tags);
      if (p?.encryptedPorts || p?.unencryptedPorts) sb.ports = { encrypted: p.encryptedPorts ?? [], unencrypted: p.unencryptedPorts ?? [] };
      return sb;
    },
    fromId: async (sandboxId: string) => {
      this.record("sandboxes.fromId", sandboxId);
      // Like the real SDK, fromId is lazy: an unknown id fails on first use with gRPC NOT_FOUND.
      return this.byId.get(sandboxId) ?? this.ghost(sandboxId);
    },
    fromName: async (appName: string, name: string) => {
      this.record("sandboxes.fromName", appName, name);
      this.maybeFail("sandboxes.fromName");
      const found = [...this.byId.values()].find((s) => s.running && s.name === name);
      if (!found) throw new NotFoundError(`Sandbox with name '${name}' not found in App '${appName}'`);
      return found;
    },
    experimentalFromSnapshot: async (snapshot: object, params?: { name?: string | null }) => {
      this.record("sandboxes.experimentalFromSnapshot", snapshot, params);
      this.maybeFail("experimentalFromSnapshot");
      return this.add(params?.name ?? undefined);
    },
    list: (params?: SandboxListParams): AsyncIterable<ModalSandboxLike> => {
      this.record("sandboxes.list", params);
      return this.listPages(params);
    },
  };
  /** V1 memory snapshots: the statuses successive waits answer (then success). */
  snapshotWaitStatuses: number[] = [];
  cpClient = {
    sandboxSnapshot: async (request: { sandboxId: string }) => {
      this.record("cpClient.sandboxSnapshot", request);
      return { snapshotId: `sn-${request.sandboxId}` };
    },
    sandboxSnapshotWait: async (request: { snapshotId: string; timeout: number }) => {
      this.record("cpClient.sandboxSnapshotWait", request);
      return { result: { status: this.snapshotWaitStatuses.shift() ?? 1, exception: "" } };
    },
  };
  sandboxSnapshots = {
    fromId: async (snapshotId: string) => {
      this.record("sandboxSnapshots.fromId", snapshotId);
      this.maybeFail("sandboxSnapshots.fromId");
      return { snapshotId };
    },
  };

  /** Like the real SDK: running sandboxes carrying all the given tags, fetched page by page. */
  private async *listPages(params?: SandboxListParams): AsyncGenerator<ModalSandboxLike> {
    const matching = [...this.byId.values()].filter(
      (s) => s.running && Object.entries(params?.tags ?? {}).every(([k, v]) => s.tags[k] === v),
    );
    for (let page = 0; page * this.listPageSize < matching.length; page += 1) {
      this.record("sandboxes.list page", page);
      this.maybeFail("sandboxes.list");
      yield* matching.slice(page * this.listPageSize, (page + 1) * this.listPageSize);
    }
  }
  private add(name: string | undefined, tags: Record<string, string> = {}) {
    this.next += 1;
    const sb = new FakeModalSandbox(this, `sb-${this.next}`, name, { ...tags });
    this.byId.set(sb.sandboxId, sb);
    return sb;
  }
  private ghost(sandboxId: string): ModalSandboxLike {
    const gone = () => Promise.reject(grpcError(5, `Sandbox ${sandboxId} not found`));
    return {
      sandboxId,
      exec: gone,
      tunnels: gone,
      snapshotFilesystem: gone,
      experimentalSnapshot: gone,
      terminate: gone,
      poll: gone,
      setTags: gone,
      getTags: gone,
    };
  }
}

const NOW = 1_750_000_000_000;
const config: ModalProviderConfig = { appName: "sandbox-app", baseImage: "ghcr.io/acme/sandbox:1", timeoutSeconds: 3600 };

function setup(overrides: Partial<ModalProviderConfig> = {}, ready = true) {
  const sdk = new FakeModal();
  const fetches: string[] = [];
  const probeHeaders: (Record<string, string> | undefined)[] = [];
  const provider = new ModalSandboxProvider(sdk, { ...config, ...overrides }, {
    now: () => NOW,
    readiness: {
      fetch: async (url, init) => {
        fetches.push(url);
        probeHeaders.push(init?.headers);
        return { ok: ready };
      },
      sleep: async () => undefined,
    },
  });
  return { sdk, provider, fetches, probeHeaders };
}

const SESSION = "ses_0123456789abcdefghjkmnpqrs";
function opts(over: Partial<CreateSandboxOpts> = {}): CreateSandboxOpts {
  return { sessionId: SESSION, repos: [], envVars: { ANTHROPIC_API_KEY: "sk-ant-api03-abcdefghijklmnopqrstuvwxyz" }, ...over };
}

/** The boot spec the provider streamed to `boot start` in the sandbox, parsed as the boot parses it. */
function bootSpecOf(sdk: FakeModal, sandboxId: string): BootSpec {
  // The boot's stdin is the spec (a JSON object); the key file's write has the bare key.
  const raw = sdk.byId.get(sandboxId)?.stdins.find((s) => s.startsWith("{"));
  if (raw === undefined) throw new Error(`no boot spec was sent to ${sandboxId}`);
  return parseBootSpec(JSON.parse(raw));
}

describeProviderContract("modal (SDK double)", () => setup().provider);

describe("ModalSandboxProvider", () => {
  it("resolves the sidecar through the preview tunnel's /_sandbox/sidecar route (port 4000 is not tunnelled)", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    sdk.calls = [];
    expect(await provider.resolveTunnels("sb-1")).toEqual({
      openCodeUrl: "https://sb-1-4096.modal.run",
      previewUrl: "https://sb-1-20000.modal.run",
      sidecarUrl: "https://sb-1-20000.modal.run/_sandbox/sidecar",
    });
    expect(sdk.callNames()).toEqual(["sandboxes.fromId", "sandbox.tunnels"]);
  });

  it("creates the sandbox with the session id as name, control-plane tags, ports, timeout, env and snapshotting enabled", async () => {
    const { sdk, provider, fetches } = setup();
    const result = await provider.createSandbox(opts({ repos: [{ url: "https://github.com/acme/web.git", branch: "main" }] }));

    expect(sdk.calls.slice(0, 3)).toEqual([
      ["apps.fromName", "sandbox-app", { createIfMissing: true }],
      ["images.fromRegistry", "ghcr.io/acme/sandbox:1"],
      [
        "sandboxes.create",
        { appId: "ap-sandbox-app" },
        { tag: "ghcr.io/acme/sandbox:1" },
        {
          name: SESSION,
          tags: { "control-plane": "sandbox-app", "session-id": SESSION, "expires-at": String(NOW + 3_600_000) },
          env: { ANTHROPIC_API_KEY: "sk-ant-api03-abcdefghijklmnopqrstuvwxyz", SESSION_ID: SESSION },
          timeoutMs: 3_600_000,
          cpu: 2,
          memoryMiB: 4096,
          // The V2 backend (the default): encrypted tunnels only, and no SSH port without a key.
          encryptedPorts: [4096, 20000],
          experimentalEnableSnapshot: true,
        },
      ],
    ]);
    expect(sdk.calls[3]).toEqual(["sandbox.tunnels", "sb-1", 30_000]);
    expect(result).toEqual({
      sandboxId: "sb-1",
      tunnelUrl: "https://sb-1-4096.modal.run",
      previewUrl: "https://sb-1-20000.modal.run",
      expiresAt: NOW + 3_600_000,
    });
    // One exec: the image's boot, with the spec on stdin; it returns when phase 1 is over.
    expect(sdk.calls[4]).toEqual(["sandbox.exec", "sb-1", ["node", "/opt/sandbox/boot.mjs", "start", "--spec", "-"], { timeoutMs: BOOT_EXEC_TIMEOUT_MS }]);
    expect(sdk.byId.get("sb-1")?.execs).toHaveLength(1);
    const spec = bootSpecOf(sdk, "sb-1");
    expect(spec.request).toMatchObject({
      sessionId: SESSION,
      sessionType: "coding",
      repos: [{ url: "https://github.com/acme/web.git", branch: "main" }],
      restored: false,
      now: NOW,
      gitFreshness: null,
    });
    expect(spec.layout).toEqual(imageLayout());
    // Secrets reach the sandbox through its env, never through the spec.
    expect(sdk.byId.get("sb-1")?.stdins[0]).not.toContain("sk-ant-api03");
    expect(fetches).toEqual(["https://sb-1-4096.modal.run/session"]);
  });

  describe("SSH on each sandbox backend (issue 22 §2)", () => {
    const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOt3qJ2l8m1bq0h9y3kqkzT4wC7o1bYbq8y0hZ0Xq1dV dev@example";

    it("V2 (default): SSH is an encrypted tunnel to port 22, opened only for a session with a key, reported as TLS", async () => {
      const { sdk, provider } = setup();
      const result = await provider.createSandbox(opts({ sshPublicKey: sshKey }));
      const params = sdk.calls.find((c) => c[0] === "sandboxes.create")?.[3] as Record<string, unknown>;
      expect(params).toMatchObject({ encryptedPorts: [4096, 20000, 22] });
      expect(params).not.toHaveProperty("unencryptedPorts");
      expect(result).toMatchObject({ sshHost: "sb-1-22.modal.run", sshPort: 443, sshTransport: "tls" });
    });

    it("V2: a create whose sandbox comes back without the SSH tunnel fails clearly (port, backend) and terminates the sandbox", async () => {
      const { sdk, provider } = setup();
      const real = sdk.sandboxes.create;
      sdk.sandboxes.create = async (app, image, params) => {
        const sb = (await real(app, image, params)) as FakeModalSandbox;
        sb.ports = { encrypted: [4096, 20000], unencrypted: [] };
        return sb;
      };
      const err = (await provider.createSandbox(opts({ sshPublicKey: sshKey })).catch((e: unknown) => e)) as ProviderError;
      expect(err).toBeInstanceOf(ProviderError);
      expect(err).toMatchObject({ retryable: false });
      expect(err.message).toMatch(/SSH key but Modal returned no tunnel for port 22 on the v2 sandbox backend \(MODAL_SANDBOX_BACKEND\)/);
      expect(sdk.byId.get("sb-1")?.running).toBe(false);
    });

    it("V1: SSH is raw TCP on an unencrypted tunnel, as before", async () => {
      const { sdk, provider } = setup({ sandboxBackend: "v1" });
      sdk.v2 = false;
      const result = await provider.createSandbox(opts({ sshPublicKey: sshKey }));
      expect(sdk.calls.find((c) => c[0] === "sandboxes.create")?.[3]).toMatchObject({ encryptedPorts: [4096, 20000], unencryptedPorts: [22] });
      expect(result).toMatchObject({ sshHost: "r1.modal.host", sshPort: 40022, sshTransport: "tcp" });
    });
  });

  describe("inputs Modal refuses are normalized or refused before any SDK call (issue 22 §5)", () => {
    it("exec: a timeout rounded up to whole seconds, a relative cwd resolved against the workspace", async () => {
      const { sdk, provider } = setup();
      await provider.createSandbox(opts());
      await provider.execCommand("sb-1", ["ls"], { cwd: "web/src", timeoutMs: 1_500 });
      await provider.execCommand("sb-1", ["ls"], { cwd: "/tmp", timeoutMs: 2_000 });
      const execs = sdk.calls.filter((c) => c[0] === "sandbox.exec").slice(-2);
      expect(execs.map((c) => c[3])).toEqual([
        { workdir: "/home/user/workspace/web/src", timeoutMs: 2_000 },
        { workdir: "/tmp", timeoutMs: 2_000 },
      ]);
      const bad = (await provider.execCommand("sb-1", ["ls"], { timeoutMs: 0 }).catch((e: unknown) => e)) as ProviderError;
      expect(bad).toMatchObject({ operation: "execCommand", retryable: false });
      expect(bad.message).toMatch(/timeoutMs must be a positive number/);
    });

    it("env names outside ^[a-zA-Z_][a-zA-Z0-9_]*$ fail the create naming them, before the app, image or sandbox is touched", async () => {
      const { sdk, provider } = setup();
      const err = (await provider.createSandbox(opts({ envVars: { "BAD-NAME": "x", GOOD: "y", "1ST": "z" } })).catch((e: unknown) => e)) as ProviderError;
      expect(err).toBeInstanceOf(ProviderError);
      expect(err).toMatchObject({ operation: "createSandbox", retryable: false });
      expect(err.message).toContain('"BAD-NAME", "1ST"');
      expect(sdk.calls).toEqual([]);
    });

    it("a fractional SANDBOX_TIMEOUT_SECONDS becomes whole seconds (Modal refuses anything else)", async () => {
      const { sdk, provider } = setup({ timeoutSeconds: 90.25 });
      const result = await provider.createSandbox(opts());
      expect(sdk.calls.find((c) => c[0] === "sandboxes.create")?.[3]).toMatchObject({ timeoutMs: 91_000 });
      expect(result.expiresAt).toBe(NOW + 91_000);
    });

    it("the app is created when missing, so MODAL_APP_NAME need not be the image tool's app", async () => {
      const { sdk, provider } = setup({ appName: "fresh-app" });
      await provider.createSandbox(opts());
      expect(sdk.calls[0]).toEqual(["apps.fromName", "fresh-app", { createIfMissing: true }]);
      expect(sdk.appNames.has("fresh-app")).toBe(true);
    });
  });

  it("probes OpenCode through the tunnel with the password derived from the create call's SIDECAR_TOKEN (fresh and memory restore)", async () => {
    const withKey = opts({ envVars: { SIDECAR_TOKEN: "the-sandbox-key-0123456789" } });
    const expected = { authorization: agentAuthorization(deriveAgentPassword("the-sandbox-key-0123456789")) };
    const fresh = setup();
    await fresh.provider.createSandbox(withKey);
    expect(fresh.probeHeaders).toEqual([expected]);
    const restored = setup();
    await restored.provider.createSandbox({ ...withKey, snapshotId: "mem:sn-42" });
    expect(restored.probeHeaders).toEqual([expected]);
    // Without a key (old callers) the probe sends no credentials.
    const old = setup();
    await old.provider.createSandbox(opts());
    expect(old.probeHeaders).toEqual([undefined]);
  });

  it("resolves the image: restore snapshot > base snapshot > base image", async () => {
    const a = setup({ baseSnapshotId: "im-base" });
    await a.provider.createSandbox(opts({ snapshotId: "im-session" }));
    expect(a.sdk.calls[1]).toEqual(["images.fromId", "im-session"]);
    // A restored filesystem already has the repos: the boot reads the metadata instead of cloning.
    expect(bootSpecOf(a.sdk, "sb-1").request.restored).toBe(true);

    const b = setup({ baseSnapshotId: "im-base" });
    await b.provider.createSandbox(opts());
    expect(b.sdk.calls[1]).toEqual(["images.fromId", "im-base"]);

    const c = setup({ baseSnapshotId: "im-base" });
    await c.provider.createSandbox(opts({ baseSnapshotId: "im-call" }));
    expect(c.sdk.calls[1]).toEqual(["images.fromId", "im-call"]);
  });

  it("ensureSandbox recovers a running sandbox by name without creating one, with the expiry recorded on it at create", async () => {
    const { sdk, provider } = setup();
    const first = await provider.ensureSandbox(opts());
    expect(first.expiresAt).toBe(NOW + 3_600_000);
    sdk.calls = [];
    const again = await provider.ensureSandbox(opts());
    // Not null: the control plane arms the expiry migration of a recovered sandbox too.
    expect(again).toMatchObject({ sandboxId: first.sandboxId, recovered: true, expiresAt: NOW + 3_600_000 });
    expect(sdk.callNames()).toEqual(["sandboxes.fromName", "sandbox.poll", "sandbox.tunnels", "sandbox.getTags"]);
    expect(sdk.calls[0]).toEqual(["sandboxes.fromName", "sandbox-app", SESSION]);
  });

  it("a recovered sandbox without a recorded expiry (created before it was tagged, or its tag unreadable) recovers with expiresAt null", async () => {
    const { sdk, provider } = setup();
    await sdk.sandboxes.create({ appId: "ap-sandbox-app" }, {}, { name: SESSION, tags: { "control-plane": "sandbox-app", "session-id": SESSION } });
    expect(await provider.ensureSandbox(opts())).toMatchObject({ sandboxId: "sb-1", recovered: true, expiresAt: null });
    const box = sdk.byId.get("sb-1");
    if (box) box.tags["expires-at"] = "soon";
    expect(await provider.ensureSandbox(opts())).toMatchObject({ sandboxId: "sb-1", recovered: true, expiresAt: null });
  });

  it("ensureSandbox recovers the winner when a concurrent create took the name", async () => {
    const { sdk, provider } = setup();
    let lookups = 0;
    const realFromName = sdk.sandboxes.fromName;
    sdk.sandboxes.fromName = async (app, name) => {
      lookups += 1;
      if (lookups === 1) {
        // The other actor creates between our lookup and our create.
        await sdk.sandboxes.create({}, {}, { name });
        throw new NotFoundError("not yet");
      }
      return realFromName(app, name);
    };
    const result = await provider.ensureSandbox(opts());
    expect(result).toMatchObject({ sandboxId: "sb-1", recovered: true });
  });

  it("memorySnapshot returns a mem: id from experimentalSnapshot", async () => {
    const { sdk, provider } = setup();
    await provider.ensureSandbox(opts());
    sdk.calls = [];
    expect(await provider.memorySnapshot(SESSION, "sb-1")).toEqual({ snapshotId: "mem:sn-sb-1", expiresAt: NOW + 7 * 24 * 3600 * 1000 });
    expect(sdk.calls).toEqual([
      ["sandboxes.fromId", "sb-1"],
      ["sandbox.experimentalSnapshot", "sb-1"],
    ]);
  });

  it("on the V1 backend memorySnapshot makes the SDK's two control-plane calls itself (for the 120 s wait), never experimentalSnapshot", async () => {
    const { sdk, provider } = setup({ sandboxBackend: "v1" });
    sdk.v2 = false;
    await provider.ensureSandbox(opts());
    sdk.calls = [];
    expect(await provider.memorySnapshot(SESSION, "sb-1")).toEqual({ snapshotId: "mem:sn-sb-1", expiresAt: NOW + 7 * 24 * 3600 * 1000 });
    expect(sdk.calls).toEqual([
      ["sandboxes.fromId", "sb-1"],
      ["cpClient.sandboxSnapshot", { sandboxId: "sb-1" }],
      ["cpClient.sandboxSnapshotWait", { snapshotId: "sn-sb-1", timeout: 55 }],
    ]);
  });

  it("snapshot uses snapshotFilesystem and returns the image id", async () => {
    const { sdk, provider } = setup();
    await provider.ensureSandbox(opts());
    expect(await provider.snapshot(SESSION, "sb-1")).toEqual({ snapshotId: "im-fs-sb-1", expiresAt: null });
    expect(sdk.callNames()).toContain("sandbox.snapshotFilesystem");
  });

  it("restores a mem: snapshot with experimentalFromSnapshot, named after the session and re-tagged, without booting", async () => {
    const { sdk, provider, fetches } = setup();
    const result = await provider.ensureSandbox(opts({ snapshotId: "mem:sn-42" }));
    expect(sdk.calls).toEqual([
      ["sandboxes.fromName", "sandbox-app", SESSION],
      ["sandboxSnapshots.fromId", "sn-42"],
      ["sandboxes.experimentalFromSnapshot", { snapshotId: "sn-42" }, { name: SESSION }],
      ["sandbox.setTags", "sb-1", { "control-plane": "sandbox-app", "session-id": SESSION, "expires-at": String(NOW + 3_600_000) }],
      ["sandbox.tunnels", "sb-1", 30_000],
    ]);
    expect(sdk.byId.get("sb-1")?.execs).toEqual([]);
    expect(fetches).toEqual(["https://sb-1-4096.modal.run/session"]);
    expect(result).toMatchObject({ sandboxId: "sb-1", recovered: false, tunnelUrl: "https://sb-1-4096.modal.run" });
  });

  it("a failed memory restore is its own operation and never falls back to a fresh sandbox", async () => {
    const { sdk, provider } = setup();
    sdk.failures.set("experimentalFromSnapshot", new NotFoundError("snapshot sn-old expired"));
    const err = await provider.ensureSandbox(opts({ snapshotId: "mem:sn-old" })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).operation).toBe(RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION);
    expect((err as ProviderError).message).toContain("snapshot sn-old expired");
    expect(sdk.callNames()).not.toContain("sandboxes.create");
  });

  it("pause is unsupported", async () => {
    const { provider } = setup();
    expect(provider.supportsPause).toBe(false);
    await expect(provider.pause(SESSION, "sb-1")).rejects.toMatchObject({ operation: "pause", retryable: false });
  });

  it("terminate treats NotFoundError and gRPC NOT_FOUND as success, by name when no id is known", async () => {
    const { sdk, provider } = setup();
    await expect(provider.terminate(SESSION)).resolves.toBeUndefined();
    expect(sdk.calls).toEqual([["sandboxes.fromName", "sandbox-app", SESSION]]);
    await expect(provider.terminate(SESSION, "sb-unknown")).resolves.toBeUndefined();
  });

  it("terminate by name terminates the session's sandbox", async () => {
    const { sdk, provider } = setup();
    await provider.ensureSandbox(opts());
    await provider.terminate(SESSION);
    expect(sdk.byId.get("sb-1")?.running).toBe(false);
  });

  it("auth errors are not retryable and transient errors are", async () => {
    const auth = setup();
    auth.sdk.failures.set("sandboxes.create", grpcError(16, "invalid token ak-ABCDEFGHIJKLMNOPQRST"));
    await expect(auth.provider.createSandbox(opts())).rejects.toMatchObject({ operation: "createSandbox", retryable: false });

    const unavailable = setup();
    unavailable.sdk.failures.set("sandboxes.create", grpcError(14, "upstream connect error"));
    await expect(unavailable.provider.createSandbox(opts())).rejects.toMatchObject({ retryable: true });

    const deadline = setup();
    deadline.sdk.failures.set("tunnels", new SandboxTimeoutError());
    await expect(deadline.provider.createSandbox(opts())).rejects.toMatchObject({ retryable: true });
    // The half-created sandbox is terminated so the next ensure does not "recover" it.
    expect(deadline.sdk.byId.get("sb-1")?.running).toBe(false);
  });

  it("redacts secrets from SDK error messages, including the kept cause", async () => {
    const { sdk, provider } = setup();
    sdk.failures.set("sandboxes.create", grpcError(16, "token ak-ABCDEFGHIJKLMNOPQRST / as-ZYXWVUTSRQPONMLKJIHG rejected"));
    const err = (await provider.createSandbox(opts()).catch((e: unknown) => e)) as ProviderError;
    const everything = `${err.message} ${String((err.cause as Error).message)} ${String((err.cause as Error).stack)}`;
    expect(everything).not.toContain("ak-ABCDEFGHIJKLMNOPQRST");
    expect(everything).not.toContain("as-ZYXWVUTSRQPONMLKJIHG");
    expect(err.message).toContain("[REDACTED]");
  });

  it("fails the create (retryable) when OpenCode never becomes ready, and terminates the sandbox", async () => {
    const { sdk, provider, fetches } = setup({}, false);
    await expect(provider.createSandbox(opts())).rejects.toMatchObject({ operation: "createSandbox", retryable: true });
    expect(fetches.length).toBeGreaterThan(5);
    expect(sdk.byId.get("sb-1")?.running).toBe(false);
  });

  it("a failing boot step fails the create with the boot's own explanation and terminates the sandbox", async () => {
    const { sdk, provider, fetches } = setup();
    sdk.failingExec = "boot.mjs start";
    // What `boot start` writes on stderr when phase 1 fails (sandbox/boot/main.ts).
    sdk.execStderr = `${JSON.stringify({ type: "boot.failed", step: "clone web", error: 'boot step "clone web" failed: git clone exited 128: not found' })}\n`;
    const err = (await provider.createSandbox(opts()).catch((e: unknown) => e)) as ProviderError;
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.message).toContain('boot step "clone web" failed: git clone exited 128');
    expect(sdk.byId.get("sb-1")?.running).toBe(false);
    expect(fetches).toEqual([]);
  });

  it("passes the session type, snapshot facts and git freshness to the boot", async () => {
    const { sdk, provider } = setup({ gitFreshness: { enabled: true, cadenceSeconds: 60 } });
    await provider.createSandbox(
      opts({
        snapshotId: "im-prebuild",
        sessionType: "setup",
        snapshotHasDeps: true,
        serviceCommands: [{ name: "web", command: "npm run dev" }],
        systemPrompt: "fix it",
        agentConfig: { modelId: "anthropic/claude-opus-4-5" },
      }),
    );
    expect(bootSpecOf(sdk, "sb-1").request).toMatchObject({
      sessionType: "setup",
      restored: true,
      snapshotHasDeps: true,
      serviceCommands: [{ name: "web", command: "npm run dev" }],
      systemPrompt: "fix it",
      modelId: "anthropic/claude-opus-4-5",
      gitFreshness: { enabled: true, cadenceSeconds: 60 },
    });
  });

  it("checkSandboxes only polls (no terminate, no create)", async () => {
    const { sdk, provider } = setup();
    await provider.ensureSandbox(opts());
    sdk.calls = [];
    expect(await provider.checkSandboxes(["sb-1", "sb-1", "sb-nope"])).toEqual(["sb-1"]);
    expect(new Set(sdk.callNames())).toEqual(new Set(["sandboxes.fromId", "sandbox.poll"]));
  });

  it("health is false when the app cannot be looked up", async () => {
    const { sdk, provider } = setup();
    sdk.failures.set("apps.fromName", grpcError(16, "unauthenticated"));
    expect(await provider.health()).toBe(false);
  });

  it("a failed re-tag after a memory restore does not fail the restore", async () => {
    const { sdk, provider } = setup();
    sdk.failures.set("setTags", grpcError(14, "upstream connect error"));
    await expect(provider.ensureSandbox(opts({ snapshotId: "mem:sn-42" }))).resolves.toMatchObject({ sandboxId: "sb-1" });
    expect(sdk.byId.get("sb-1")?.running).toBe(true);
  });

  describe("listSandboxes", () => {
    const OTHER = "ses_zzzzzzzzzzzzzzzzzzzzzzzzzz";

    it("lists the app's sandboxes by control-plane tag across pages, with each session id from its tags", async () => {
      const { sdk, provider } = setup();
      await provider.createSandbox(opts());
      await provider.createSandbox(opts({ sessionId: OTHER }));
      await provider.createSandbox(opts({ sessionId: "ses_terminated_00000000000000" }));
      await provider.terminate("ses_terminated_00000000000000", "sb-3");
      // Not ours: no control-plane tag (e.g. created by hand in the same app).
      await sdk.sandboxes.create({ appId: "ap-sandbox-app" }, {}, { name: "manual" });
      // Ours, but with its session tag lost: listed with an unknown session.
      await provider.ensureSandbox(opts({ sessionId: "ses_untagged_0000000000000000", snapshotId: "mem:sn-1" }));
      const restored = sdk.byId.get("sb-5");
      if (restored) restored.tags = { "control-plane": "sandbox-app" };
      sdk.calls = [];

      expect(await provider.listSandboxes()).toEqual([
        { sandboxId: "sb-1", sessionId: SESSION, startedAt: null, state: "running" },
        { sandboxId: "sb-2", sessionId: OTHER, startedAt: null, state: "running" },
        { sandboxId: "sb-5", sessionId: null, startedAt: null, state: "running" },
      ]);
      expect(sdk.calls).toEqual([
        ["apps.fromName", "sandbox-app", { createIfMissing: true }],
        ["sandboxes.list", { appId: "ap-sandbox-app", tags: { "control-plane": "sandbox-app" } }],
        ["sandboxes.list page", 0],
        ["sandboxes.list page", 1],
        ["sandboxes.list page", 2],
        ["sandbox.getTags", "sb-1"],
        ["sandbox.getTags", "sb-2"],
        ["sandbox.getTags", "sb-5"],
      ]);
    });

    it("is side-effect free and skips a sandbox that ended between the listing and its tag lookup", async () => {
      const { sdk, provider } = setup();
      await provider.createSandbox(opts());
      await provider.createSandbox(opts({ sessionId: OTHER }));
      sdk.goneAfterListing.add("sb-1");
      sdk.calls = [];
      expect(await provider.listSandboxes()).toEqual([{ sandboxId: "sb-2", sessionId: OTHER, startedAt: null, state: "running" }]);
      expect(new Set(sdk.callNames())).toEqual(new Set(["apps.fromName", "sandboxes.list", "sandboxes.list page", "sandbox.getTags"]));
    });

    it("is empty when nothing is running", async () => {
      const { provider } = setup();
      expect(await provider.listSandboxes()).toEqual([]);
    });

    it("maps SDK errors like every other operation: transient is retryable, auth is not, messages redacted", async () => {
      const unavailable = setup();
      await unavailable.provider.createSandbox(opts());
      unavailable.sdk.failures.set("sandboxes.list", grpcError(14, "upstream connect error"));
      const err = (await unavailable.provider.listSandboxes().catch((e: unknown) => e)) as ProviderError;
      expect(err).toBeInstanceOf(ProviderError);
      expect(err).toMatchObject({ provider: "modal", operation: "listSandboxes", retryable: true });
      expect(err.context).toMatchObject({ kind: "transient" });

      const auth = setup();
      auth.sdk.failures.set("apps.fromName", grpcError(16, "invalid token ak-ABCDEFGHIJKLMNOPQRST"));
      const authErr = (await auth.provider.listSandboxes().catch((e: unknown) => e)) as ProviderError;
      expect(authErr).toMatchObject({ operation: "listSandboxes", retryable: false });
      expect(authErr.context).toMatchObject({ kind: "auth" });
      expect(authErr.message).not.toContain("ak-ABCDEFGHIJKLMNOPQRST");

      const denied = setup();
      await denied.provider.createSandbox(opts());
      denied.sdk.failures.set("getTags", grpcError(7, "permission denied"));
      await expect(denied.provider.listSandboxes()).rejects.toMatchObject({ operation: "listSandboxes", retryable: false });

      const missingApp = setup();
      missingApp.sdk.failures.set("apps.fromName", new NotFoundError("App 'sandbox-app' not found"));
      const notFound = (await missingApp.provider.listSandboxes().catch((e: unknown) => e)) as ProviderError;
      expect(notFound).toMatchObject({ operation: "listSandboxes", retryable: false });
      expect(notFound.context).toMatchObject({ kind: "not_found" });
    });
  });
});

describe("ModalSandboxProvider: what a session's create call carries", () => {
  it("keeps the processes (and so the sidecar's key epoch) only when restoring a memory snapshot", () => {
    const { provider } = setup();
    expect(provider.keepsProcesses("mem:sn-1")).toBe(true);
    for (const id of ["im-fs-1", null, undefined]) expect(provider.keepsProcesses(id)).toBe(false);
  });

  it("the sandbox key: on the stdin of a 0600 file write before the boot runs; never an env var, a command line or the spec (issue 14 §2)", async () => {
    const { sdk, provider } = setup({ modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION));
    const key = CREATE_SECRETS.sandboxKey;
    const box = sdk.byId.get("sb-1");
    const write = box?.execs.findIndex((argv) => argv.join(" ").includes("sandbox-key")) ?? -1;
    expect(box?.execs[write]).toEqual(["sh", "-c", "umask 077 && mkdir -p '/home/user/.proliferate' && cat > '/home/user/.proliferate/sandbox-key'"]);
    expect(write).toBeLessThan(box?.execs.findIndex((argv) => argv.includes("/opt/sandbox/boot.mjs")) ?? -1);
    expect(box?.stdins).toContain(key);
    expect(JSON.stringify(box?.execs)).not.toContain(key);
    expect(JSON.stringify(sdk.calls.find((c) => c[0] === "sandboxes.create"))).not.toContain(key);
    expect(JSON.stringify(bootSpecOf(sdk, "sb-1"))).not.toContain(key);
  });

  it("env: exactly the session's vars (its own model key, never the deployment's); the boot spec: the settings, no secret", async () => {
    const { sdk, provider } = setup({ modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION, ));
    const create = sdk.calls.find((c) => c[0] === "sandboxes.create");
    // Never the sandbox key as a container-wide variable (issue 14 §2): every process would see it.
    expect((create?.[3] as { env: unknown }).env).toEqual({ SESSION_ID: SESSION, ANTHROPIC_API_KEY: CREATE_SECRETS.sessionModelKey });
    const spec = bootSpecOf(sdk, "sb-1");
    expect(spec.request).toMatchObject({
      modelId: "anthropic/claude-sonnet-4-5",
      systemPrompt: "Be brief.",
      serviceCommands: [{ name: "web", command: "npm run dev" }],
      autoStartServices: true,
      gitIdentity: { name: "Ada", email: "ada@example.test" },
      controlPlaneUrl: "https://api.example.test",
    });
    const raw = sdk.byId.get("sb-1")?.stdins.find((s) => s.startsWith("{")) ?? "";
    for (const secret of [CREATE_SECRETS.sandboxKey, CREATE_SECRETS.sessionModelKey, ...Object.values(CREATE_SECRETS.deployment)]) expect(raw).not.toContain(secret);
  });

  it("no model configured: the deployment's Anthropic key and nothing else of the deployment's", async () => {
    const { sdk, provider } = setup({ modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION, { agentConfig: undefined, envVars: { SESSION_ID: SESSION, SIDECAR_TOKEN: CREATE_SECRETS.sandboxKey } }));
    const create = sdk.calls.find((c) => c[0] === "sandboxes.create");
    expect((create?.[3] as { env: unknown }).env).toEqual({ SESSION_ID: SESSION, ANTHROPIC_API_KEY: CREATE_SECRETS.deployment.ANTHROPIC_API_KEY });
  });

  it("a model named without a key secret: the deployment's key for that provider only", async () => {
    const { sdk, provider } = setup({ modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION, { agentConfig: { modelId: "openai/gpt-5" }, envVars: { SESSION_ID: SESSION, SIDECAR_TOKEN: CREATE_SECRETS.sandboxKey } }));
    const create = sdk.calls.find((c) => c[0] === "sandboxes.create");
    expect((create?.[3] as { env: unknown }).env).toEqual({ SESSION_ID: SESSION, OPENAI_API_KEY: CREATE_SECRETS.deployment.OPENAI_API_KEY });
  });
});
