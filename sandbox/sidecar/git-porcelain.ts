/**
 * Pure parsing of `git status --porcelain=v2 --branch -z` (seed 003 §6.8 "Git status (porcelain
 * v2)") into the JSON the API returns. `-z` keeps paths with spaces or newlines intact; a rename
 * entry is followed by its original path as a separate NUL-terminated field.
 */

export interface GitBranchInfo {
  oid: string | null;
  head: string | null;
  upstream: string | null;
  ahead: number | null;
  behind: number | null;
}

export interface GitFileStatus {
  path: string;
  kind: "changed" | "renamed" | "unmerged" | "untracked" | "ignored";
  /** Staged status letter ("." when unchanged); "?" / "!" for untracked / ignored. */
  index: string;
  worktree: string;
  origPath?: string;
}

export interface GitStatus {
  branch: GitBranchInfo;
  files: GitFileStatus[];
}

/** The path after `count` space-separated fields (the path itself may contain spaces). */
function fieldsThenPath(record: string, count: number): { fields: string[]; path: string } {
  const fields: string[] = [];
  let rest = record;
  for (let i = 0; i < count; i++) {
    const space = rest.indexOf(" ");
    if (space < 0) throw new Error(`malformed porcelain v2 record: ${record}`);
    fields.push(rest.slice(0, space));
    rest = rest.slice(space + 1);
  }
  return { fields, path: rest };
}

export function parsePorcelainV2(output: string): GitStatus {
  const branch: GitBranchInfo = { oid: null, head: null, upstream: null, ahead: null, behind: null };
  const files: GitFileStatus[] = [];
  const records = output.split("\0");
  for (let i = 0; i < records.length; i++) {
    const record = records[i] ?? "";
    if (record === "") continue;
    if (record.startsWith("# ")) {
      const [key = "", ...rest] = record.slice(2).split(" ");
      const value = rest.join(" ");
      if (key === "branch.oid") branch.oid = value === "(initial)" ? null : value;
      else if (key === "branch.head") branch.head = value === "(detached)" ? null : value;
      else if (key === "branch.upstream") branch.upstream = value;
      else if (key === "branch.ab") {
        const m = /^\+(\d+) -(\d+)$/.exec(value);
        if (m) {
          branch.ahead = Number(m[1]);
          branch.behind = Number(m[2]);
        }
      }
      continue;
    }
    const type = record[0];
    if (type === "1") {
      const { fields, path } = fieldsThenPath(record, 8);
      const xy = fields[1] ?? "..";
      files.push({ path, kind: "changed", index: xy[0] ?? ".", worktree: xy[1] ?? "." });
    } else if (type === "2") {
      const { fields, path } = fieldsThenPath(record, 9);
      const xy = fields[1] ?? "..";
      const origPath = records[++i] ?? "";
      files.push({ path, kind: "renamed", index: xy[0] ?? ".", worktree: xy[1] ?? ".", origPath });
    } else if (type === "u") {
      const { fields, path } = fieldsThenPath(record, 10);
      const xy = fields[1] ?? "..";
      files.push({ path, kind: "unmerged", index: xy[0] ?? ".", worktree: xy[1] ?? "." });
    } else if (type === "?") {
      files.push({ path: record.slice(2), kind: "untracked", index: "?", worktree: "?" });
    } else if (type === "!") {
      files.push({ path: record.slice(2), kind: "ignored", index: "!", worktree: "!" });
    } else {
      throw new Error(`unknown porcelain v2 record type: ${record}`);
    }
  }
  return { branch, files };
}

/**
 * The first `maxBytes` of `buf`, cut back to a UTF-8 character boundary so the text never ends
 * in half a character.
 */
export function capUtf8(buf: Buffer, maxBytes: number): Buffer {
  if (buf.length <= maxBytes) return buf;
  let end = maxBytes;
  // Continuation bytes are 10xxxxxx: step back to the start of the character the cut splits.
  while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--;
  return buf.subarray(0, end);
}
