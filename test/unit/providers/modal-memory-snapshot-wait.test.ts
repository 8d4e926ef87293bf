/**
 * Modal V1 memory snapshots wait the seed's 120 s (seed 002, ARCHITECTURE.md §5), not the 55 s
 * of modal@0.11's own V1 `experimentalSnapshot`: on the Modal stand-in (test/support/provider-standins),
 * whose snapshot wait answers TIMEOUT until the snapshot is ready, as Modal's server does, on a
 * simulated clock.
 */
import { afterAll, describe, expect, it } from "vitest";
import { ProviderError } from "../../../functions/domain/errors";
import { ModalSandboxProvider, type ModalSandboxBackend } from "../../../functions/providers/modal/modal-provider";
import type { CreateSandboxOpts } from "../../../functions/ports/sandbox-provider";
import { MODAL_STANDIN_BASE_IMAGE, ModalStandIn } from "../../support/provider-standins/modal-standin";
import { removeStandInRoots } from "../../support/provider-standins/standin-machine";

afterAll(() => removeStandInRoots());

const SESSION = "ses_0123456789abcdefghjkmnpqrs";
const opts = (over: Partial<CreateSandboxOpts> = {}): CreateSandboxOpts => ({
  sessionId: SESSION,
  repos: [],
  envVars: { SESSION_ID: SESSION, SIDECAR_TOKEN: "sandbox-key-for-the-snapshot-wait-suite-0123456789" },
  ...over,
});

async function running(backend: ModalSandboxBackend, memorySnapshotMs: number) {
  const sdk = new ModalStandIn(backend);
  sdk.memorySnapshotMs = memorySnapshotMs;
  const provider = new ModalSandboxProvider(
    sdk,
    { appName: "snapshot-wait", baseImage: MODAL_STANDIN_BASE_IMAGE, timeoutSeconds: 3600, sandboxBackend: backend },
    { now: () => sdk.now, readiness: { fetch: sdk.fetch, sleep: async () => undefined } },
  );
  const { sandboxId } = await provider.ensureSandbox(opts());
  return { sdk, provider, sandboxId };
}

describe("Modal V1 memory snapshots wait up to 120 s", () => {
  it("the SDK's own V1 snapshot gives up after one 55 s wait (why the provider does not use it on V1)", async () => {
    const { sdk, sandboxId } = await running("v1", 100_000);
    const sandbox = await sdk.sandboxes.fromId(sandboxId);
    await expect(sandbox.experimentalSnapshot()).rejects.toMatchObject({ name: "ExecutionError" });
  });

  it("a snapshot that takes 100 s succeeds: the wait is asked again with the time left, and the snapshot restores", async () => {
    const { sdk, provider, sandboxId } = await running("v1", 100_000);
    const started = sdk.now;
    const snap = await provider.memorySnapshot(SESSION, sandboxId);
    expect(snap.snapshotId).toMatch(/^mem:sn-/);
    expect(sdk.now - started).toBe(100_000);
    expect(sdk.snapshotWaits.map((w) => w.timeout)).toEqual([55, 55]);
    await provider.terminate(SESSION, sandboxId);
    const restored = await provider.ensureSandbox(opts({ snapshotId: snap.snapshotId }));
    expect(restored.recovered).toBe(false);
  });

  it("a snapshot not ready after 120 s fails with a ProviderError naming the wait, after exactly 120 s of waits", async () => {
    const { sdk, provider, sandboxId } = await running("v1", 150_000);
    const started = sdk.now;
    const err = await provider.memorySnapshot(SESSION, sandboxId).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ provider: "modal", operation: "memorySnapshot", retryable: false });
    expect((err as Error).message).toMatch(/memory snapshot sn-\d+ of sandbox sb-\d+ was not ready within 120 s/);
    expect(sdk.snapshotWaits.map((w) => w.timeout)).toEqual([55, 55, 10]);
    expect(sdk.now - started).toBe(120_000);
  });

  it("a snapshot Modal reports failed fails at once with Modal's exception text", async () => {
    const { sdk, provider, sandboxId } = await running("v1", 10_000);
    sdk.memorySnapshotFailure = "checkpoint failed: process table too large";
    const err = await provider.memorySnapshot(SESSION, sandboxId).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as Error).message).toContain("checkpoint failed: process table too large");
    expect(sdk.snapshotWaits).toHaveLength(1);
  });

  it("V2 keeps the SDK's experimentalSnapshot (its own 165 s wait): no V1 control-plane calls", async () => {
    const { sdk, provider, sandboxId } = await running("v2", 100_000);
    const snap = await provider.memorySnapshot(SESSION, sandboxId);
    expect(snap.snapshotId).toMatch(/^mem:sn-/);
    expect(sdk.snapshotWaits).toEqual([]);
  });
});
