/**
 * `deleteSnapshot` on the local provider, for real (issue 22 §4): a real sandbox (OpenCode, the
 * development model) is snapshotted, the snapshot deleted from disk, and a restore from it then
 * fails; deletes are idempotent and never reach outside `<dataDir>/snapshots/`.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandboxProvider } from "../../functions/providers/local";

const TIMEOUT = 120_000;
let dataDir: string;
let provider: LocalSandboxProvider;
const started: string[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "local-snapshot-delete-"));
  provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000, sidecar: false });
});

afterAll(async () => {
  for (const id of started) await provider.terminate("ses_del", id).catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
}, TIMEOUT);

describe("local provider deleteSnapshot", () => {
  it(
    "removes the snapshot from disk (a restore from it then fails); a second delete is success",
    async () => {
      const sandbox = await provider.createSandbox({ sessionId: "ses_del", repos: [], envVars: {} });
      started.push(sandbox.sandboxId);
      const { snapshotId } = await provider.snapshot("ses_del", sandbox.sandboxId);
      const kept = await provider.snapshot("ses_del", sandbox.sandboxId);
      await provider.terminate("ses_del", sandbox.sandboxId);
      expect(existsSync(join(dataDir, "snapshots", snapshotId, "home"))).toBe(true);

      await provider.deleteSnapshot(snapshotId);
      expect(existsSync(join(dataDir, "snapshots", snapshotId))).toBe(false);
      await expect(provider.deleteSnapshot(snapshotId)).resolves.toBeUndefined();
      await expect(provider.createSandbox({ sessionId: "ses_del", repos: [], envVars: {}, snapshotId })).rejects.toMatchObject({
        name: "ProviderError",
        message: expect.stringContaining(`unknown snapshot ${snapshotId}`),
      });
      // The other snapshot of the same sandbox is untouched and still restores.
      expect(existsSync(join(dataDir, "snapshots", kept.snapshotId, "snapshot.json"))).toBe(true);
      const restored = await provider.createSandbox({ sessionId: "ses_del", repos: [], envVars: {}, snapshotId: kept.snapshotId });
      started.push(restored.sandboxId);
      expect(restored.sandboxId).not.toBe(sandbox.sandboxId);
    },
    TIMEOUT,
  );

  it("ids it never minted name nothing of its own: no path outside snapshots/ is touched", async () => {
    const outside = join(dataDir, "precious");
    await mkdir(outside, { recursive: true });
    await writeFile(join(outside, "file"), "keep");
    await mkdir(join(dataDir, "snapshots"), { recursive: true });
    for (const id of ["../precious", "mem:abc", "", "lsnap_../../precious"]) await provider.deleteSnapshot(id);
    expect(existsSync(join(outside, "file"))).toBe(true);
  });
});
