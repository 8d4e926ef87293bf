/**
 * The provider conformance suite (test/support/provider-conformance.ts, which includes the older
 * contract cases of test/support/provider-contract.ts) against the local provider for real:
 * real OpenCode process groups, real ports, real fetches, a real short-lived sandbox for the
 * expiry case. Every sandbox left by a failing test is terminated in teardown, and the data dir
 * is removed.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { listSandboxRecords } from "../../functions/providers/local/sandbox-registry";
import type { SandboxProvider } from "../../functions/ports/sandbox-provider";
import { describeProviderConformance } from "../support/provider-conformance";
import { waitFor } from "../support/wait-for";

let dataDir = "";

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "local-contract-"));
});
afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** Long enough for OpenCode to start, short enough to wait out. */
const SHORT_TIMEOUT_SECONDS = 30;

describeProviderConformance({
  name: "local (real OpenCode)",
  make: () => new LocalSandboxProvider({ dataDir, readyTimeoutMs: 90_000 }),
  teardown: async (provider) => {
    for (const record of await listSandboxRecords(dataDir)) await provider.terminate(record.sessionId, record.sandboxId);
  },
  fetch: async (url, headers) => {
    const res = await fetch(url, { ...(headers ? { headers } : {}), signal: AbortSignal.timeout(10_000) });
    await res.body?.cancel();
    return { status: res.status };
  },
  expiry: {
    make: () => new LocalSandboxProvider({ dataDir, readyTimeoutMs: 90_000, sandboxTimeoutSeconds: SHORT_TIMEOUT_SECONDS }),
    // The local sandbox ends itself at its timeout (its boot SIGTERMs its own group).
    expire: async (provider: SandboxProvider, sandboxId: string) => {
      await waitFor(() => provider.checkSandboxes([sandboxId]), { until: (alive) => alive.length === 0, timeoutMs: 60_000, intervalMs: 250, message: "the short-lived local sandbox to expire" });
    },
  },
  timeoutMs: 180_000,
});
