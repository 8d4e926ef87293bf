/**
 * `npm run test:providers:live`: the provider conformance suite (test/support/provider-conformance.ts)
 * against the real Modal and E2B services, so the first person with a key can check a deployment's
 * provider settings in one command. Each provider runs only when `PROVIDERS_LIVE=1` (the npm
 * script sets it) and its settings are in the environment; otherwise its case is skipped with the
 * reason printed. `npm test` runs this project too and so skips it cleanly: it never calls a
 * paid service unless asked.
 *
 *   E2B:   E2B_API_KEY, E2B_TEMPLATE (the template built from sandbox/image)
 *   Modal: MODAL_TOKEN_ID, MODAL_TOKEN_SECRET, MODAL_BASE_IMAGE or MODAL_BASE_SNAPSHOT_ID
 *          (optional: MODAL_APP_NAME, MODAL_SANDBOX_BACKEND)
 *
 * Not run live: the expiry case (it would wait out a real timeout). The not-found case restores
 * from snapshots that are really gone, as on the stand-ins: a filesystem snapshot deleted with the
 * provider's own `deleteSnapshot`, and for a Modal memory snapshot (which the SDK cannot delete) a
 * well-formed id that was never issued.
 *
 * Modal also gets a measurement (issue 22 §3): one sandbox's memory snapshot and filesystem
 * snapshot, timed and printed, the figures behind taking a durable filesystem snapshot at every
 * pause (README, "Paused sessions never expire").
 */
import { describe, expect, it } from "vitest";
import type { ProviderType } from "../../functions/domain/session";
import type { SandboxProvider } from "../../functions/ports/sandbox-provider";
import { createSandboxProvider } from "../../functions/providers/provider-factory";
import { CONFORMANCE_SANDBOX_KEY, describeProviderConformance } from "../support/provider-conformance";

const env = process.env;
const LIVE = env.PROVIDERS_LIVE === "1";

const REQUIRED: Record<Exclude<ProviderType, "local">, { all: string[]; oneOf?: string[] }> = {
  e2b: { all: ["E2B_API_KEY", "E2B_TEMPLATE"] },
  modal: { all: ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"], oneOf: ["MODAL_BASE_IMAGE", "MODAL_BASE_SNAPSHOT_ID"] },
};

function skipReason(type: Exclude<ProviderType, "local">): string | null {
  if (!LIVE) return "not asked: run `npm run test:providers:live`";
  const { all, oneOf } = REQUIRED[type];
  const missing = all.filter((name) => !env[name]);
  if (oneOf && !oneOf.some((name) => env[name])) missing.push(oneOf.join(" or "));
  return missing.length > 0 ? `${missing.join(", ")} not set` : null;
}

/** Sandboxes the suite's sessions left behind (a failed case) are terminated after each case. */
async function terminateConformanceSandboxes(provider: SandboxProvider): Promise<void> {
  for (const s of await provider.listSandboxes()) {
    if (s.sessionId?.startsWith("ses_conf")) await provider.terminate(s.sessionId, s.sandboxId);
  }
}

for (const type of ["e2b", "modal"] as const) {
  const reason = skipReason(type);
  if (reason) {
    // Printed in the run's output, and named in the skipped case.
    process.stderr.write(`[providers:live] ${type}: skipped (${reason})\n`);
    describe(`provider conformance: ${type} (live)`, () => {
      it.skip(`skipped: ${reason}`, () => undefined);
    });
    continue;
  }
  describeProviderConformance({
    name: `${type} (live)`,
    make: () => createSandboxProvider(type, { sandboxTimeoutSeconds: 900, env: { ...env } }),
    teardown: terminateConformanceSandboxes,
    fetch: async (url, headers) => {
      const res = await fetch(url, { ...(headers ? { headers } : {}), signal: AbortSignal.timeout(30_000) });
      await res.body?.cancel();
      return { status: res.status };
    },
    timeoutMs: 900_000,
  });
  if (type === "modal") describeModalSnapshotTiming();
}

/** Times both snapshot kinds on one running sandbox and prints the durations (not asserted: a figure, not a test of speed). */
function describeModalSnapshotTiming(): void {
  describe("modal (live): memory vs filesystem snapshot, measured", () => {
    it("takes both snapshots of one sandbox and prints how long each took", async () => {
      const provider = await createSandboxProvider("modal", { sandboxTimeoutSeconds: 900, env: { ...env } });
      const sessionId = `ses_conftiming${"0".repeat(16)}`;
      try {
        const created = await provider.createSandbox({ sessionId, repos: [], envVars: { SESSION_ID: sessionId, SIDECAR_TOKEN: CONFORMANCE_SANDBOX_KEY } });
        const timed = async (take: () => Promise<{ snapshotId: string }>): Promise<{ snapshotId: string; ms: number }> => {
          const started = performance.now();
          const { snapshotId } = await take();
          return { snapshotId, ms: Math.round(performance.now() - started) };
        };
        const memory = await timed(() => provider.memorySnapshot(sessionId, created.sandboxId));
        const filesystem = await timed(() => provider.snapshot(sessionId, created.sandboxId));
        process.stderr.write(`[providers:live] modal: memory snapshot ${memory.ms} ms, filesystem snapshot ${filesystem.ms} ms (same sandbox, memory first)\n`);
        expect(provider.keepsProcesses?.(memory.snapshotId)).toBe(true);
        expect(provider.keepsProcesses?.(filesystem.snapshotId)).toBe(false);
        await provider.deleteSnapshot(filesystem.snapshotId);
      } finally {
        await terminateConformanceSandboxes(provider);
      }
    }, 900_000);
  });
}
