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
});
