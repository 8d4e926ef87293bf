/**
 * `openCodeEvents`, behind `OpenCodeAgentClient.events`: the SSE bytes are framed by
 * `eventsource-parser`, and the same events come out however the network splits the bytes,
 * including inside `\r\n` and inside multi-byte characters; frames that are not OpenCode events
 * are skipped. The captured OpenCode stream (test/fixtures/opencode) is the main input.
 */
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import { openCodeEvents } from "../../functions/agent/opencode-agent-client";
import type { AgentEvent } from "../../functions/ports/agent-client";

const encoder = new TextEncoder();

async function collect(chunks: (Uint8Array | string)[]): Promise<AgentEvent[]> {
  // Bytes, as a response body delivers them (a string chunk would skip the decoder).
  const body = Readable.from(chunks.map((c) => (typeof c === "string" ? encoder.encode(c) : c)));
  const out: AgentEvent[] = [];
  for await (const e of openCodeEvents(body)) out.push(e);
  return out;
}

/** Splits bytes at the given offsets. */
function splitAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let from = 0;
  for (const p of points) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  out.push(bytes.subarray(from));
  return out;
}

const fixture = readFileSync(join(import.meta.dirname, "../fixtures/opencode/sse-echo-turn.txt"), "utf8");
const frame = (type: string, properties: Record<string, unknown> = {}) => `data: ${JSON.stringify({ type, properties })}`;

describe("openCodeEvents", () => {
  it("reads every frame of a captured OpenCode turn as an event with a type", async () => {
    const events = await collect([encoder.encode(fixture)]);
    expect(events).toHaveLength(fixture.split("\n").filter((l) => l.startsWith("data:")).length);
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("server.connected");
    expect(types).toContain("message.part.delta");
    expect(types).toContain("session.idle");
  });

  it("yields the same events however the bytes are split", async () => {
    const bytes = encoder.encode(fixture);
    const whole = await collect([bytes]);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 40 }), async (cuts) => {
        expect(await collect(splitAt(bytes, cuts))).toEqual(whole);
      }),
      { numRuns: 200 },
    );
  });

  it("splits inside CRLF and inside multi-byte characters, byte by byte", async () => {
    const text = `${frame("message.part.delta", { delta: "héllo ✓ 😀" })}\r\n\r\n${frame("session.idle")}\r\n\r\n`;
    const bytes = encoder.encode(text);
    const expected = [
      { type: "message.part.delta", properties: { delta: "héllo ✓ 😀" } },
      { type: "session.idle", properties: {} },
    ];
    expect(await collect([...bytes].map((b) => Uint8Array.of(b)))).toEqual(expected);
    expect(await collect([bytes])).toEqual(expected);
  });

  // A `\r` that is the stream's very last byte is not read as a line end (the parser waits for a
  // possible `\n`): only a frame ended by bare CRs right at the end of a stream is lost, which
  // OpenCode (`\n` line ends) never sends, and the relay catches up from stored messages anyway.
  it("treats a lone CR as a line end, also when the next chunk starts a new line", async () => {
    expect(await collect([`${frame("a")}\r`, `\r${frame("b")}\r\r`, `${frame("c")}\n\n`])).toEqual([
      { type: "a", properties: {} },
      { type: "b", properties: {} },
      { type: "c", properties: {} },
    ]);
  });

  it("joins multi-line data, skips comments, keepalives and frames that are not OpenCode events", async () => {
    const events = await collect([
      ": keepalive\n\n",
      ":\n",
      'event: update\nid: 7\ndata: {"type":"split",\n: comment inside a frame\ndata: "properties":{"n":1}}\n\n',
      "data: not json\n\n",
      'data: {"properties":{}}\n\n',
      'data: {"type":"no-properties"}\n\n',
    ]);
    expect(events).toEqual([
      { type: "split", properties: { n: 1 } },
      { type: "no-properties", properties: {} },
    ]);
  });

  it("dispatches nothing for frames without data and discards a frame cut off by the end of the stream", async () => {
    expect(await collect(["event: ping\n\n", "id: 3\n\n", `${frame("complete")}\n\n`, frame("cut off")])).toEqual([{ type: "complete", properties: {} }]);
  });

  it("strips a leading byte order mark even when it arrives alone", async () => {
    expect(await collect([Uint8Array.of(0xef, 0xbb), Uint8Array.of(0xbf), `${frame("x")}\n\n`])).toEqual([{ type: "x", properties: {} }]);
  });

  it("ends quietly when the signal aborts while waiting for the next chunk, and destroys the body", async () => {
    const body = new Readable({ read: () => undefined });
    body.push(encoder.encode(`${frame("first")}\n\n`));
    const controller = new AbortController();
    const seen: string[] = [];
    for await (const e of openCodeEvents(body, controller.signal)) {
      seen.push(e.type);
      queueMicrotask(() => controller.abort());
    }
    expect(seen).toEqual(["first"]);
    await vi.waitFor(() => expect(body.destroyed).toBe(true), { timeout: 1_000 });
  });

  it("yields nothing more once the signal aborted, even events already parsed", async () => {
    const body = new Readable({ read: () => undefined });
    body.push(encoder.encode(`${frame("a")}\n\n${frame("b")}\n\n`));
    const controller = new AbortController();
    const seen: string[] = [];
    for await (const e of openCodeEvents(body, controller.signal)) {
      seen.push(e.type);
      controller.abort();
    }
    expect(seen).toEqual(["a"]);
  });

  it("destroys the body when the consumer stops early", async () => {
    const body = new Readable({ read: () => undefined });
    body.push(encoder.encode(`${frame("a")}\n\n${frame("b")}\n\n`));
    for await (const e of openCodeEvents(body)) if (e.type === "a") break;
    await vi.waitFor(() => expect(body.destroyed).toBe(true), { timeout: 1_000 });
  });

  it("throws when the body fails or closes before its end (a connection lost mid-stream), after the events it delivered", async () => {
    const failing = new Readable({ read: () => undefined });
    failing.push(encoder.encode(`${frame("a")}\n\n`));
    const seen: string[] = [];
    const run = (async () => {
      for await (const e of openCodeEvents(failing)) {
        seen.push(e.type);
        setImmediate(() => failing.destroy(Object.assign(new Error("aborted"), { code: "ECONNRESET" })));
      }
    })();
    await expect(run).rejects.toMatchObject({ code: "ECONNRESET" });
    expect(seen).toEqual(["a"]);

    const closed = new Readable({ read: () => undefined });
    const ended = (async () => {
      for await (const e of openCodeEvents(closed)) void e;
    })();
    setImmediate(() => closed.destroy());
    await expect(ended).rejects.toThrow("closed before its end");
  });

  it("pauses the body while events wait for the consumer and resumes it once they are taken", async () => {
    const body = new Readable({ read: () => undefined });
    body.push(encoder.encode(Array.from({ length: 100 }, (_, i) => `${frame(`e${i}`)}\n\n`).join("")));
    const stream = openCodeEvents(body)[Symbol.asyncIterator]();
    expect((await stream.next()).value).toMatchObject({ type: "e0" });
    // One chunk of 100 events: parsed at once, so the body was paused behind them.
    expect(body.isPaused()).toBe(true);
    for (let i = 1; i < 100; i++) expect((await stream.next()).value).toMatchObject({ type: `e${i}` });
    body.push(encoder.encode(`${frame("last")}\n\n`));
    body.push(null);
    expect((await stream.next()).value).toMatchObject({ type: "last" });
    expect(body.isPaused()).toBe(false);
    expect((await stream.next()).done).toBe(true);
  });
});
