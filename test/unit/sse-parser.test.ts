/**
 * The SSE parser behind `OpenCodeAgentClient.events`: the same frames come out however the
 * network splits the bytes, including inside `\r\n` and inside multi-byte characters; the
 * captured OpenCode stream (test/fixtures/opencode) is the main input.
 */
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSse, type SseMessage } from "../../functions/agent/opencode-agent-client";

const encoder = new TextEncoder();

async function collect(chunks: (Uint8Array | string)[]): Promise<SseMessage[]> {
  async function* source() {
    for (const c of chunks) yield c;
  }
  const out: SseMessage[] = [];
  for await (const m of parseSse(source())) out.push(m);
  return out;
}

/** Splits bytes at the given (sorted, deduplicated) offsets. */
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

describe("parseSse", () => {
  it("reads every frame of a captured OpenCode turn as JSON with a type", async () => {
    const messages = await collect([encoder.encode(fixture)]);
    expect(messages).toHaveLength(fixture.split("\n").filter((l) => l.startsWith("data:")).length);
    const types = messages.map((m) => (JSON.parse(m.data) as { type: string }).type);
    expect(types[0]).toBe("server.connected");
    expect(types).toContain("message.part.delta");
    expect(types).toContain("session.idle");
    expect(messages.every((m) => m.event === "message")).toBe(true);
  });

  it("yields the same frames however the bytes are split", async () => {
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
    const text = "data: {\"delta\":\"héllo ✓ 😀\"}\r\n\r\ndata: second\r\n\r\n";
    const bytes = encoder.encode(text);
    const oneByOne = [...bytes].map((b) => Uint8Array.of(b));
    const expected = [
      { event: "message", data: "{\"delta\":\"héllo ✓ 😀\"}", id: null },
      { event: "message", data: "second", id: null },
    ];
    expect(await collect(oneByOne)).toEqual(expected);
    expect(await collect([bytes])).toEqual(expected);
  });

  it("treats a lone CR as a line end, also when the next chunk starts a new line", async () => {
    expect(await collect(["data: a\r", "\rdata: b\r\r"])).toEqual([
      { event: "message", data: "a", id: null },
      { event: "message", data: "b", id: null },
    ]);
  });

  it("joins multi-line data, skips comments and keepalives, and keeps event and id fields", async () => {
    const messages = await collect([
      ": keepalive\n\n",
      ":\n",
      "event: update\nid: 7\ndata: line one\ndata:line two\ndata\n: comment inside a frame\n\n",
      "data: after\n\n",
    ]);
    expect(messages).toEqual([
      { event: "update", data: "line one\nline two\n", id: "7" },
      { event: "message", data: "after", id: "7" },
    ]);
  });

  it("dispatches nothing for frames without data and discards a frame cut off by the end of the stream", async () => {
    expect(await collect(["event: ping\n\n", "id: 3\n\n", "data: complete\n\n", "data: cut off"])).toEqual([
      { event: "message", data: "complete", id: "3" },
    ]);
  });

  it("strips a leading byte order mark even when it arrives alone", async () => {
    expect(await collect([Uint8Array.of(0xef, 0xbb), Uint8Array.of(0xbf), "data: x\n\n"])).toEqual([{ event: "message", data: "x", id: null }]);
  });
});
