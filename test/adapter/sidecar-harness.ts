/**
 * Shared set-up for the sidecar adapter tests: a temp tree with a workspace (holding a real git
 * repo `app`), an `outside` directory next to it (also a git repo, with a secret, so a traversal
 * that got through would show), a symlink `workspace/escape -> ../outside`, and a sidecar on
 * port 0. Waits are bounded conditions, never fixed sleeps.
 */
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processStartTime } from "../../sandbox/shared/process-group";
import { startSidecar, type Sidecar, type SidecarOptions } from "../../sandbox/sidecar/server";
import { waitFor } from "../support/wait-for";

export const TOKEN = "sidecar-test-token-0123456789";
/** The session the test sidecar runs (access tokens must name it). */
export const SESSION_ID = "ses_sidecar_test";

export interface TestTree {
  root: string;
  workspace: string;
  outside: string;
  stateDir: string;
  cleanup(): Promise<void>;
}

export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", ...args], {
    cwd,
    encoding: "utf8",
  });
}

export async function initRepo(dir: string, files: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "initial");
}

export async function makeTree(): Promise<TestTree> {
  const root = await realpath(await mkdtemp(join(tmpdir(), "sidecar-")));
  const workspace = join(root, "workspace");
  const outside = join(root, "outside");
  await initRepo(join(workspace, "app"), { "README.md": "# app\n", "notes.txt": "one\n" });
  await initRepo(outside, { "secret.txt": "outside-secret\n" });
  await symlink("../outside", join(workspace, "escape"));
  return { root, workspace, outside, stateDir: join(root, ".sidecar"), cleanup: () => rm(root, { recursive: true, force: true }) };
}

export function startTestSidecar(tree: TestTree, overrides: Partial<SidecarOptions> = {}): Promise<Sidecar> {
  return startSidecar({
    port: 0,
    host: "127.0.0.1",
    token: TOKEN,
    sessionId: SESSION_ID,
    workspaceDir: tree.workspace,
    stateDir: tree.stateDir,
    terminalCommand: ["bash", "--noprofile", "--norc"],
    stopServicesOnClose: true,
    stopGraceMs: 2_000,
    log: () => undefined,
    ...overrides,
  });
}

/** fetch against the sidecar with the right token unless told otherwise. */
export async function call(
  sidecar: Sidecar,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string | null; rawBody?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const token = opts.token === undefined ? TOKEN : opts.token;
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const body = opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${sidecar.url}${path}`, { method, headers, body });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** The sidecar tests' shorthand of `waitFor` (../support/wait-for): `probe` until truthy. */
export function waitUntil<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  return waitFor(probe, { message: what, timeoutMs }) as Promise<NonNullable<T>>;
}

/** A live process (a zombie waiting for PID 1 to reap it is not). */
export function processExists(pid: number): boolean {
  return pid > 0 && processStartTime(pid) !== null;
}

/** An SSE client over a real socket that keeps every `data:` line. */
export class SseReader {
  readonly lines: string[] = [];
  /** `event:` names seen (the stream's own events, e.g. `expired`). */
  readonly events: string[] = [];
  /** Set when the server ended the stream (never by `close()`). */
  ended = false;
  private readonly abort = new AbortController();

  static async open(sidecar: Sidecar, path: string, token = TOKEN): Promise<{ status: number; reader: SseReader }> {
    const reader = new SseReader();
    const res = await fetch(`${sidecar.url}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: reader.abort.signal });
    if (res.ok && res.body) void reader.pump(res.body);
    else await res.body?.cancel();
    return { status: res.status, reader };
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of frame.split("\n")) {
            if (line.startsWith("data: ")) this.lines.push(line.slice(6));
            else if (line.startsWith("event: ")) this.events.push(line.slice(7));
          }
        }
      }
      this.ended = true;
    } catch {
      // aborted by close()
    }
  }

  waitFor(text: string): Promise<number> {
    return waitUntil(() => {
      const i = this.lines.findIndex((l) => l.includes(text));
      return i >= 0 ? i + 1 : 0;
    }, `log line "${text}"`);
  }

  close(): void {
    this.abort.abort();
  }
}
