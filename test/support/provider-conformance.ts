/**
 * The provider conformance suite (issue 22 §6): what every `SandboxProvider` must do, checked
 * through the port only. It runs against the local provider for real (test/adapter), against
 * the E2B and Modal stand-ins that implement those services' documented semantics
 * (test/support/provider-standins, test/unit/providers), and against the real services when
 * their keys are set (`npm run test:providers:live`, test/live).
 *
 * A harness supplies what the port cannot: how the control plane reaches a sandbox's tunnel
 * (`fetch`) and how to make time pass (`expire`, absent live). Snapshots are lost only as they
 * can be on the real service, so every harness (stand-in, local, live) runs the same not-found
 * path: a filesystem snapshot deleted with the provider's `deleteSnapshot`, and for memory
 * snapshots (which Modal cannot delete) a well-formed id that was never issued.
 * It also runs the older contract cases (provider-contract.ts).
 */
import { describe, expect, it } from "vitest";
import { ProviderError } from "../../functions/domain/errors";
import { RESTORE_OPERATIONS } from "../../functions/flows/step-errors";
import type { CreateSandboxOpts, SandboxProvider } from "../../functions/ports/sandbox-provider";
import { agentAuthorization, deriveAgentPassword } from "../../sandbox/shared/access-token";
import { describeProviderContract } from "./provider-contract";

export interface ConformanceHarness {
  name: string;
  make(): SandboxProvider | Promise<SandboxProvider>;
  createOpts?: (sessionId: string) => Partial<CreateSandboxOpts>;
  teardown?: (provider: SandboxProvider) => Promise<void>;
  /** A request to a sandbox's tunnel as the control plane makes it (real `fetch` locally and live). */
  fetch(url: string, headers?: Record<string, string>): Promise<{ status: number }>;
  /**
   * Lets the sandbox reach its provider timeout (the stand-ins move their clock; the local
   * provider waits for a short-lived sandbox). Absent (live): the expiry case is skipped.
   * `make` builds the provider to use for it (the local one needs a short timeout).
   */
  expiry?: { make(): SandboxProvider | Promise<SandboxProvider>; expire(provider: SandboxProvider, sandboxId: string): Promise<void> };
  /** Per-test timeout (real sandboxes boot slowly). */
  timeoutMs?: number;
  /** The provider's clock (the stand-ins have their own); default `Date.now`. */
  now?: () => number;
}

/** The sandbox key every conformance sandbox gets: its OpenCode then requires the derived password. */
export const CONFORMANCE_SANDBOX_KEY = "conformance-sandbox-key-0123456789abcdef";
const AUTH = { authorization: agentAuthorization(deriveAgentPassword(CONFORMANCE_SANDBOX_KEY)) };

/**
 * A well-formed snapshot id that was never issued: `id` with its trailing run of letters and digits
 * (the unique part of a Modal `sn-...` or a stand-in's counter) replaced by zeros of the same length.
 */
export function neverIssued(id: string): string {
  const other = id.replace(/[A-Za-z0-9]+$/, (run) => "0".repeat(run.length));
  if (other === id) throw new Error(`cannot derive a never-issued id from ${id}`);
  return other;
}

let counter = 0;
function sessionId(): string {
  counter += 1;
  return `ses_conf${String(counter).padStart(22, "0")}`;
}

export function describeProviderConformance(harness: ConformanceHarness): void {
  describeProviderContract(harness.name, harness.make, {
    ...(harness.createOpts ? { createOpts: harness.createOpts } : {}),
    ...(harness.teardown ? { teardown: harness.teardown } : {}),
  });

  const opts = (id: string, over: Partial<CreateSandboxOpts> = {}): CreateSandboxOpts => ({
    sessionId: id,
    repos: [],
    ...harness.createOpts?.(id),
    envVars: { SESSION_ID: id, SIDECAR_TOKEN: CONFORMANCE_SANDBOX_KEY },
    ...over,
  });

  async function withProvider(fn: (p: SandboxProvider) => Promise<void>, make = harness.make): Promise<void> {
    const provider = await make();
    try {
      await fn(provider);
    } finally {
      await harness.teardown?.(provider);
    }
  }

  /** OpenCode at `tunnelUrl` takes the session key's password and refuses a request without it. */
  async function expectOpenCodeForKey(tunnelUrl: string): Promise<void> {
    const url = `${tunnelUrl.replace(/\/+$/, "")}/session`;
    expect((await harness.fetch(url, AUTH)).status).toBe(200);
    expect((await harness.fetch(url)).status).toBe(401);
  }

  const t = harness.timeoutMs;

  describe(`provider conformance: ${harness.name}`, () => {
    it("create: OpenCode answers through the tunnel with the session key's password only; the expiry is in the future", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const before = (harness.now ?? Date.now)();
        const created = await p.createSandbox(opts(id));
        expect(created.sandboxId).toMatch(/\S/);
        await expectOpenCodeForKey(created.tunnelUrl);
        if (created.expiresAt !== null) expect(created.expiresAt).toBeGreaterThan(before);
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([created.sandboxId]);
        await p.terminate(id, created.sandboxId);
      }), t);

    it("exec: stdout, stderr and a non-zero exit come back as a result; a relative cwd and a fractional timeout are accepted", (ctx) =>
      withProvider(async (p) => {
        if (!p.execCommand) return ctx.skip("no execCommand");
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        const r = await p.execCommand(created.sandboxId, ["sh", "-c", "echo out; echo err >&2; exit 3"], { cwd: ".", timeoutMs: 10_500 });
        expect(r).toEqual({ stdout: "out\n", stderr: "err\n", exitCode: 3 });
        await p.terminate(id, created.sandboxId);
        await expect(p.execCommand(created.sandboxId, ["true"])).rejects.toBeInstanceOf(ProviderError);
      }), t);

    it("tunnels: a running sandbox resolves to the create's OpenCode URL; an unknown one is a ProviderError", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        const tunnels = await p.resolveTunnels(created.sandboxId);
        expect(tunnels.openCodeUrl).toBe(created.tunnelUrl);
        await expectOpenCodeForKey(tunnels.openCodeUrl);
        await p.terminate(id, created.sandboxId);
        await expect(p.resolveTunnels("sandbox-that-never-existed")).rejects.toBeInstanceOf(ProviderError);
      }), t);

    it("filesystem snapshot: a sandbox restored from it has the files and an OpenCode that takes the key; the source runs on", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        if (p.execCommand) expect((await p.execCommand(created.sandboxId, ["sh", "-c", "echo kept > conformance-marker.txt"], { cwd: "." })).exitCode).toBe(0);
        const snap = await p.snapshot(id, created.sandboxId);
        expect(snap.snapshotId).toMatch(/\S/);
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([created.sandboxId]);
        await p.terminate(id, created.sandboxId);
        const restored = await p.createSandbox(opts(id, { snapshotId: snap.snapshotId }));
        expect(restored.sandboxId).not.toBe(created.sandboxId);
        await expectOpenCodeForKey(restored.tunnelUrl);
        if (p.execCommand) expect((await p.execCommand(restored.sandboxId, ["cat", "conformance-marker.txt"], { cwd: "." })).stdout).toBe("kept\n");
        await p.terminate(id, restored.sandboxId);
      }), t);

    // Without the capability, the contract's "memorySnapshot behaves as supportsMemorySnapshot says" checks the refusal.
    it("memory snapshot (by capability): restored with its processes, which take the same key", (ctx) =>
      withProvider(async (p) => {
        if (!p.supportsMemorySnapshot) return ctx.skip("no memory snapshots");
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        const snap = await p.memorySnapshot(id, created.sandboxId);
        expect(p.keepsProcesses?.(snap.snapshotId)).toBe(true);
        await p.terminate(id, created.sandboxId);
        const restored = await p.createSandbox(opts(id, { snapshotId: snap.snapshotId }));
        await expectOpenCodeForKey(restored.tunnelUrl);
        await p.terminate(id, restored.sandboxId);
      }), t);

    // Without the capability, the contract's "pause behaves as supportsPause says" checks the refusal.
    it("pause (by capability): a paused sandbox is not alive, is listed paused, and resumes as itself with its files", (ctx) =>
      withProvider(async (p) => {
        if (!p.supportsPause) return ctx.skip("no native pause");
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        if (p.execCommand) await p.execCommand(created.sandboxId, ["sh", "-c", "echo paused > conformance-marker.txt"], { cwd: "." });
        const paused = await p.pause(id, created.sandboxId);
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([]);
        expect((await p.listSandboxes()).find((s) => s.sandboxId === created.sandboxId)?.state).toBe("paused");
        // Neither resolving its tunnels nor an exec wakes it.
        await expect(p.resolveTunnels(created.sandboxId)).rejects.toBeInstanceOf(ProviderError);
        if (p.execCommand) await expect(p.execCommand(created.sandboxId, ["true"])).rejects.toBeInstanceOf(ProviderError);
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([]);
        expect(p.keepsProcesses?.(paused.snapshotId)).toBe(true);
        const resumed = await p.createSandbox(opts(id, { snapshotId: paused.snapshotId }));
        expect(resumed.sandboxId).toBe(created.sandboxId);
        await expectOpenCodeForKey(resumed.tunnelUrl);
        if (p.execCommand) expect((await p.execCommand(resumed.sandboxId, ["cat", "conformance-marker.txt"], { cwd: "." })).stdout).toBe("paused\n");
        await p.terminate(id, resumed.sandboxId);
      }), t);

    it("not found: a restore from a snapshot that is gone fails, not retryable, as a restore failure when the snapshot kept processes", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        const filesystem = await p.snapshot(id, created.sandboxId);
        const gone: string[] = [filesystem.snapshotId];
        if (p.supportsMemorySnapshot) {
          const memory = await p.memorySnapshot(id, created.sandboxId);
          // Deleting a memory snapshot succeeds even where the service has no such call (Modal: a no-op,
          // so the id stays restorable). The gone one is the same id with its unique part replaced.
          await expect(p.deleteSnapshot(memory.snapshotId)).resolves.toBeUndefined();
          gone.push(neverIssued(memory.snapshotId));
        }
        await p.terminate(id, created.sandboxId);
        await p.deleteSnapshot(filesystem.snapshotId);
        for (const snapshotId of gone) {
          const err = await p.createSandbox(opts(id, { snapshotId })).catch((e: unknown) => e);
          expect(err, snapshotId).toBeInstanceOf(ProviderError);
          expect((err as ProviderError).retryable, snapshotId).toBe(false);
          // A restore failure clears the session's snapshot (step-errors.ts); a boot failure would not.
          if (p.keepsProcesses?.(snapshotId)) expect(RESTORE_OPERATIONS, snapshotId).toContain((err as ProviderError).operation);
        }
        if (p.supportsPause) {
          // A paused sandbox that is gone: its resume is a restore failure too.
          const other = await p.createSandbox(opts(id));
          const paused = await p.pause(id, other.sandboxId);
          await p.terminate(id, other.sandboxId);
          const err = (await p.createSandbox(opts(id, { snapshotId: paused.snapshotId })).catch((e: unknown) => e)) as ProviderError;
          expect(err).toBeInstanceOf(ProviderError);
          expect(err.retryable).toBe(false);
          expect(RESTORE_OPERATIONS).toContain(err.operation);
        }
      }), t);

    it("terminate ends the sandbox: its OpenCode stops answering and it is neither alive nor listed", () =>
      withProvider(async (p) => {
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        await p.terminate(id, created.sandboxId);
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([]);
        expect((await p.listSandboxes()).map((s) => s.sandboxId)).not.toContain(created.sandboxId);
        const answered = await harness.fetch(`${created.tunnelUrl.replace(/\/+$/, "")}/session`, AUTH).then((r) => r.status, () => null);
        expect(answered === null || answered >= 500).toBe(true);
      }), t);

    it("deleteSnapshot: a deleted snapshot cannot be restored, and deleting it again succeeds (already gone is success)", () =>
      withProvider(async (p) => {
        const del = p.deleteSnapshot;
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        const snap = await p.snapshot(id, created.sandboxId);
        await p.terminate(id, created.sandboxId);
        await del.call(p, snap.snapshotId);
        await expect(p.createSandbox(opts(id, { snapshotId: snap.snapshotId }))).rejects.toMatchObject({ retryable: false });
        await expect(del.call(p, snap.snapshotId)).resolves.toBeUndefined();
      }), t);

    const expiry = harness.expiry;
    it.skipIf(!expiry)("expiry: at its timeout the sandbox pauses (supportsAutoPause) and resumes as itself, or is gone", () =>
      withProvider(async (p) => {
        if (!expiry) return;
        const id = sessionId();
        const created = await p.createSandbox(opts(id));
        await expiry.expire(p, created.sandboxId);
        expect(await p.checkSandboxes([created.sandboxId])).toEqual([]);
        const listed = (await p.listSandboxes()).find((s) => s.sandboxId === created.sandboxId);
        if (p.supportsAutoPause) {
          expect(listed?.state).toBe("paused");
          const resumed = await p.createSandbox(opts(id, { snapshotId: created.sandboxId }));
          expect(resumed.sandboxId).toBe(created.sandboxId);
          await expectOpenCodeForKey(resumed.tunnelUrl);
          // Resumed for the provider's whole timeout, not a default.
          if (resumed.expiresAt !== null && created.expiresAt !== null) expect(resumed.expiresAt).toBeGreaterThan(created.expiresAt);
        } else {
          expect(listed).toBeUndefined();
        }
        await p.terminate(id, created.sandboxId);
      }, expiry?.make), t);
  });
}
