/**
 * The typed client (clients/api-client): what it may import (the contract module, for types
 * only; no server module, no Node module, so it bundles for a browser with nothing of the
 * server in it), and its transcript assembly, idempotent under repeated `message.create` and
 * `message.finalize` frames and re-synced by `init`.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { SessionSocket, type WebSocketLike } from "../../clients/api-client/session-socket";
import { Transcript } from "../../clients/api-client/transcript";
import type { ServerFrame } from "../../functions/contract/frames";

const ROOT = path.resolve(__dirname, "../..");
const CLIENT_DIR = "clients/api-client";
const clientFiles = readdirSync(path.join(ROOT, CLIENT_DIR)).filter((f) => f.endsWith(".ts")).map((f) => `${CLIENT_DIR}/${f}`);

/** Every `import`/`export ... from` statement of a file, with whether it is type-only. */
function importStatements(rel: string): { spec: string; typeOnly: boolean }[] {
  const text = readFileSync(path.join(ROOT, rel), "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  return [...text.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+["']([^"']+)["']/gms)].map((m) => {
    const clause = m[0];
    // `export { X, type Y } from`: type-only when every name is `type`.
    const names = /\{([^}]*)\}/.exec(clause)?.[1]?.split(",").map((s) => s.trim()).filter(Boolean) ?? [];
    const allTypeNames = names.length > 0 && names.every((n) => n.startsWith("type "));
    return { spec: m[3] ?? "", typeOnly: Boolean(m[2]) || allTypeNames };
  });
}

describe("typed client imports", () => {
  it("imports nothing outside clients/ but the contract module (functions/contract), and that for types only", () => {
    expect(clientFiles.length).toBeGreaterThanOrEqual(4);
    const outside: string[] = [];
    for (const file of clientFiles) {
      for (const { spec, typeOnly } of importStatements(file)) {
        if (!spec.startsWith(".")) {
          outside.push(`${file}: package ${spec}`);
          continue;
        }
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
        if (target.startsWith(`${CLIENT_DIR}/`)) continue;
        if (target.startsWith("functions/contract/") && typeOnly) continue;
        outside.push(`${file}: ${spec}${typeOnly ? "" : " (a value import)"}`);
      }
    }
    expect(outside).toEqual([]);
  });

  it("bundles for a browser from clients/ alone: no Node module, no server module, no zod at run time", async () => {
    const result = await build({
      entryPoints: [path.join(ROOT, CLIENT_DIR, "index.ts")],
      bundle: true,
      write: false,
      platform: "browser",
      format: "esm",
      metafile: true,
      logLevel: "silent",
    });
    const inputs = Object.keys(result.metafile.inputs).sort();
    expect(inputs.every((p) => p.startsWith(`${CLIENT_DIR}/`))).toBe(true);
    expect(inputs).toContain(`${CLIENT_DIR}/session-socket.ts`);
  });
});

const init = (messages: unknown[] = []): ServerFrame =>
  ({ type: "init", session: { id: "ses_x" }, messages, data: { connectedClients: 1, promptsQueued: 0 } }) as unknown as ServerFrame;

describe("Transcript", () => {
  it("applies a turn once: a repeated message.create does not restart it, a repeated finalize changes nothing", () => {
    const t = new Transcript();
    expect(t.apply({ type: "message.create", messageId: "m1", role: "assistant" }).kind).toBe("message");
    expect(t.apply({ type: "message.part.text-delta", messageId: "m1", partId: "p1", delta: "ech" }).kind).toBe("message");
    expect(t.apply({ type: "message.create", messageId: "m1", role: "assistant" }).kind).toBe("none");
    t.apply({ type: "message.part.text-delta", messageId: "m1", partId: "p1", delta: "o: hi" });
    expect(t.get("m1")?.text).toBe("echo: hi");
    t.apply({ type: "message.part.tool-update", messageId: "m1", partId: "p2", tool: "bash", status: "running" });
    t.apply({ type: "message.part.tool-update", messageId: "m1", partId: "p2", tool: "bash", status: "completed", output: "ok" });
    expect(t.get("m1")?.parts.filter((p) => p.kind === "tool")).toEqual([{ kind: "tool", partId: "p2", tool: "bash", status: "completed", output: "ok" }]);
    const first = t.apply({ type: "message.finalize", messageId: "m1", text: "echo: hi", reason: "end_turn" });
    expect(first).toMatchObject({ kind: "message", finished: true });
    expect(t.apply({ type: "message.finalize", messageId: "m1", text: "echo: hi", reason: "end_turn" }).kind).toBe("none");
    expect(t.apply({ type: "message.part.text-delta", messageId: "m1", partId: "p1", delta: " again" }).kind).toBe("none");
    expect(t.messages.map((m) => [m.messageId, m.text, m.done])).toEqual([["m1", "echo: hi", true]]);
  });

  it("a reopened answer (finalized empty, then created again, streamed, finalized with its text) is revised, not finished twice", () => {
    const t = new Transcript();
    t.apply({ type: "message.create", messageId: "m1", role: "assistant" });
    expect(t.apply({ type: "message.finalize", messageId: "m1", text: "", reason: "end_turn" })).toMatchObject({ kind: "message", finished: true });
    const reopened = t.apply({ type: "message.create", messageId: "m1", role: "assistant" });
    expect(reopened).toMatchObject({ kind: "message", finished: false });
    expect(t.get("m1")?.done).toBe(false);
    t.apply({ type: "message.part.text-delta", messageId: "m1", partId: "p1", delta: "echo: " });
    expect(t.apply({ type: "message.part.text-delta", messageId: "m1", partId: "p1", delta: "late" })).toMatchObject({ kind: "message", finished: false });
    expect(t.get("m1")?.text).toBe("echo: late");
    const last = t.apply({ type: "message.finalize", messageId: "m1", text: "echo: late", reason: "end_turn" });
    expect(last).toMatchObject({ kind: "message", finished: false, revised: true });
    expect(t.messages.map((m) => [m.messageId, m.text, m.done, m.parts.map((p) => (p.kind === "text" ? p.text : p.tool))])).toEqual([["m1", "echo: late", true, ["echo: late"]]]);
    // The revision repeated (a takeover) changes nothing.
    expect(t.apply({ type: "message.finalize", messageId: "m1", text: "echo: late", reason: "end_turn" }).kind).toBe("none");
  });

  it("a finalize with other text for a finished message (its create and deltas missed) replaces the text as a revision", () => {
    const t = new Transcript();
    t.apply({ type: "message.create", messageId: "m1", role: "assistant" });
    t.apply({ type: "message.part.tool-update", messageId: "m1", partId: "t1", tool: "bash", status: "completed" });
    t.apply({ type: "message.finalize", messageId: "m1", text: "", reason: "end_turn" });
    expect(t.apply({ type: "message.finalize", messageId: "m1", text: "done: ok", reason: "end_turn" })).toMatchObject({ kind: "message", finished: false, revised: true });
    expect(t.get("m1")?.parts.map((p) => (p.kind === "text" ? p.text : p.tool))).toEqual(["bash", "done: ok"]);
    expect(t.get("m1")?.text).toBe("done: ok");
  });

  it("a finalize's full text wins over the deltas a reconnect missed", () => {
    const t = new Transcript();
    t.apply({ type: "message.create", messageId: "m1", role: "assistant" });
    t.apply({ type: "message.part.text-delta", messageId: "m1", partId: "p1", delta: "echo: " });
    expect(t.apply({ type: "message.finalize", messageId: "m1", text: "echo: all of it", reason: "end_turn" })).toMatchObject({ finished: true });
    expect(t.get("m1")?.parts).toEqual([{ kind: "text", partId: "m1:final", text: "echo: all of it" }]);
  });

  it("init after a reconnect replaces the transcript with the stored one and keeps a turn still streaming", () => {
    const t = new Transcript();
    t.apply({ type: "message.create", messageId: "m1", role: "assistant" });
    t.apply({ type: "message.finalize", messageId: "m1", text: "old", reason: "end_turn" });
    t.apply({ type: "message.create", messageId: "m2", role: "assistant" });
    t.apply({ type: "message.part.text-delta", messageId: "m2", partId: "p", delta: "par" });
    const stored = [
      { sessionId: "ses_x", messageId: "u1", role: "user", text: "hi", parts: [{ type: "text", text: "hi" }], createdAt: "2026-01-01T00:00:00.000Z", completedAt: null },
      { sessionId: "ses_x", messageId: "m1", role: "assistant", text: "echo: hi", parts: [{ type: "text", partId: "p1", text: "echo: hi" }], createdAt: "2026-01-01T00:00:01.000Z", completedAt: "2026-01-01T00:00:02.000Z", reason: "end_turn" },
    ];
    expect(t.apply(init(stored)).kind).toBe("reset");
    expect(t.messages.map((m) => [m.messageId, m.text, m.done])).toEqual([
      ["u1", "hi", true],
      ["m1", "echo: hi", true],
      ["m2", "par", false],
    ]);
    // The stored turn's finalize, repeated by the relay after the reconnect, is a no-op.
    expect(t.apply({ type: "message.finalize", messageId: "m1", text: "echo: hi", reason: "end_turn" }).kind).toBe("none");
    expect(t.apply({ type: "message.finalize", messageId: "m2", text: "partial answer", reason: "end_turn" })).toMatchObject({ finished: true });
  });

  const stored = (messageId: string, role: "user" | "assistant", text: string, second: number) => ({
    sessionId: "ses_x",
    messageId,
    role,
    text,
    parts: [{ type: "text", partId: `${messageId}p`, text }],
    createdAt: `2026-01-01T00:00:${String(second).padStart(2, "0")}.000Z`,
    completedAt: `2026-01-01T00:00:${String(second).padStart(2, "0")}.500Z`,
  });

  it("sync puts a prompt's stored user message before its streaming answer (a first prompt sent over HTTP: no frame carries it)", () => {
    const t = new Transcript();
    t.apply(init([]));
    t.apply({ type: "message.create", messageId: "a1", role: "assistant" });
    t.apply({ type: "message.part.text-delta", messageId: "a1", partId: "p", delta: "echo: he" });
    expect(t.sync([stored("u1", "user", "hello", 1)])).toEqual({ kind: "reset" });
    expect(t.messages.map((m) => [m.messageId, m.role, m.text, m.done])).toEqual([
      ["u1", "user", "hello", true],
      ["a1", "assistant", "echo: he", false],
    ]);
    // The answer keeps streaming live; a sync with nothing new changes nothing.
    t.apply({ type: "message.part.text-delta", messageId: "a1", partId: "p", delta: "llo" });
    expect(t.sync([stored("u1", "user", "hello", 1)])).toEqual({ kind: "none" });
    expect(t.get("a1")?.text).toBe("echo: hello");
  });

  it("a prompt queued behind a busy turn is pending (with its position) and enters the transcript after the earlier answer", () => {
    const t = new Transcript();
    t.apply(init([stored("u1", "user", "sleep 4s", 1)]));
    t.apply({ type: "message.create", messageId: "a1", role: "assistant" });
    t.apply({ type: "message.part.tool-update", messageId: "a1", partId: "t", tool: "bash", status: "running" });
    t.sent("second prompt");
    // The sender's prompt.queued has no content: the content it sent is taken.
    expect(t.apply({ type: "prompt.queued", promptId: "pr2", position: 1, status: "queued" })).toEqual({ kind: "queue" });
    expect(t.pending).toEqual([{ promptId: "pr2", content: "second prompt", position: 1, status: "queued" }]);
    expect(t.messages.map((m) => m.messageId)).toEqual(["u1", "a1"]);
    // A repeated prompt.queued changes nothing.
    expect(t.apply({ type: "prompt.queued", promptId: "pr2", position: 1, status: "queued", content: "second prompt" }).kind).toBe("none");
    t.apply({ type: "message.finalize", messageId: "a1", text: "echo: sleep 4s", reason: "end_turn" });
    // The next turn starts: the store holds the second prompt's user message after the first answer.
    t.apply({ type: "message.create", messageId: "a2", role: "assistant" });
    expect(t.sync([stored("u1", "user", "sleep 4s", 1), stored("a1", "assistant", "echo: sleep 4s", 2), stored("u2", "user", "second prompt", 3)]).kind).toBe("reset");
    expect(t.messages.map((m) => m.messageId)).toEqual(["u1", "a1", "u2", "a2"]);
    expect(t.pending).toEqual([]);
  });

  it("an earlier user message with the same text does not take a new prompt off the pending list", () => {
    const t = new Transcript();
    t.apply(init([stored("u1", "user", "continue", 1), stored("a1", "assistant", "echo: continue", 2)]));
    t.apply({ type: "prompt.queued", promptId: "pr2", position: 1, status: "queued", content: "continue" });
    expect(t.sync([stored("u1", "user", "continue", 1), stored("a1", "assistant", "echo: continue", 2)]).kind).toBe("none");
    expect(t.pending.map((p) => p.promptId)).toEqual(["pr2"]);
  });
});

/** A stand-in WebSocket: the test plays the server's frames. */
class FakeSocket implements WebSocketLike {
  static last: FakeSocket | null = null;
  readyState = 0;
  sent: string[] = [];
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.last = this;
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.({});
    });
  }
  send(data: string): void {
    this.sent.push(data);
  }
  close(): void {
    this.readyState = 3;
  }
  serve(frame: unknown): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
}

describe("SessionSocket history", () => {
  it("syncs the stored transcript when an answer starts, so its prompt's user message shows before it", async () => {
    const store = [{ sessionId: "ses_x", messageId: "u1", role: "user" as const, text: "hello", parts: [{ type: "text", text: "hello" }], createdAt: "2026-01-01T00:00:01.000Z", completedAt: "2026-01-01T00:00:01.000Z" }];
    let fetches = 0;
    const socket = new SessionSocket({ wsUrl: "ws://x", sessionId: "ses_x", auth: { token: "t" }, WebSocket: FakeSocket, reconnect: false, history: async () => (fetches++, store) });
    await socket.connect();
    const server = FakeSocket.last as FakeSocket;
    server.serve(init([]));
    expect(fetches).toBe(0);
    server.serve({ type: "message.create", messageId: "a1", role: "assistant" });
    await expect.poll(() => socket.transcript.messages.map((m) => m.messageId)).toEqual(["u1", "a1"]);
    expect(fetches).toBe(1);
    socket.prompt("next");
    expect(JSON.parse(server.sent[0] ?? "{}")).toEqual({ type: "prompt", content: "next" });
    server.serve({ type: "prompt.queued", promptId: "pr2", position: 1, status: "queued" });
    expect(socket.transcript.pending.map((p) => p.content)).toEqual(["next"]);
    socket.close();
  });
});
