/**
 * The local provider against real OpenCode and the development model: real processes, real
 * sockets, real SSE. Every sandbox a test starts is terminated in afterAll even on failure.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitOrigin } from "../support/git-origin";
import { waitFor } from "../support/wait-for";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { openCodeDbPath } from "../../functions/providers/local/opencode-launch";

const TIMEOUT = 120_000;

interface OpenCodeEvent {
  type: string;
  properties: Record<string, unknown> & { sessionID?: string };
}
interface Received {
  at: number;
  event: OpenCodeEvent;
}

/** Reads OpenCode's `/event` SSE stream into a list the test can wait on. */
class EventStream {
  readonly received: Received[] = [];
  private readonly abort = new AbortController();

  static async open(baseUrl: string): Promise<EventStream> {
    const stream = new EventStream();
    const res = await fetch(`${baseUrl}/event`, { signal: stream.abort.signal, headers: { accept: "text/event-stream" } });
    if (!res.body) throw new Error("no SSE body");
    void stream.pump(res.body);
    await stream.waitFor((e) => e.type === "server.connected", 10_000);
    return stream;
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
          const data = frame
            .split("\n")
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trimStart())
            .join("\n");
          if (data) this.received.push({ at: Date.now(), event: JSON.parse(data) as OpenCodeEvent });
        }
      }
    } catch {
      // aborted on close
    }
  }

  /** Bounded wait for an event matching `predicate`; fails with the event types seen so far. */
  waitFor(predicate: (e: OpenCodeEvent) => boolean, timeoutMs: number): Promise<Received> {
    return waitFor(() => this.received.find((r) => predicate(r.event)), {
      timeoutMs,
      message: () => `a matching event; saw ${this.received.map((r) => r.event.type).join(", ")}`,
    });
  }

  close(): void {
    this.abort.abort();
  }
}

async function json<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, { ...init, headers: { "content-type": "application/json", ...init?.headers } });
  if (!res.ok) throw new Error(`${init?.method ?? "GET"} ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function createSession(baseUrl: string): Promise<string> {
  return (await json<{ id: string }>(`${baseUrl}/session`, { method: "POST", body: "{}" })).id;
}

async function promptAsync(baseUrl: string, sessionId: string, text: string): Promise<void> {
  const res = await fetch(`${baseUrl}/session/${sessionId}/prompt_async`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ parts: [{ type: "text", text }] }),
  });
  expect(res.status).toBe(204);
}

const forSession = (sessionId: string, type: string) => (e: OpenCodeEvent) => e.type === type && e.properties.sessionID === sessionId;

function pgidOf(dataDir: string, sandboxId: string): number {
  return (JSON.parse(readFileSync(join(dataDir, "sandboxes", sandboxId, "sandbox.json"), "utf8")) as { pgid: number }).pgid;
}

function groupGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

let dataDir: string;
let provider: LocalSandboxProvider;
const started: { sessionId: string; sandboxId: string }[] = [];
const streams: EventStream[] = [];

async function create(sessionId: string, extra: Partial<Parameters<LocalSandboxProvider["createSandbox"]>[0]> = {}) {
  const result = await provider.createSandbox({ sessionId, repos: [], envVars: {}, ...extra });
  started.push({ sessionId, sandboxId: result.sandboxId });
  return result;
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "local-provider-"));
  provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
});

afterAll(async () => {
  for (const s of streams) s.close();
  const cleanup = new LocalSandboxProvider({ dataDir });
  for (const s of started) await cleanup.terminate(s.sessionId, s.sandboxId).catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
}, TIMEOUT);

describe("local provider with real OpenCode", () => {
  it("is healthy and advertises no pause or memory snapshots", async () => {
    expect(await provider.health()).toBe(true);
    await expect(new LocalSandboxProvider({ dataDir, opencodeBin: join(dataDir, "missing-bin") }).health()).resolves.toBe(false);
    expect(provider.supportsPause).toBe(false);
    await expect(provider.pause("ses_a", "lsb_x")).rejects.toMatchObject({ name: "ProviderError", operation: "pause" });
    await expect(provider.memorySnapshot("ses_a", "lsb_x")).rejects.toMatchObject({ name: "ProviderError" });
  });

  it(
    "streams an echo turn, snapshots, terminates the whole group, and restores the conversation",
    async () => {
      const before = Date.now();
      const sandbox = await create("ses_echo");
      expect(sandbox.tunnelUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(sandbox.previewUrl).toBeNull();
      expect(sandbox.expiresAt).toBeGreaterThanOrEqual(before + 3_600_000);

      const events = await EventStream.open(sandbox.tunnelUrl);
      streams.push(events);
      const ocSession = await createSession(sandbox.tunnelUrl);
      await promptAsync(sandbox.tunnelUrl, ocSession, "hello sandbox");

      const idle = await events.waitFor(forSession(ocSession, "session.idle"), 60_000);
      const mine = events.received.filter((r) => r.event.properties.sessionID === ocSession);
      const deltas = mine.filter((r) => r.event.type === "message.part.delta").map((r) => String(r.event.properties.delta));
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.join("")).toContain("echo: hello sandbox");
      const idleStatus = mine.find((r) => r.event.type === "session.status" && (r.event.properties.status as { type: string }).type === "idle");
      expect(idleStatus).toBeDefined();
      expect(mine.indexOf(idleStatus as Received)).toBeLessThan(mine.indexOf(idle));
      events.close();

      const { snapshotId } = await provider.snapshot("ses_echo", sandbox.sandboxId);
      expect(existsSync(join(dataDir, "snapshots", snapshotId, "home"))).toBe(true);

      const pgid = pgidOf(dataDir, sandbox.sandboxId);
      expect(groupGone(pgid)).toBe(false);
      await provider.terminate("ses_echo", sandbox.sandboxId);
      expect(groupGone(pgid)).toBe(true);
      expect(existsSync(join(dataDir, "sandboxes", sandbox.sandboxId))).toBe(false);
      expect(existsSync(join(dataDir, "snapshots", snapshotId))).toBe(true);

      const restored = await create("ses_echo", { snapshotId });
      expect(restored.sandboxId).not.toBe(sandbox.sandboxId);
      const messages = await json<{ info: { role: string }; parts: { type: string; text?: string }[] }[]>(
        `${restored.tunnelUrl}/session/${ocSession}/message`,
      );
      const transcript = messages.map((m) => `${m.info.role}: ${m.parts.map((p) => p.text ?? "").join("")}`);
      expect(transcript).toEqual(["user: hello sandbox", "assistant: echo: hello sandbox"]);

      // Tools of the restored session must run in the new workspace, not the deleted one (sqlite3 is a prerequisite).
      const info = await json<{ directory: string }>(`${restored.tunnelUrl}/session/${ocSession}`);
      expect(info.directory).toBe(join(dataDir, "sandboxes", restored.sandboxId, "workspace"));
    },
    TIMEOUT,
  );

  it(
    "runs the dev model's `sleep 2s` as a real bash tool call that keeps the agent busy",
    async () => {
      const sandbox = await create("ses_sleep");
      const events = await EventStream.open(sandbox.tunnelUrl);
      streams.push(events);
      const ocSession = await createSession(sandbox.tunnelUrl);
      await promptAsync(sandbox.tunnelUrl, ocSession, "please sleep 2s");
      const idle = await events.waitFor(forSession(ocSession, "session.idle"), 60_000);

      const mine = events.received.filter((r) => r.event.properties.sessionID === ocSession);
      type ToolPart = { type: string; tool: string; state: { status: string; input: { command?: string }; time?: { start: number; end?: number } } };
      const toolStates = mine
        .filter((r) => r.event.type === "message.part.updated")
        .map((r) => r.event.properties.part as ToolPart)
        .filter((p) => p.type === "tool" && p.tool === "bash");
      const statuses = toolStates.map((p) => p.state.status);
      expect(statuses).toContain("running");
      expect(statuses.at(-1)).toBe("completed");
      const completed = toolStates.at(-1);
      expect(completed?.state.input.command).toBe("sleep 2");
      const toolTime = completed?.state.time;
      expect((toolTime?.end ?? 0) - (toolTime?.start ?? 0)).toBeGreaterThanOrEqual(1_500);

      const busy = mine.find((r) => r.event.type === "session.status" && (r.event.properties.status as { type: string }).type === "busy");
      expect(busy).toBeDefined();
      expect(idle.at - (busy?.at ?? idle.at)).toBeGreaterThanOrEqual(1_500);
      const text = mine.filter((r) => r.event.type === "message.part.delta").map((r) => String(r.event.properties.delta)).join("");
      expect(text).toContain("echo: please sleep 2s");
    },
    TIMEOUT,
  );

  it(
    "clones a local file:// repository at the requested branch; liveness, recovery and terminate are stateless and idempotent",
    async () => {
      const { dir: origin, git } = gitOrigin("local-provider-origin-");
      try {
        git("checkout", "--quiet", "-b", "feature");
        execFileSync("sh", ["-c", "echo feature-content > marker.txt"], { cwd: origin });
        git("add", "marker.txt");
        git("commit", "--quiet", "-m", "feature");
        git("checkout", "--quiet", "main");

        const sandbox = await create("ses_repo", { repos: [{ url: `file://${origin}`, branch: "feature" }] });
        const name = origin.split("/").pop() ?? "";
        const head = await provider.execCommand(sandbox.sandboxId, ["git", "rev-parse", "--abbrev-ref", "HEAD"], { cwd: name });
        expect(head).toMatchObject({ exitCode: 0, stdout: "feature\n" });
        const marker = await provider.execCommand(sandbox.sandboxId, ["cat", `${name}/marker.txt`]);
        expect(marker.stdout).toBe("feature-content\n");

        // A fresh instance sees the same sandboxes: providers are stateless.
        const other = new LocalSandboxProvider({ dataDir });
        expect(await other.checkSandboxes([sandbox.sandboxId, "lsb_unknown"])).toEqual([sandbox.sandboxId]);
        expect(await other.resolveTunnels(sandbox.sandboxId)).toMatchObject({ openCodeUrl: sandbox.tunnelUrl, previewUrl: null });
        const ensured = await other.ensureSandbox({ sessionId: "ses_repo", repos: [], envVars: {}, currentSandboxId: sandbox.sandboxId });
        expect(ensured).toMatchObject({ sandboxId: sandbox.sandboxId, recovered: true, tunnelUrl: sandbox.tunnelUrl });

        const pgid = pgidOf(dataDir, sandbox.sandboxId);
        await other.terminate("ses_repo", sandbox.sandboxId);
        expect(groupGone(pgid)).toBe(true);
        await expect(other.terminate("ses_repo", sandbox.sandboxId)).resolves.toBeUndefined();
        await expect(other.terminate("ses_repo", "lsb_never_existed")).resolves.toBeUndefined();
        expect(await other.checkSandboxes([sandbox.sandboxId])).toEqual([]);
        await expect(other.resolveTunnels(sandbox.sandboxId)).rejects.toMatchObject({ name: "ProviderError" });
      } finally {
        await rm(origin, { recursive: true, force: true });
      }
    },
    TIMEOUT,
  );

  it(
    "enforces the sandbox timeout from inside the group: the whole group exits at expiry",
    async () => {
      const short = new LocalSandboxProvider({ dataDir, sandboxTimeoutSeconds: 15 });
      const before = Date.now();
      const sandbox = await short.createSandbox({ sessionId: "ses_expiry", repos: [], envVars: {} });
      started.push({ sessionId: "ses_expiry", sandboxId: sandbox.sandboxId });
      expect(sandbox.expiresAt).toBeGreaterThanOrEqual(before + 15_000);
      expect(sandbox.expiresAt).toBeLessThanOrEqual(Date.now() + 15_000);
      const listed = (await short.listSandboxes()).find((s) => s.sandboxId === sandbox.sandboxId);
      expect(listed).toMatchObject({ sessionId: "ses_expiry", state: "running" });
      expect(listed?.startedAt).toBeGreaterThanOrEqual(before);
      const pgid = pgidOf(dataDir, sandbox.sandboxId);
      await waitFor(() => groupGone(pgid), { message: "the group to exit at expiry", timeoutMs: 45_000 });
      expect(Date.now()).toBeGreaterThanOrEqual(sandbox.expiresAt ?? 0);
      expect(await short.checkSandboxes([sandbox.sandboxId])).toEqual([]);
      // The registry record outlives the group; an expired sandbox is not listed.
      expect((await short.listSandboxes()).map((s) => s.sandboxId)).not.toContain(sandbox.sandboxId);
    },
    TIMEOUT,
  );

  it(
    "fails a clone of a missing repository with a ProviderError and leaves nothing running",
    async () => {
      const missing = `file://${join(dataDir, "no-such-repo")}`;
      await expect(create("ses_bad", { repos: [{ url: missing }] })).rejects.toMatchObject({ name: "ProviderError", operation: "createSandbox" });
      const left = (await import("node:fs")).readdirSync(join(dataDir, "sandboxes"));
      const live = await provider.checkSandboxes(left);
      expect(live.filter((id) => !started.some((s) => s.sandboxId === id))).toEqual([]);
    },
    TIMEOUT,
  );
});

describe("a restore that cannot repoint OpenCode's sessions fails loudly", () => {
  /** A snapshot taken in another workspace, with an OpenCode database to repoint. */
  async function snapshotWithDatabase(snapshotId: string, database: string): Promise<void> {
    const root = join(dataDir, "snapshots", snapshotId);
    await mkdir(join(root, "workspace"), { recursive: true });
    await mkdir(join(openCodeDbPath(join(root, "home")), ".."), { recursive: true });
    await writeFile(openCodeDbPath(join(root, "home")), database);
    await writeFile(join(root, "snapshot.json"), JSON.stringify({ snapshotId, workspace: join(dataDir, "sandboxes", "lsb_gone", "workspace") }));
  }
  const sandboxDirs = () => (existsSync(join(dataDir, "sandboxes")) ? readdirSync(join(dataDir, "sandboxes")) : []);

  it("without the sqlite3 CLI: a ProviderError naming sqlite3, and no sandbox left", async () => {
    await snapshotWithDatabase("lsnap_nosqlite", "");
    const before = sandboxDirs();
    const path = process.env.PATH;
    process.env.PATH = await mkdtemp(join(tmpdir(), "empty-path-")); // no sqlite3 on it
    try {
      const err = await create("ses_nosqlite", { snapshotId: "lsnap_nosqlite" }).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: "ProviderError", operation: "createSandbox", retryable: false });
      expect((err as Error).message).toMatch(/sqlite3 CLI is not installed/);
    } finally {
      process.env.PATH = path;
    }
    expect(sandboxDirs()).toEqual(before);
  });

  it("sqlite3 failing (the database is not one): a ProviderError with sqlite3's reason", async () => {
    await snapshotWithDatabase("lsnap_notadb", "this is not a database, it is a text file of some length ".repeat(20));
    const err = await create("ses_notadb", { snapshotId: "lsnap_notadb" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "ProviderError", operation: "createSandbox" });
    expect((err as Error).message).toMatch(/sqlite3 failed to repoint .*not a database/);
  });
});
