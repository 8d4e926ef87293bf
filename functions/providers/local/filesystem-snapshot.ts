/**
 * Filesystem snapshots of a local sandbox: `workspace/` + `home/` (the agent's state) copied to
 * `<dataDir>/snapshots/<snapshotId>/`, taken while OpenCode keeps running.
 *
 * OpenCode keeps its history in SQLite in WAL mode; a plain copy of db + wal can tear if a
 * checkpoint lands between the two reads. With the `sqlite3` CLI present the database is copied
 * with SQLite's online backup (consistent by construction); without it, db + wal are copied
 * together and the copy is retried until neither file changed while copying.
 */
import { copyFile, cp, mkdir, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { openCodeDbPath } from "./opencode-launch";
import { run } from "./host-commands";

/** Live-process artefacts that must not travel: run locks with heartbeats, the shared-memory index. */
function keep(src: string): boolean {
  const name = basename(src);
  if (name === "locks" && src.includes("/.local/state/opencode/")) return false;
  if (/^opencode\.db(-wal|-shm|-journal)?$/.test(name)) return false;
  return true;
}

async function fingerprint(path: string): Promise<string> {
  try {
    const s = await stat(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return "absent";
  }
}

async function sqliteBackup(src: string, dest: string): Promise<boolean> {
  try {
    const result = await run("sqlite3", [src, `.backup '${dest.replace(/'/g, "''")}'`], { timeoutMs: 30_000 });
    return result.exitCode === 0;
  } catch {
    return false; // no sqlite3 CLI: the copy below (a restore then fails loudly in repointSessions)
  }
}

async function copyDatabase(srcDb: string, destDb: string): Promise<void> {
  if ((await fingerprint(srcDb)) === "absent") return;
  await mkdir(dirname(destDb), { recursive: true });
  if (await sqliteBackup(srcDb, destDb)) return;
  for (let attempt = 0; attempt < 5; attempt++) {
    const before = `${await fingerprint(srcDb)}|${await fingerprint(`${srcDb}-wal`)}`;
    await copyFile(srcDb, destDb);
    await copyFile(`${srcDb}-wal`, `${destDb}-wal`).catch(() => undefined);
    const after = `${await fingerprint(srcDb)}|${await fingerprint(`${srcDb}-wal`)}`;
    if (before === after) return;
  }
  throw new Error("OpenCode database kept changing while it was copied");
}

/** Copies a sandbox's agent state (`workspace/`, `home/`) from one root to another. */
export async function copyAgentState(src: { workspace: string; home: string }, dest: { workspace: string; home: string }): Promise<void> {
  await mkdir(dirname(dest.workspace), { recursive: true });
  await cp(src.workspace, dest.workspace, { recursive: true, filter: keep, verbatimSymlinks: true });
  await cp(src.home, dest.home, { recursive: true, filter: keep, verbatimSymlinks: true });
  await copyDatabase(openCodeDbPath(src.home), openCodeDbPath(dest.home));
}

export async function writeSnapshotMeta(root: string, meta: Record<string, unknown>): Promise<void> {
  await writeFile(`${root}/snapshot.json`, JSON.stringify(meta, null, 2));
}

function sqlString(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/**
 * OpenCode records each session's absolute directory and runs tools there; a restored sandbox
 * has a new root, so sessions are repointed at the new workspace with the `sqlite3` CLI (a
 * prerequisite, checked by `npm start`/`npm test`). Throws when it cannot: a restored session
 * left pointing at the deleted workspace would run its tools there.
 */
export async function repointSessions(home: string, fromWorkspace: string, toWorkspace: string): Promise<void> {
  if (fromWorkspace === toWorkspace) return;
  const db = openCodeDbPath(home);
  if ((await fingerprint(db)) === "absent") return;
  const from = sqlString(fromWorkspace);
  const sql = `UPDATE session SET directory = ${sqlString(toWorkspace)} || substr(directory, length(${from}) + 1) WHERE directory = ${from} OR directory LIKE ${sqlString(`${fromWorkspace}/%`)};`;
  let result: Awaited<ReturnType<typeof run>>;
  try {
    result = await run("sqlite3", [db, sql], { timeoutMs: 30_000 });
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === "ENOENT";
    throw new Error(
      missing
        ? "the sqlite3 CLI is not installed: it is needed to repoint restored OpenCode sessions at their new workspace (install sqlite3; see README Prerequisites)"
        : `sqlite3 could not be run to repoint restored OpenCode sessions: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  if (result.exitCode !== 0) {
    throw new Error(`sqlite3 failed to repoint restored OpenCode sessions at their new workspace (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`);
  }
}

export async function removeDir(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true, maxRetries: 3 });
}
