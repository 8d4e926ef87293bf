/**
 * The per-sandbox registry file (`<dataDir>/sandboxes/<id>/sandbox.json`). Providers are
 * stateless, so everything a later call (from any provider instance) needs to find, check or
 * kill a sandbox is written here. No secrets: env vars are never persisted.
 */
import { mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises";
import * as z from "zod";

export const SandboxRecord = z.object({
  sandboxId: z.string(),
  sessionId: z.string(),
  pgid: z.number().int().positive(),
  /** Leader start time from /proc, to tell our leader from a recycled pid (null off Linux). */
  leaderStartTime: z.string().nullable(),
  openCodePort: z.number().int().positive(),
  openCodeUrl: z.string(),
  devModelPort: z.number().int().positive().nullable(),
  /** The sidecar's port when the provider runs one; absent in records written before it existed. */
  sidecarPort: z.number().int().positive().nullable().default(null),
  workspace: z.string(),
  home: z.string(),
  createdAt: z.number(),
  expiresAt: z.number().nullable(),
  restoredFrom: z.string().nullable(),
});
export type SandboxRecord = z.infer<typeof SandboxRecord>;

export function registryPath(dataDir: string, sandboxId: string): string {
  return `${dataDir}/sandboxes/${sandboxId}/sandbox.json`;
}

export async function writeSandboxRecord(dataDir: string, record: SandboxRecord): Promise<void> {
  const path = registryPath(dataDir, record.sandboxId);
  // Write-then-rename so a concurrent reader never sees half a file.
  await writeFile(`${path}.tmp`, JSON.stringify(record, null, 2));
  await rename(`${path}.tmp`, path);
}

/** Null when the sandbox is unknown or its record unreadable (treated as gone). */
export async function readSandboxRecord(dataDir: string, sandboxId: string): Promise<SandboxRecord | null> {
  if (!/^[A-Za-z0-9_-]+$/.test(sandboxId)) return null;
  try {
    const parsed = SandboxRecord.safeParse(JSON.parse(await readFile(registryPath(dataDir, sandboxId), "utf8")));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export async function listSandboxRecords(dataDir: string): Promise<SandboxRecord[]> {
  const dir = `${dataDir}/sandboxes`;
  await mkdir(dir, { recursive: true });
  const ids = await readdir(dir);
  const records = await Promise.all(ids.map((id) => readSandboxRecord(dataDir, id)));
  return records.filter((r): r is SandboxRecord => r !== null);
}
