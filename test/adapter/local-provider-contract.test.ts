/**
 * The provider contract suite (test/support/provider-contract.ts) against the local provider for
 * real: real OpenCode process groups, real ports. Every sandbox left by a failing test is
 * terminated in teardown, and the data dir is removed.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { listSandboxRecords } from "../../functions/providers/local/sandbox-registry";
import { describeProviderContract } from "../support/provider-contract";

let dataDir = "";

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "local-contract-"));
});
afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describeProviderContract("local (real OpenCode)", () => new LocalSandboxProvider({ dataDir, readyTimeoutMs: 90_000 }), {
  teardown: async (provider) => {
    for (const record of await listSandboxRecords(dataDir)) await provider.terminate(record.sessionId, record.sandboxId);
  },
});
