import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planReply, startDevModelServer, type DevModelServer } from "../../sandbox/dev-model/server";

interface Chunk {
  object: string;
  choices: { index: number; delta: { role?: string; content?: string | null; tool_calls?: ToolCallDelta[] }; finish_reason: string | null }[];
}
interface ToolCallDelta {
  index: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

let server: DevModelServer;

beforeAll(async () => {
  server = await startDevModelServer();
});
afterAll(async () => {
  await server.close();
});

async function streamChat(messages: unknown[]): Promise<{ chunks: Chunk[]; done: boolean; contentType: string | null }> {
  const res = await fetch(`${server.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "echo", stream: true, messages }),
  });
  expect(res.status).toBe(200);
  const lines = (await res.text()).split("\n").filter((l) => l.startsWith("data: "));
  const payloads = lines.map((l) => l.slice("data: ".length));
  const done = payloads.at(-1) === "[DONE]";
  const chunks = payloads.filter((p) => p !== "[DONE]").map((p) => JSON.parse(p) as Chunk);
  return { chunks, done, contentType: res.headers.get("content-type") };
}

const text = (chunks: Chunk[]) => chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? "")).join("");
const finish = (chunks: Chunk[]) => chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null);

describe("development model over a real socket", () => {
  it("listens on an allocated port", () => {
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/v1`);
  });

  it("streams `echo: <prompt>` in several deltas and ends with [DONE]", async () => {
    const { chunks, done, contentType } = await streamChat([
      { role: "system", content: "You are opencode" },
      { role: "user", content: "first" },
      { role: "assistant", content: "echo: first" },
      { role: "user", content: [{ type: "text", text: "hello there world" }] },
    ]);
    expect(contentType).toContain("text/event-stream");
    expect(done).toBe(true);
    expect(text(chunks)).toBe("echo: hello there world");
    const contentDeltas = chunks.filter((c) => c.choices.some((ch) => (ch.delta.content ?? "") !== ""));
    expect(contentDeltas.length).toBeGreaterThan(1);
    expect(finish(chunks)).toEqual(["stop"]);
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
  });

  it("answers `sleep 2s` with a streamed bash tool call", async () => {
    const { chunks, done } = await streamChat([{ role: "user", content: "please sleep 2s now" }]);
    expect(done).toBe(true);
    const calls = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
    expect(calls.length).toBeGreaterThan(1);
    const first = calls[0];
    expect(first?.id).toMatch(/^call_/);
    expect(first?.type).toBe("function");
    expect(first?.function?.name).toBe("bash");
    expect(calls.every((c) => c.index === 0)).toBe(true);
    const args = JSON.parse(calls.map((c) => c.function?.arguments ?? "").join("")) as { command: string; description: string };
    expect(args.command).toBe("sleep 2");
    expect(args.description.length).toBeGreaterThan(0);
    expect(finish(chunks)).toEqual(["tool_calls"]);
    expect(text(chunks)).toBe("");
  });

  it("answers with the echo once the tool result is in the conversation", async () => {
    const { chunks } = await streamChat([
      { role: "user", content: "please sleep 2s now" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "bash", arguments: '{"command":"sleep 2"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "" },
    ]);
    expect(text(chunks)).toBe("echo: please sleep 2s now");
    expect(finish(chunks)).toEqual(["stop"]);
  });

  it("answers a non-streaming title request quickly with a short title", async () => {
    const res = await fetch(`${server.url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "echo",
        messages: [
          { role: "system", content: "You are a title generator. You output ONLY a thread title." },
          { role: "user", content: "sleep 5s please" },
        ],
      }),
    });
    const body = (await res.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
    expect(body.choices[0]?.finish_reason).toBe("stop");
    expect(body.choices[0]?.message.content.length).toBeLessThan(50);
  });

  it("lists the model", async () => {
    const body = (await (await fetch(`${server.url}/models`)).json()) as { data: { id: string }[] };
    expect(body.data.map((m) => m.id)).toEqual(["echo"]);
  });
});

describe("planReply", () => {
  it("accepts fractional sleeps and ignores OpenCode's system reminders in the echo", () => {
    expect(planReply([{ role: "user", content: "sleep 0.5s" }])).toEqual({
      kind: "tool_call",
      name: "bash",
      arguments: { command: "sleep 0.5", description: "Sleep for 0.5 seconds" },
    });
    expect(planReply([{ role: "user", content: "hi<system-reminder>be nice</system-reminder>" }])).toEqual({ kind: "text", text: "echo: hi" });
  });

  it("`pause <N>s` answers with the echo, paused halfway for N seconds", () => {
    expect(planReply([{ role: "user", content: "join pause 2.5s now" }])).toEqual({ kind: "text", text: "echo: join pause 2.5s now", pauseMs: 2500 });
    expect(planReply([{ role: "user", content: "x answer empty once" }])).toEqual({ kind: "text", text: "echo: x answer empty once", emptyOnce: true });
  });
});

describe("planReply: `$ <command>` lines", () => {
  it("runs the command with the bash tool, then echoes once the tool result is in", () => {
    const ask = { role: "user", content: "please commit\n$ git commit -am 'x'\nthanks" };
    expect(planReply([ask])).toEqual({ kind: "tool_call", name: "bash", arguments: { command: "git commit -am 'x'", description: "Run the requested command" } });
    expect(planReply([ask, { role: "assistant", content: null }, { role: "tool", content: "done" }])).toMatchObject({ kind: "text" });
    expect(planReply([{ role: "user", content: "costs $ 5" }])).toEqual({ kind: "text", text: "echo: costs $ 5" });
  });
});

describe("a development model that requires a key", () => {
  const KEY = "dev-key-0123456789";
  const sha = createHash("sha256").update(KEY).digest("hex");
  let keyed: DevModelServer;
  beforeAll(async () => {
    keyed = await startDevModelServer({ requiredKeySha256: sha });
  });
  afterAll(async () => {
    await keyed.close();
  });
  const call = (authorization?: string) =>
    fetch(`${keyed.url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
      body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hi" }] }),
    });

  it("answers 401 without the key or with another, like a real provider; answers with it", async () => {
    expect((await call()).status).toBe(401);
    expect((await call("Bearer not-the-key")).status).toBe(401);
    const ok = await call(`Bearer ${KEY}`);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe("echo: hi");
  });
});
