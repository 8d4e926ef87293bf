/**
 * The `SandboxProvider` port's common behaviour (seed 003 §1 invariants), run against every
 * provider: local (real processes), Modal and E2B (SDK doubles). Provider-agnostic and free of
 * timing: it only uses the port, and waits on nothing but the promises the port returns.
 */
import { describe, expect, it } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import type { CreateSandboxOpts, SandboxProvider } from "../../functions/ports/sandbox-provider";

export interface ProviderContractOptions {
  /** Extra create options a provider needs (e.g. repos the local provider can clone). */
  createOpts?: (sessionId: string) => Partial<CreateSandboxOpts>;
  /** Called after each test with the provider (e.g. to stop processes the local provider started). */
  teardown?: (provider: SandboxProvider) => Promise<void>;
}

let counter = 0;
function sessionId(): string {
  counter += 1;
  return `ses_${String(counter).padStart(26, "0")}`;
}

export function describeProviderContract(
  name: string,
  makeProvider: () => SandboxProvider | Promise<SandboxProvider>,
  options: ProviderContractOptions = {},
): void {
  const opts = (id: string): CreateSandboxOpts => ({ sessionId: id, repos: [], envVars: {}, ...options.createOpts?.(id) });

  async function withProvider(fn: (p: SandboxProvider) => Promise<void>): Promise<void> {
    const provider = await makeProvider();
    try {
      await fn(provider);
    } finally {
      await options.teardown?.(provider);
    }
  }

  describe(`SandboxProvider contract: ${name}`, () => {
    it("ensureSandbox is idempotent for a live sandbox: the second call recovers the first sandbox", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const first = await p.ensureSandbox(opts(id));
        const second = await p.ensureSandbox({ ...opts(id), currentSandboxId: first.sandboxId });
        expect(first.recovered).toBe(false);
        expect(second.recovered).toBe(true);
        expect(second.sandboxId).toBe(first.sandboxId);
        expect(second.tunnelUrl).toBe(first.tunnelUrl);
        await p.terminate(id, first.sandboxId);
      }));

    it("terminate is idempotent: terminating twice, or an unknown sandbox, succeeds", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.ensureSandbox(opts(id));
        await p.terminate(id, created.sandboxId);
        await expect(p.terminate(id, created.sandboxId)).resolves.toBeUndefined();
        await expect(p.terminate(sessionId(), "sandbox-that-never-existed")).resolves.toBeUndefined();
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([]);
      }));

    it("checkSandboxes reports only live sandboxes and changes nothing", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.ensureSandbox(opts(id));
        const ids = [created.sandboxId, "sandbox-that-never-existed"];
        expect(await p.checkSandboxes(ids)).toEqual([created.sandboxId]);
        expect(await p.checkSandboxes(ids)).toEqual([created.sandboxId]);
        expect(await p.checkSandboxes([])).toEqual([]);
        const again = await p.ensureSandbox({ ...opts(id), currentSandboxId: created.sandboxId });
        expect(again).toMatchObject({ sandboxId: created.sandboxId, recovered: true });
        await p.terminate(id, created.sandboxId);
      }));

    it("listSandboxes lists a created sandbox with its session id, and no longer after terminate", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.ensureSandbox(opts(id));
        const listed = (await p.listSandboxes()).filter((s) => s.sandboxId === created.sandboxId);
        expect(listed).toHaveLength(1);
        expect(listed[0]).toMatchObject({ sandboxId: created.sandboxId, sessionId: id, state: "running" });
        const startedAt = listed[0]?.startedAt ?? null;
        if (startedAt !== null) expect(Number.isFinite(startedAt)).toBe(true);
        await p.terminate(id, created.sandboxId);
        expect((await p.listSandboxes()).map((s) => s.sandboxId)).not.toContain(created.sandboxId);
      }));

    it("pause behaves as supportsPause says", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.ensureSandbox(opts(id));
        if (p.supportsPause) {
          const paused = await p.pause(id, created.sandboxId);
          expect(paused.snapshotId).toMatch(/\S/);
          expect(await p.checkSandboxes([created.sandboxId])).toEqual([]);
        } else {
          const err = await p.pause(id, created.sandboxId).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(ProviderError);
          expect((err as ProviderError).operation).toBe("pause");
          expect(await p.checkSandboxes([created.sandboxId])).toEqual([created.sandboxId]);
        }
        await p.terminate(id, created.sandboxId);
      }));

    it("memorySnapshot behaves as supportsMemorySnapshot says", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.ensureSandbox(opts(id));
        if (p.supportsMemorySnapshot) {
          const snap = await p.memorySnapshot(id, created.sandboxId);
          expect(snap.snapshotId.startsWith("mem:")).toBe(true);
        } else {
          await expect(p.memorySnapshot(id, created.sandboxId)).rejects.toBeInstanceOf(ProviderError);
        }
        await p.terminate(id, created.sandboxId);
      }));

    it("supportsAutoPause implies supportsPause, and health answers true", () =>
      withProvider(async (p) => {
        if (p.supportsAutoPause) expect(p.supportsPause).toBe(true);
        expect(await p.health()).toBe(true);
      }));
  });
}
