import { BOOT_EXEC_TIMEOUT_MS } from "../../../functions/providers/sandbox-boot";
import { AuthenticationError, RateLimitError, SandboxError, SandboxNotFoundError, type SandboxInfo, type SandboxListOpts, type SandboxOpts } from "e2b";
import { CREATE_SECRETS, sessionCreateOpts } from "../../support/builders";
import { describe, expect, it } from "vitest";
import { ProviderError, ValidationError } from "../../../functions/domain/errors";
import {
  E2BSandboxProvider,
  MANAGED_BY_METADATA,
  classifyE2BError,
  RESUME_SANDBOX_OPERATION,
  type E2BProviderConfig,
  type E2BSandboxLike,
  type E2BSdk,
} from "../../../functions/providers/e2b/e2b-provider";
import type { CreateSandboxOpts } from "../../../functions/ports/sandbox-provider";
import { parseBootSpec, type BootSpec } from "../../../sandbox/boot/boot-spec";
import { imageLayout } from "../../../sandbox/boot/layout";
import { agentAuthorization, deriveAgentPassword } from "../../../sandbox/shared/access-token";
import { describeProviderContract } from "../../support/provider-contract";

type Call = [string, ...unknown[]];
interface FakeBox {
  id: string;
  startedAt: Date;
  endAt: Date;
  state: "running" | "paused" | "killed";
  metadata: Record<string, string>;
  commands: string[];
  files: Record<string, string>;
}

/** Records every SDK call; `failures` injects an error on the named call. */
class FakeE2B implements E2BSdk {
  calls: Call[] = [];
  boxes = new Map<string, FakeBox>();
  failures = new Map<string, Error>();
  /** A command containing this text exits 1 (e2b throws `CommandExitError` carrying the result). */
  failingCommand: string | null = null;
  commandStderr = "boom";
  private next = 0;

  private fail(method: string) {
    const err = this.failures.get(method);
    if (err) throw err;
  }
  private handle(box: FakeBox): E2BSandboxLike {
    return {
      sandboxId: box.id,
      getHost: (port) => `${port}-${box.id}.e2b.app`,
      files: {
        write: async (path, data) => {
          this.calls.push(["files.write", box.id, path, data]);
          box.files[path] = data;
        },
      },
      commands: {
        run: async (cmd, opts) => {
          this.calls.push(["commands.run", box.id, cmd, opts]);
          box.commands.push(cmd);
          if (this.failingCommand && cmd.includes(this.failingCommand)) {
            throw Object.assign(new Error(`exit status 1`), { name: "CommandExitError", exitCode: 1, stdout: "", stderr: this.commandStderr });
          }
          return { exitCode: 0, stdout: "", stderr: "" };
        },
      },
    };
  }
  private info(box: FakeBox): SandboxInfo {
    return { sandboxId: box.id, startedAt: box.startedAt, endAt: box.endAt, state: box.state === "paused" ? "paused" : "running", metadata: box.metadata } as SandboxInfo;
  }
  private live(id: string): FakeBox {
    const box = this.boxes.get(id);
    if (!box || box.state === "killed") throw new SandboxNotFoundError(`sandbox ${id} not found`);
    return box;
  }

  async create(template: string, opts: SandboxOpts) {
    this.calls.push(["create", template, opts]);
    this.fail("create");
    this.next += 1;
    const box: FakeBox = {
      id: `e2b-${this.next}`,
      startedAt: new Date(NOW + this.next * 1_000),
      endAt: new Date(NOW + this.next * 1_000 + (opts.timeoutMs ?? 300_000)),
      state: "running",
      metadata: opts.metadata ?? {},
      commands: [],
      files: {},
    };
    this.boxes.set(box.id, box);
    return this.handle(box);
  }
  async connect(sandboxId: string, opts?: { timeoutMs?: number }) {
    this.calls.push(["connect", sandboxId, opts]);
    this.fail("connect");
    const box = this.live(sandboxId);
    // Like E2B: a running sandbox's timeout only ever grows; a paused one restarts its clock.
    const endAt = NOW + (opts?.timeoutMs ?? 300_000);
    if (box.state === "paused" || endAt > box.endAt.getTime()) box.endAt = new Date(endAt);
    box.state = "running";
    return this.handle(box);
  }
  async kill(sandboxId: string) {
    this.calls.push(["kill", sandboxId]);
    this.fail("kill");
    const box = this.boxes.get(sandboxId);
    if (!box || box.state === "killed") return false;
    box.state = "killed";
    return true;
  }
  async pause(sandboxId: string, opts: { keepMemory: boolean }) {
    this.calls.push(["pause", sandboxId, opts]);
    const box = this.live(sandboxId);
    const was = box.state;
    box.state = "paused";
    return was === "running";
  }
  async createSnapshot(sandboxId: string) {
    this.calls.push(["createSnapshot", sandboxId]);
    this.live(sandboxId);
    return { snapshotId: `snap-${sandboxId}:default` };
  }
  async deleteSnapshot(snapshotId: string) {
    this.calls.push(["deleteSnapshot", snapshotId]);
    return true;
  }
  async getInfo(sandboxId: string) {
    this.calls.push(["getInfo", sandboxId]);
    this.fail("getInfo");
    return this.info(this.live(sandboxId));
  }
  list(opts: SandboxListOpts) {
    this.calls.push(["list", opts]);
    const items = [...this.boxes.values()].filter(
      (b) =>
        b.state !== "killed" &&
        Object.entries(opts.query?.metadata ?? {}).every(([k, v]) => b.metadata[k] === v) &&
        (!opts.query?.state || opts.query.state.includes(b.state as "running" | "paused")),
    );
    // Two pages, to prove the provider walks the paginator.
    const pages = [items.slice(0, 1), items.slice(1)];
    let i = 0;
    return {
      get hasNext() {
        return i < pages.length;
      },
      nextItems: async () => {
        this.calls.push(["list.nextItems", i]);
        // The real paginator does the HTTP request here, so API errors surface from `nextItems`.
        this.fail("list.nextItems");
        return (pages[i++] ?? []).map((b) => this.info(b));
      },
    };
  }
}

const NOW = 1_750_000_000_000;
const config: E2BProviderConfig = { template: "sandbox-tpl", timeoutSeconds: 3600 };
const SESSION = "ses_0123456789abcdefghjkmnpqrs";

const SPEC_PATH = "/home/user/.proliferate/boot-request.json";
/** Where the boot takes its sandbox key from (sandbox/boot/layout.ts `sandboxKey`). */
const KEY_PATH = "/home/user/.proliferate/sandbox-key";

/** The boot spec the provider wrote for the image's boot, parsed as the boot parses it. */
function bootSpecOf(sdk: FakeE2B, sandboxId: string): BootSpec {
  const raw = sdk.boxes.get(sandboxId)?.files[SPEC_PATH];
  if (raw === undefined) throw new Error(`no boot spec was written to ${sandboxId}`);
  return parseBootSpec(JSON.parse(raw));
}

function setup(ready = true, overrides: Partial<E2BProviderConfig> = {}) {
  const sdk = new FakeE2B();
  const probeHeaders: (Record<string, string> | undefined)[] = [];
  const provider = new E2BSandboxProvider(sdk, { ...config, ...overrides }, {
    now: () => NOW,
    readiness: { fetch: async (_url, init) => (probeHeaders.push(init?.headers), { ok: ready }), sleep: async () => undefined },
  });
  return { sdk, provider, probeHeaders };
}
function opts(over: Partial<CreateSandboxOpts> = {}): CreateSandboxOpts {
  return { sessionId: SESSION, repos: [], envVars: { GITHUB_TOKEN: "ghp_abcdefghijklmnopqrstuvwxyz0123456789" }, ...over };
}

describeProviderContract("e2b (SDK double)", () => setup().provider);

describe("E2BSandboxProvider", () => {
  it("resolves the sidecar through the preview host's /_sandbox/sidecar route, for running sandboxes only", async () => {
    const { provider } = setup();
    await provider.createSandbox(opts());
    expect(await provider.resolveTunnels("e2b-1")).toEqual({
      openCodeUrl: "https://4096-e2b-1.e2b.app",
      previewUrl: "https://20000-e2b-1.e2b.app",
      sidecarUrl: "https://20000-e2b-1.e2b.app/_sandbox/sidecar",
    });
    await provider.pause(SESSION, "e2b-1");
    await expect(provider.resolveTunnels("e2b-1")).rejects.toMatchObject({ name: "ProviderError", operation: "resolveTunnels" });
  });

  describe("issue 22 §5", () => {
    it("resolveTunnels and execCommand check the state first and connect with what is left of the timeout, never E2B's 300 s default", async () => {
      const { sdk, provider } = setup();
      await provider.createSandbox(opts());
      const box = sdk.boxes.get("e2b-1");
      if (box) box.endAt = new Date(NOW + 1_234_500);
      sdk.calls = [];
      await provider.resolveTunnels("e2b-1");
      await provider.execCommand("e2b-1", ["true"]);
      expect(sdk.calls.filter((c) => c[0] === "getInfo" || c[0] === "connect")).toEqual([
        ["getInfo", "e2b-1"],
        ["connect", "e2b-1", { timeoutMs: 1_235_000 }],
        ["getInfo", "e2b-1"],
        ["connect", "e2b-1", { timeoutMs: 1_235_000 }],
      ]);
      // A paused sandbox is refused before any connect (which would resume it).
      await provider.pause(SESSION, "e2b-1");
      sdk.calls = [];
      await expect(provider.execCommand("e2b-1", ["true"])).rejects.toMatchObject({ operation: "execCommand" });
      expect(sdk.calls.map((c) => c[0])).toEqual(["getInfo"]);
      expect(sdk.boxes.get("e2b-1")?.state).toBe("paused");
    });

    it("classifies a bare SandboxError by its status code: 404 not found (a deleted snapshot template), 401/403 auth", () => {
      const withStatus = (statusCode: number) => Object.assign(new SandboxError(`${statusCode}: nope`), { statusCode });
      expect(classifyE2BError(withStatus(404))).toBe("not_found");
      expect(classifyE2BError(withStatus(403))).toBe("auth");
      expect(classifyE2BError(withStatus(500))).toBe("other");
    });

    it("a create from a snapshot template that no longer exists is the restore failure (resumeSandbox, not retryable)", async () => {
      const { sdk, provider } = setup();
      sdk.failures.set("create", Object.assign(new SandboxError("404: snapshot not found"), { statusCode: 404 }));
      const err = (await provider.createSandbox(opts({ snapshotId: "e2b-snapshot:gone" })).catch((e: unknown) => e)) as ProviderError;
      expect(err).toBeInstanceOf(ProviderError);
      expect(err).toMatchObject({ operation: RESUME_SANDBOX_OPERATION, retryable: false });
      expect(err.message).toContain("snapshot e2b-snapshot:gone no longer exists");
    });

    it("env names E2B's shells could not export fail the create before any SDK call", async () => {
      const { sdk, provider } = setup();
      await expect(provider.createSandbox(opts({ envVars: { "NOT-A-NAME": "x" } }))).rejects.toMatchObject({ operation: "createSandbox", retryable: false });
      expect(sdk.calls).toEqual([]);
    });
  });

  it("creates from the template with envs, session metadata, timeout and auto-pause", async () => {
    const { sdk, provider } = setup();
    const result = await provider.createSandbox(opts());
    expect(sdk.calls[0]).toEqual([
      "create",
      "sandbox-tpl",
      {
        envs: { GITHUB_TOKEN: "ghp_abcdefghijklmnopqrstuvwxyz0123456789", SESSION_ID: SESSION },
        metadata: { sessionId: SESSION, ...MANAGED_BY_METADATA },
        timeoutMs: 3_600_000,
        // Only the control plane resumes a paused sandbox, never inbound traffic (issue 22 §5).
        lifecycle: { onTimeout: "pause", autoResume: false },
      },
    ]);
    expect(result).toEqual({
      sandboxId: "e2b-1",
      tunnelUrl: "https://4096-e2b-1.e2b.app",
      previewUrl: "https://20000-e2b-1.e2b.app",
      expiresAt: NOW + 3_600_000,
    });
    // The image's boot reads the spec from a file; one command runs phase 1.
    expect(sdk.calls[1]).toEqual(["files.write", "e2b-1", SPEC_PATH, expect.any(String)]);
    expect(sdk.calls[2]).toEqual(["commands.run", "e2b-1", `node /opt/sandbox/boot.mjs start --spec ${SPEC_PATH}`, { timeoutMs: BOOT_EXEC_TIMEOUT_MS }]);
    expect(sdk.boxes.get("e2b-1")?.commands).toHaveLength(1);
    const spec = bootSpecOf(sdk, "e2b-1");
    expect(spec.request).toMatchObject({ sessionId: SESSION, repos: [], restored: false, now: NOW, sessionType: "coding" });
    expect(spec.layout).toEqual(imageLayout());
    expect(sdk.boxes.get("e2b-1")?.files[SPEC_PATH]).not.toContain("ghp_");
  });

  it("a failing boot fails the create with the boot's explanation and kills the sandbox", async () => {
    const { sdk, provider } = setup();
    sdk.failingCommand = "boot.mjs start";
    sdk.commandStderr = `${JSON.stringify({ type: "boot.failed", step: "clone web", error: 'boot step "clone web" failed: git clone exited 128' })}\n`;
    const err = (await provider.createSandbox(opts()).catch((e: unknown) => e)) as ProviderError;
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ operation: "createSandbox" });
    expect(err.message).toContain('boot step "clone web" failed');
    expect(sdk.boxes.get("e2b-1")?.state).toBe("killed");
  });

  it("pause is native: keepMemory, and the sandbox id is the snapshot id", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    expect(await provider.pause(SESSION, "e2b-1")).toEqual({ snapshotId: "e2b-1" });
    expect(sdk.calls.at(-1)).toEqual(["pause", "e2b-1", { keepMemory: true }]);
    expect(sdk.boxes.get("e2b-1")?.state).toBe("paused");
  });

  it("resumes a paused sandbox with connect and re-injects env vars through a JSON file (never the sandbox key), without booting", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    await provider.pause(SESSION, "e2b-1");
    sdk.calls = [];
    const resumed = await provider.ensureSandbox(
      opts({ snapshotId: "e2b-1", currentSandboxId: "e2b-1", envVars: { GITHUB_TOKEN: "rotated", SIDECAR_TOKEN: "sandbox-key" } }),
    );
    expect(resumed).toMatchObject({ sandboxId: "e2b-1", recovered: false });
    expect(sdk.calls[0]).toEqual(["getInfo", "e2b-1"]);
    expect(sdk.calls[1]).toEqual(["connect", "e2b-1", { timeoutMs: 3_600_000 }]);
    expect(sdk.calls[2]).toEqual([
      "files.write",
      "e2b-1",
      "/home/user/.proliferate/env.json",
      JSON.stringify({ GITHUB_TOKEN: "rotated", SESSION_ID: SESSION }),
    ]);
    expect(sdk.calls[3]?.[2]).toContain("jq -r");
    expect(sdk.calls.map((c) => c[0])).not.toContain("create");
    // Processes survived the pause: no boot, and without git freshness no resume step either.
    expect(sdk.calls.filter((c) => c[0] === "commands.run")).toHaveLength(1);
  });

  it("probes OpenCode with the password derived from the create call's SIDECAR_TOKEN, on create and on resume", async () => {
    const { provider, probeHeaders } = setup();
    const envVars = { SIDECAR_TOKEN: "the-sandbox-key-0123456789" };
    await provider.createSandbox(opts({ envVars }));
    await provider.pause(SESSION, "e2b-1");
    await provider.ensureSandbox(opts({ snapshotId: "e2b-1", currentSandboxId: "e2b-1", envVars }));
    const expected = { authorization: agentAuthorization(deriveAgentPassword("the-sandbox-key-0123456789")) };
    // On resume, then the sidecar's open /health through the preview (restored-processes.ts).
    expect(probeHeaders).toEqual([expected, expected, undefined]);
  });

  it("on resume with git freshness, runs the boot's resume mode; a failed pull never fails the resume", async () => {
    const { sdk, provider } = setup(true, { gitFreshness: { enabled: true, cadenceSeconds: 0 } });
    await provider.createSandbox(opts({ repos: [{ url: "https://github.com/acme/web.git" }] }));
    await provider.pause(SESSION, "e2b-1");
    sdk.calls = [];
    sdk.failingCommand = "boot.mjs resume";
    const resumed = await provider.ensureSandbox(opts({ snapshotId: "e2b-1", currentSandboxId: "e2b-1", repos: [{ url: "https://github.com/acme/web.git" }] }));
    expect(resumed).toMatchObject({ sandboxId: "e2b-1", recovered: false });
    const commands = sdk.calls.filter((c) => c[0] === "commands.run").map((c) => c[2]);
    expect(commands.at(-1)).toBe(`node /opt/sandbox/boot.mjs resume --spec ${SPEC_PATH}`);
    expect(bootSpecOf(sdk, "e2b-1").request).toMatchObject({ restored: true, gitFreshness: { enabled: true, cadenceSeconds: 0 } });
  });

  it("a failed resume is reported and never replaced by a fresh sandbox (seed 003 §9)", async () => {
    const { sdk, provider } = setup();
    const err = await provider.createSandbox(opts({ snapshotId: "e2b-gone" })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).operation).toBe(RESUME_SANDBOX_OPERATION);
    expect(sdk.calls.map((c) => c[0])).toEqual(["connect"]);
  });

  it("snapshot makes a snapshot template and restores it with create", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    const snap = await provider.snapshot(SESSION, "e2b-1");
    expect(snap).toEqual({ snapshotId: "e2b-snapshot:snap-e2b-1:default" });
    sdk.calls = [];
    await provider.createSandbox(opts({ snapshotId: snap.snapshotId }));
    expect(sdk.calls[0]?.slice(0, 2)).toEqual(["create", "snap-e2b-1:default"]);
  });

  it("terminate: kill answering false (already gone) is success; without an id it kills by session metadata", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    await provider.terminate(SESSION);
    expect(sdk.calls.filter((c) => c[0] === "list")[0]).toEqual(["list", { query: { metadata: { sessionId: SESSION } } }]);
    expect(sdk.boxes.get("e2b-1")?.state).toBe("killed");
    await expect(provider.terminate(SESSION, "e2b-1")).resolves.toBeUndefined();
    sdk.failures.set("kill", new SandboxNotFoundError("gone"));
    await expect(provider.terminate(SESSION, "e2b-1")).resolves.toBeUndefined();
  });

  it("checkSandboxes lists running sandboxes by metadata across pages and never connects", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    await provider.createSandbox(opts({ sessionId: "ses_zzzzzzzzzzzzzzzzzzzzzzzzzz" }));
    sdk.calls = [];
    expect(await provider.checkSandboxes(["e2b-2", "e2b-1", "e2b-9"])).toEqual(["e2b-2", "e2b-1"]);
    expect(sdk.calls).toEqual([
      ["list", { query: { metadata: { ...MANAGED_BY_METADATA }, state: ["running"] } }],
      ["list.nextItems", 0],
      ["list.nextItems", 1],
    ]);
  });

  it("auth errors are not retryable, rate limits are, and secrets in messages are redacted", async () => {
    const auth = setup();
    auth.sdk.failures.set("create", new AuthenticationError("invalid API key e2b_0123456789abcdefghijklmnop"));
    const err = (await auth.provider.createSandbox(opts()).catch((e: unknown) => e)) as ProviderError;
    expect(err).toMatchObject({ operation: "createSandbox", retryable: false });
    expect(`${err.message} ${(err.cause as Error).message}`).not.toContain("e2b_0123456789abcdefghijklmnop");

    const limited = setup();
    limited.sdk.failures.set("create", new RateLimitError("slow down"));
    await expect(limited.provider.createSandbox(opts())).rejects.toMatchObject({ retryable: true });
  });

  it("ensureSandbox recovering a running sandbox reads its expiry back from E2B (so an expiry migration is armed)", async () => {
    const { sdk, provider } = setup();
    await provider.createSandbox(opts());
    // Extended past what this call would ask for (by an earlier connect): E2B's endAt is the truth.
    const box = sdk.boxes.get("e2b-1");
    if (box) box.endAt = new Date(NOW + 5_000_000);
    sdk.calls = [];
    const recovered = await provider.ensureSandbox(opts({ currentSandboxId: "e2b-1" }));
    expect(recovered).toMatchObject({ sandboxId: "e2b-1", recovered: true, expiresAt: NOW + 5_000_000 });
    expect(sdk.calls.map((c) => c[0])).toEqual(["getInfo", "connect", "getInfo"]);
    expect(sdk.calls.map((c) => c[0])).not.toContain("create");
  });

  it("requires a configured template: E2B's default \"base\" has no boot script", () => {
    for (const template of ["", "  ", "base"]) {
      expect(() => new E2BSandboxProvider(new FakeE2B(), { ...config, template })).toThrow(ValidationError);
      expect(() => new E2BSandboxProvider(new FakeE2B(), { ...config, template })).toThrow(/E2B_TEMPLATE must name the template built from sandbox\/image/);
    }
  });

  it("memorySnapshot is unsupported", async () => {
    const { provider } = setup();
    expect(provider.supportsMemorySnapshot).toBe(false);
    await expect(provider.memorySnapshot(SESSION, "e2b-1")).rejects.toMatchObject({ operation: "memorySnapshot" });
  });

  describe("listSandboxes", () => {
    const OTHER = "ses_zzzzzzzzzzzzzzzzzzzzzzzzzz";

    it("lists running and paused sandboxes by the managed-by metadata across pages, never connecting", async () => {
      const { sdk, provider } = setup();
      await provider.createSandbox(opts());
      await provider.createSandbox(opts({ sessionId: OTHER }));
      await provider.pause(OTHER, "e2b-2");
      await provider.createSandbox(opts({ sessionId: "ses_killed_000000000000000000" }));
      await provider.terminate("ses_killed_000000000000000000", "e2b-3");
      // Not ours: no managed-by metadata.
      await sdk.create("other-tpl", { metadata: { sessionId: "ses_foreign_00000000000000000" } });
      // Ours, without a session id in its metadata.
      await sdk.create("sandbox-tpl", { metadata: { ...MANAGED_BY_METADATA } });
      sdk.calls = [];

      expect(await provider.listSandboxes()).toEqual([
        { sandboxId: "e2b-1", sessionId: SESSION, startedAt: NOW + 1_000, state: "running" },
        { sandboxId: "e2b-2", sessionId: OTHER, startedAt: NOW + 2_000, state: "paused" },
        { sandboxId: "e2b-5", sessionId: null, startedAt: NOW + 5_000, state: "running" },
      ]);
      expect(sdk.calls).toEqual([
        ["list", { query: { metadata: { ...MANAGED_BY_METADATA }, state: ["running", "paused"] } }],
        ["list.nextItems", 0],
        ["list.nextItems", 1],
      ]);
      // Listing did not resume the paused sandbox.
      expect(sdk.boxes.get("e2b-2")?.state).toBe("paused");
    });

    it("is empty when nothing is alive", async () => {
      const { provider } = setup();
      expect(await provider.listSandboxes()).toEqual([]);
    });

    it("maps SDK errors: auth is not retryable, rate limits are, and messages are redacted", async () => {
      const auth = setup();
      auth.sdk.failures.set("list.nextItems", new AuthenticationError("invalid API key e2b_0123456789abcdefghijklmnop"));
      const err = (await auth.provider.listSandboxes().catch((e: unknown) => e)) as ProviderError;
      expect(err).toBeInstanceOf(ProviderError);
      expect(err).toMatchObject({ provider: "e2b", operation: "listSandboxes", retryable: false });
      expect(err.context).toMatchObject({ kind: "auth" });
      expect(`${err.message} ${(err.cause as Error).message}`).not.toContain("e2b_0123456789abcdefghijklmnop");

      const limited = setup();
      await limited.provider.createSandbox(opts());
      limited.sdk.failures.set("list.nextItems", new RateLimitError("slow down"));
      await expect(limited.provider.listSandboxes()).rejects.toMatchObject({ operation: "listSandboxes", retryable: true });
    });
  });
});

describe("E2BSandboxProvider: what a session's create call carries", () => {
  it("keeps the processes (and so the sidecar's key epoch) when resuming a paused sandbox and when restoring a snapshot (E2B snapshots hold memory)", () => {
    const { provider } = setup();
    expect(provider.keepsProcesses("e2b-1")).toBe(true);
    expect(provider.keepsProcesses("e2b-snapshot:tpl-1")).toBe(true);
    for (const id of [null, undefined, ""]) expect(provider.keepsProcesses(id)).toBe(false);
  });

  it("the sandbox key: a 0600 file for the boot, written before the boot runs; never an env var, a command line or the spec (issue 14 §2)", async () => {
    const { sdk, provider } = setup(true, { modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION));
    const key = CREATE_SECRETS.sandboxKey;
    expect(sdk.boxes.get("e2b-1")?.files[KEY_PATH]).toBe(key);
    const order = sdk.calls.map((c) => (c[0] === "files.write" ? `write ${String(c[2])}` : c[0] === "commands.run" ? String(c[2]) : c[0]));
    const wrote = order.indexOf(`write ${KEY_PATH}`);
    expect(order[wrote + 1]).toBe(`chmod 600 ${KEY_PATH}`);
    expect(wrote).toBeLessThan(order.findIndex((c) => c.includes("boot.mjs start")));
    const create = sdk.calls.find((c) => c[0] === "create");
    expect(JSON.stringify(create)).not.toContain(key);
    for (const command of sdk.calls.filter((c) => c[0] === "commands.run")) expect(JSON.stringify(command)).not.toContain(key);
    expect(sdk.boxes.get("e2b-1")?.files[SPEC_PATH]).not.toContain(key);
  });

  it("envs: exactly the session's vars (its own model key, never the deployment's); the boot spec file: the settings, no secret", async () => {
    const { sdk, provider } = setup(true, { modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION, ));
    const create = sdk.calls.find((c) => c[0] === "create");
    // Never the sandbox key as a container-wide variable (issue 14 §2): every process would see it.
    expect((create?.[2] as { envs: unknown }).envs).toEqual({ SESSION_ID: SESSION, ANTHROPIC_API_KEY: CREATE_SECRETS.sessionModelKey });
    expect(bootSpecOf(sdk, "e2b-1").request).toMatchObject({ modelId: "anthropic/claude-sonnet-4-5", systemPrompt: "Be brief.", controlPlaneUrl: "https://api.example.test" });
    const raw = sdk.boxes.get("e2b-1")?.files[SPEC_PATH] ?? "";
    for (const secret of [CREATE_SECRETS.sandboxKey, CREATE_SECRETS.sessionModelKey, ...Object.values(CREATE_SECRETS.deployment)]) expect(raw).not.toContain(secret);
  });

  it("no model configured: the deployment's Anthropic key only; a resume never writes a model key into the shell env file", async () => {
    const { sdk, provider } = setup(true, { modelEnv: CREATE_SECRETS.deployment });
    await provider.createSandbox(sessionCreateOpts(SESSION, { agentConfig: undefined, envVars: { SESSION_ID: SESSION, SIDECAR_TOKEN: CREATE_SECRETS.sandboxKey } }));
    const create = sdk.calls.find((c) => c[0] === "create");
    expect((create?.[2] as { envs: unknown }).envs).toEqual({ SESSION_ID: SESSION, ANTHROPIC_API_KEY: CREATE_SECRETS.deployment.ANTHROPIC_API_KEY });
    await provider.pause(SESSION, "e2b-1");
    await provider.ensureSandbox(sessionCreateOpts(SESSION, { snapshotId: "e2b-1", currentSandboxId: "e2b-1" }));
    const written = Object.entries(sdk.boxes.get("e2b-1")?.files ?? {})
      .filter(([path]) => path !== KEY_PATH)
      .map(([, content]) => content)
      .join("\n");
    for (const secret of [CREATE_SECRETS.sandboxKey, CREATE_SECRETS.sessionModelKey, CREATE_SECRETS.deployment.ANTHROPIC_API_KEY]) expect(written).not.toContain(secret);
  });
});
