/**
 * The test providers themselves (test/support): the instant provider honours the provider
 * contract and its documented semantics, and the fault-injecting wrapper applies its plans in
 * order, holds and releases calls as staged, and records every call.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import type { CreateSandboxOpts, SandboxProvider } from "../../functions/ports/sandbox-provider";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { InstantSandboxProvider } from "../support/instant-provider";
import { describeProviderContract } from "../support/provider-contract";

const opts = (sessionId: string, extra: Partial<CreateSandboxOpts> = {}): CreateSandboxOpts => ({ sessionId, repos: [], envVars: {}, ...extra });

describeProviderContract("instant (pause and memory snapshots)", () => new InstantSandboxProvider());
describeProviderContract("instant (no pause, no memory snapshots)", () => new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false }));
describeProviderContract("fault-injecting wrapper without faults", () => new FaultInjectingProvider(new InstantSandboxProvider()));

describe("InstantSandboxProvider", () => {
  it("numbers sandboxes in creation order and reports expiry and tunnel from its options", async () => {
    let now = 1_000;
    const p = new InstantSandboxProvider({ tunnelUrl: "http://oc.test", timeoutSeconds: 60, now: () => now });
    const a = await p.createSandbox(opts("ses_a"));
    now = 5_000;
    const b = await p.createSandbox(opts("ses_b", { snapshotId: "isnap_7" }));
    expect([a.sandboxId, b.sandboxId]).toEqual(["isb_1", "isb_2"]);
    expect(a).toEqual({ sandboxId: "isb_1", tunnelUrl: "http://oc.test", previewUrl: null, expiresAt: 61_000 });
    expect(b.expiresAt).toBe(65_000);
    expect(p.sandbox("isb_2")?.restoredFrom).toBe("isnap_7");
    expect(p.live()).toEqual(["isb_1", "isb_2"]);
    expect(await p.resolveTunnels("isb_1")).toEqual({ openCodeUrl: "http://oc.test", previewUrl: null, sidecarUrl: null });
    await expect(new InstantSandboxProvider().createSandbox(opts("ses_c"))).resolves.toMatchObject({ tunnelUrl: "http://instant.invalid" });
  });

  it("ensureSandbox recovers the session's live currentSandboxId, never another session's, and replaces a dead one", async () => {
    const p = new InstantSandboxProvider();
    const first = await p.ensureSandbox(opts("ses_a"));
    expect(first).toMatchObject({ sandboxId: "isb_1", recovered: false });
    expect(await p.ensureSandbox(opts("ses_a", { currentSandboxId: "isb_1" }))).toMatchObject({ sandboxId: "isb_1", recovered: true });
    expect(await p.ensureSandbox(opts("ses_b", { currentSandboxId: "isb_1" }))).toMatchObject({ sandboxId: "isb_2", recovered: false });

    p.kill("isb_1");
    expect(await p.ensureSandbox(opts("ses_a", { currentSandboxId: "isb_1" }))).toMatchObject({ sandboxId: "isb_3", recovered: false });
    expect(p.live()).toEqual(["isb_2", "isb_3"]);
  });

  it("terminate is idempotent; without a sandbox id it ends every sandbox of the session; checkSandboxes only reads", async () => {
    const p = new InstantSandboxProvider();
    await p.createSandbox(opts("ses_a"));
    await p.createSandbox(opts("ses_a"));
    await p.createSandbox(opts("ses_b"));
    expect(await p.checkSandboxes(["isb_1", "isb_3", "isb_404"])).toEqual(["isb_1", "isb_3"]);
    await p.terminate("ses_a");
    expect(p.live()).toEqual(["isb_3"]);
    await expect(p.terminate("ses_b", "isb_3")).resolves.toBeUndefined();
    await expect(p.terminate("ses_b", "isb_3")).resolves.toBeUndefined();
    await expect(p.terminate("ses_x", "isb_404")).resolves.toBeUndefined();
    expect(p.live()).toEqual([]);
    await expect(p.resolveTunnels("isb_3")).rejects.toBeInstanceOf(ProviderError);
  });

  it("snapshots return fresh ids; pause keeps the sandbox id as snapshot id and createSandbox resumes it", async () => {
    const p = new InstantSandboxProvider();
    const { sandboxId } = await p.createSandbox(opts("ses_a"));
    expect(await p.snapshot("ses_a", sandboxId)).toEqual({ snapshotId: "isnap_1" });
    expect(await p.memorySnapshot("ses_a", sandboxId)).toEqual({ snapshotId: "mem:isnap_2" });

    expect(await p.pause("ses_a", sandboxId)).toEqual({ snapshotId: sandboxId });
    expect(await p.pause("ses_a", sandboxId)).toEqual({ snapshotId: sandboxId });
    expect(p.live()).toEqual([]);
    await expect(p.snapshot("ses_a", sandboxId)).rejects.toMatchObject({ operation: "snapshot" });

    const resumed = await p.createSandbox(opts("ses_a", { snapshotId: sandboxId }));
    expect(resumed.sandboxId).toBe(sandboxId);
    expect(p.live()).toEqual([sandboxId]);
  });

  it("refuses pause and memory snapshots when the flags say so", async () => {
    const p = new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: false });
    const { sandboxId } = await p.createSandbox(opts("ses_a"));
    await expect(p.pause("ses_a", sandboxId)).rejects.toMatchObject({ name: "ProviderError", operation: "pause", retryable: false });
    await expect(p.memorySnapshot("ses_a", sandboxId)).rejects.toMatchObject({ operation: "memorySnapshot" });
    await expect(p.createSandbox(opts("ses_a", { snapshotId: "mem:isnap_1" }))).rejects.toBeInstanceOf(ProviderError);
    expect(p.live()).toEqual([sandboxId]);
  });

  it("listSandboxes lists running and paused sandboxes with their session and start time, not terminated or killed ones", async () => {
    let now = 1_000;
    const p = new InstantSandboxProvider({ now: () => now });
    await p.createSandbox(opts("ses_a"));
    now = 2_000;
    await p.createSandbox(opts("ses_b"));
    await p.createSandbox(opts("ses_c"));
    await p.createSandbox(opts("ses_d"));
    await p.pause("ses_b", "isb_2");
    await p.terminate("ses_c", "isb_3");
    p.kill("isb_4");
    expect(await p.listSandboxes()).toEqual([
      { sandboxId: "isb_1", sessionId: "ses_a", startedAt: 1_000, state: "running" },
      { sandboxId: "isb_2", sessionId: "ses_b", startedAt: 2_000, state: "paused" },
    ]);
  });
});

describe("FaultInjectingProvider", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("consumes failure plans in order without reaching the inner provider, then passes through", async () => {
    const inner = new InstantSandboxProvider();
    const p = new FaultInjectingProvider(inner);
    const transient = new ProviderError("local", "createSandbox", "capacity", { retryable: true });
    const fatal = new ProviderError("local", "createSandbox", "bad image", { retryable: false });
    p.failNext("createSandbox", transient).failNext("createSandbox", fatal, 2);

    const outcomes: unknown[] = [];
    for (let i = 0; i < 4; i++) outcomes.push(await p.createSandbox(opts("ses_a")).catch((e: unknown) => e));
    expect(outcomes.slice(0, 3)).toEqual([transient, fatal, fatal]);
    expect((outcomes[0] as ProviderError).retryable).toBe(true);
    expect((outcomes[1] as ProviderError).retryable).toBe(false);
    expect(outcomes[3]).toMatchObject({ sandboxId: "isb_1" });
    expect(inner.live()).toEqual(["isb_1"]);
    // Plans are per operation.
    p.failNext("snapshot", transient);
    expect(await p.checkSandboxes(["isb_1"])).toEqual(["isb_1"]);
  });

  it("records every call with its arguments and time, failed ones included", async () => {
    let now = 100;
    const p = new FaultInjectingProvider(new InstantSandboxProvider(), { now: () => now++ });
    p.failNext("terminate", new ProviderError("local", "terminate", "boom"));
    const created = await p.ensureSandbox(opts("ses_a"));
    await p.terminate("ses_a", created.sandboxId).catch(() => undefined);
    await p.terminate("ses_a", created.sandboxId);
    expect(p.calls).toEqual([
      { op: "ensureSandbox", args: [opts("ses_a")], at: 100 },
      { op: "terminate", args: ["ses_a", "isb_1"], at: 101 },
      { op: "terminate", args: ["ses_a", "isb_1"], at: 102 },
    ]);
    expect(p.callsOf("terminate")).toHaveLength(2);
  });

  it("listSandboxes delegates to the inner provider, is recorded, and takes failure plans", async () => {
    const inner = new InstantSandboxProvider();
    const p = new FaultInjectingProvider(inner, { now: () => 7 });
    await inner.createSandbox(opts("ses_a"));
    const down = new ProviderError("local", "listSandboxes", "provider down", { retryable: true });
    p.failNext("listSandboxes", down);
    await expect(p.listSandboxes()).rejects.toBe(down);
    expect(await p.listSandboxes()).toEqual(await inner.listSandboxes());
    expect(p.callsOf("listSandboxes")).toEqual([
      { op: "listSandboxes", args: [], at: 7 },
      { op: "listSandboxes", args: [], at: 7 },
    ]);
  });

  it("hold pauses a call before the inner operation until released, so another actor can overtake it", async () => {
    const inner = new InstantSandboxProvider();
    const p = new FaultInjectingProvider(inner);
    const held = p.hold("createSandbox");
    const order: string[] = [];
    const slow = p.createSandbox(opts("ses_a")).then((r) => order.push(`slow:${r.sandboxId}`));
    await held.reached;
    expect(inner.live()).toEqual([]);

    await p.createSandbox(opts("ses_b")).then((r) => order.push(`fast:${r.sandboxId}`));
    expect(order).toEqual(["fast:isb_1"]);
    held.release();
    await slow;
    expect(order).toEqual(["fast:isb_1", "slow:isb_2"]);
  });

  it("an 'after' hold keeps the result back while the side effect is already visible; an early release passes through", async () => {
    const inner = new InstantSandboxProvider();
    const p = new FaultInjectingProvider(inner);
    const held = p.hold("createSandbox", "after");
    let settled = false;
    const call = p.createSandbox(opts("ses_a")).finally(() => (settled = true));
    await held.reached;
    expect(inner.live()).toEqual(["isb_1"]);
    expect(settled).toBe(false);
    held.release();
    await expect(call).resolves.toMatchObject({ sandboxId: "isb_1" });

    const early = p.hold("health");
    early.release();
    await expect(p.health()).resolves.toBe(true);
    await expect(early.reached).resolves.toBeUndefined();
  });

  it("crashAfter runs the inner operation, then throws a non-retryable ProviderError once", async () => {
    const inner = new InstantSandboxProvider();
    const p = new FaultInjectingProvider(inner);
    p.crashAfter("createSandbox");
    const err = await p.createSandbox(opts("ses_a")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ retryable: false, operation: "createSandbox" });
    expect(inner.live()).toEqual(["isb_1"]);
    await expect(p.createSandbox(opts("ses_a"))).resolves.toMatchObject({ sandboxId: "isb_2" });
  });

  it("delay holds every call of the operation for the given time until removed", async () => {
    vi.useFakeTimers();
    const p = new FaultInjectingProvider(new InstantSandboxProvider());
    p.delay("health", 500);
    let done = false;
    const call = p.health().then(() => (done = true));
    await vi.advanceTimersByTimeAsync(499);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await call;
    expect(done).toBe(true);

    p.delay("health", 0);
    await expect(p.health()).resolves.toBe(true);
  });

  it("passes capability flags and execCommand through", async () => {
    const plain = new FaultInjectingProvider(new InstantSandboxProvider({ type: "e2b", supportsPause: true, supportsAutoPause: true, supportsMemorySnapshot: false }));
    expect([plain.type, plain.supportsPause, plain.supportsAutoPause, plain.supportsMemorySnapshot]).toEqual(["e2b", true, true, false]);
    expect(plain.execCommand).toBeUndefined();

    const withExec: SandboxProvider = Object.assign(new InstantSandboxProvider(), {
      execCommand: async (_id: string, argv: string[]) => ({ stdout: argv.join(" "), stderr: "", exitCode: 0 }),
    });
    const wrapped = new FaultInjectingProvider(withExec);
    await expect(wrapped.execCommand?.("isb_1", ["echo", "hi"])).resolves.toEqual({ stdout: "echo hi", stderr: "", exitCode: 0 });
    expect(wrapped.callsOf("execCommand")).toMatchObject([{ args: ["isb_1", ["echo", "hi"], undefined] }]);
  });
});
