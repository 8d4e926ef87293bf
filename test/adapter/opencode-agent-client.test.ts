/**
 * `OpenCodeAgentClient` against real OpenCode and the development model in one local sandbox
 * (terminated in afterAll even on failure), plus its failure mapping against real sockets that
 * refuse, hang or answer 5xx. The busy-session prompt test pins down what OpenCode does with a
 * second `prompt_async` during a turn (documented at the top of the client). The sandbox has a
 * sandbox key, so its OpenCode runs with the password derived from it (as every sandbox the
 * flows create): the client calls with the session's endpoint, and the last block pins down what
 * OpenCode answers without it (documented at the top of the client too).
 */
import { createServer, type Server } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEndpointForKey } from "../../functions/agent/agent-endpoint";
import { OpenCodeAgentClient } from "../../functions/agent/opencode-agent-client";
import { AgentUnavailableError } from "../../functions/domain/errors";
import type { AgentEndpoint, AgentEvent } from "../../functions/ports/agent-client";
import { LocalSandboxProvider } from "../../functions/providers/local";
import { OpenCodeMessageReader } from "../../functions/relay/agent-messages";
import { agentAuthorization, deriveAgentPassword, deriveSandboxKey, SANDBOX_KEY_ENV } from "../../sandbox/shared/access-token";
import { waitFor } from "../support/wait-for";

const TIMEOUT = 120_000;
const SESSION = "ses_agentclient";
const SANDBOX_KEY = deriveSandboxKey("agent-client-test-master-key-0123456789", SESSION);
const PASSWORD = deriveAgentPassword(SANDBOX_KEY);
/** An endpoint without credentials (servers that have no password: the failure mapping below). */
const open = (url: string): AgentEndpoint => ({ url, authorization: null });

interface Received {
  at: number;
  event: AgentEvent;
}

/** Drains `client.events` in the background into a list the tests wait on. */
class EventLog {
  readonly received: Received[] = [];
  private readonly controller = new AbortController();
  readonly done: Promise<void>;

  constructor(client: OpenCodeAgentClient, endpoint: AgentEndpoint) {
    this.done = (async () => {
      for await (const event of client.events(endpoint, this.controller.signal)) this.received.push({ at: Date.now(), event });
    })();
  }

  /** Bounded wait for an event matching `predicate` at or after `from`; fails with the types seen. */
  waitFor(predicate: (e: AgentEvent) => boolean, timeoutMs: number, from = 0): Promise<Received> {
    return waitFor(() => this.received.slice(from).find((r) => predicate(r.event)), {
      timeoutMs,
      message: () => `a matching event; saw ${this.received.map((r) => r.event.type).join(", ")}`,
    });
  }

  ofSession(sessionId: string, from = 0): AgentEvent[] {
    return this.received.slice(from).map((r) => r.event).filter((e) => e.properties.sessionID === sessionId);
  }

  close(): Promise<void> {
    this.controller.abort();
    return this.done;
  }
}

interface Message {
  info: { id: string; role: string; parentID?: string; error?: { name: string } };
  parts: { type: string; text?: string; tool?: string; state?: { status: string } }[];
}

async function messages(endpoint: AgentEndpoint, sessionId: string): Promise<Message[]> {
  const res = await fetch(`${endpoint.url}/session/${sessionId}/message`, { headers: endpoint.authorization ? { authorization: endpoint.authorization } : {} });
  expect(res.status).toBe(200);
  return (await res.json()) as Message[];
}

const textOf = (m: Message) => m.parts.map((p) => p.text ?? "").join("");
const is = (type: string, sessionId: string) => (e: AgentEvent) => e.type === type && e.properties.sessionID === sessionId;

/** A port that was just free: nothing listens there. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let dataDir: string;
let provider: LocalSandboxProvider;
let sandboxId: string | null = null;
let baseUrl: string;
let endpoint: AgentEndpoint;
let log: EventLog;
const client = new OpenCodeAgentClient();

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "agent-client-"));
  provider = new LocalSandboxProvider({ dataDir, readyTimeoutMs: 60_000 });
  const sandbox = await provider.createSandbox({ sessionId: SESSION, repos: [], envVars: { [SANDBOX_KEY_ENV]: SANDBOX_KEY } });
  sandboxId = sandbox.sandboxId;
  baseUrl = sandbox.tunnelUrl;
  endpoint = agentEndpointForKey(baseUrl, SANDBOX_KEY);
  log = new EventLog(client, endpoint);
  await log.waitFor((e) => e.type === "server.connected", 10_000);
}, TIMEOUT);

afterAll(async () => {
  await log?.close().catch(() => undefined);
  if (sandboxId) await new LocalSandboxProvider({ dataDir }).terminate(SESSION, sandboxId).catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
}, TIMEOUT);

describe("OpenCodeAgentClient against real OpenCode", () => {
  it("ensureSession creates a session, keeps an existing one, and replaces a bogus id", async () => {
    const created = await client.ensureSession(endpoint);
    expect(created).toMatch(/^ses_/);
    expect(await client.ensureSession(endpoint, created)).toBe(created);
    expect(await client.ensureSession(endpoint, null)).not.toBe(created);

    // OpenCode answers 404 for an unknown `ses…` id, and 500 for an id without that prefix.
    const replacedUnknown = await client.ensureSession(endpoint, "ses_doesnotexist0000000000");
    const replacedMalformed = await client.ensureSession(endpoint, "not-an-opencode-id");
    for (const id of [replacedUnknown, replacedMalformed]) {
      expect(id).toMatch(/^ses_/);
      expect(id).not.toBe(created);
      expect(await client.ensureSession(endpoint, id)).toBe(id);
    }
    expect(replacedUnknown).not.toBe(replacedMalformed);
  });

  it("promptAsync streams the echo as message.part.delta events, then session.idle", async () => {
    const sessionId = await client.ensureSession(endpoint);
    const from = log.received.length;
    await client.promptAsync(endpoint, sessionId, "hello agent client");
    const idle = await log.waitFor(is("session.idle", sessionId), 60_000, from);

    const mine = log.ofSession(sessionId, from);
    const deltas = mine.filter((e) => e.type === "message.part.delta").map((e) => String(e.properties.delta));
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toContain("echo: hello agent client");
    expect(mine.indexOf(idle.event)).toBeGreaterThan(mine.findLastIndex((e) => e.type === "message.part.delta"));
  }, TIMEOUT);

  it("answerAgain replaces an answer: the user message is kept once (one part, same ids), answered anew", async () => {
    const sessionId = await client.ensureSession(endpoint);
    const from = log.received.length;
    await client.promptAsync(endpoint, sessionId, "answer me twice");
    await log.waitFor(is("session.idle", sessionId), 60_000, from);
    const reader = new OpenCodeMessageReader();
    const [user, answer] = await reader.listMessages(endpoint, sessionId);
    const part = user?.parts.find((p) => p.type === "text");
    if (!user || !answer || !part) throw new Error("the first turn is not stored");
    const again = log.received.length;
    await client.answerAgain(endpoint, sessionId, { answerId: answer.info.id, userMessageId: user.info.id, partId: part.id, text: "answer me twice" });
    await log.waitFor(is("session.idle", sessionId), 60_000, again);
    const after = await reader.listMessages(endpoint, sessionId);
    expect(after.map((m) => [m.info.role, m.info.id === user.info.id || m.info.id === answer.info.id])).toEqual([
      ["user", true],
      ["assistant", false],
    ]);
    expect(after[0]?.parts.map((p) => [p.id, p.text])).toEqual([[part.id, "answer me twice"]]);
    expect(after[1]?.parts.filter((p) => p.type === "text").map((p) => p.text)).toEqual(["echo: answer me twice"]);
  }, TIMEOUT);

  it("answerAgain without an answer to revert: the unanswered user message is answered, still stored once", async () => {
    const sessionId = await client.ensureSession(endpoint);
    // A user message nobody answered (`noReply`), as a loop that ended before answering leaves it.
    const res = await fetch(`${endpoint.url}/session/${sessionId}/prompt_async`, {
      method: "POST",
      headers: { authorization: String(endpoint.authorization), "content-type": "application/json" },
      body: JSON.stringify({ noReply: true, parts: [{ type: "text", text: "left unanswered" }] }),
    });
    expect(res.status).toBe(204);
    const reader = new OpenCodeMessageReader();
    const [user] = await waitFor(() => reader.listMessages(endpoint, sessionId), { until: (m) => m.length === 1, message: "the user message", timeoutMs: 30_000, intervalMs: 100 });
    const part = user?.parts.find((p) => p.type === "text");
    if (!user || !part) throw new Error("the user message is not stored");
    const from = log.received.length;
    await client.answerAgain(endpoint, sessionId, { userMessageId: user.info.id, partId: part.id, text: "left unanswered" });
    await log.waitFor(is("session.idle", sessionId), 60_000, from);
    const after = await reader.listMessages(endpoint, sessionId);
    expect(after.map((m) => m.info.role)).toEqual(["user", "assistant"]);
    expect(after[0]?.parts.map((p) => [p.id, p.text])).toEqual([[part.id, "left unanswered"]]);
    expect(after[1]?.parts.filter((p) => p.type === "text").map((p) => p.text)).toEqual(["echo: left unanswered"]);
  }, TIMEOUT);

  it("answerAgain while a turn runs is refused: HTTP 409 SessionBusyError (relay/empty-turns.ts waits for the loop's end)", async () => {
    const sessionId = await client.ensureSession(endpoint);
    const from = log.received.length;
    await client.promptAsync(endpoint, sessionId, "first");
    await log.waitFor(is("session.idle", sessionId), 60_000, from);
    const [user, answer] = await new OpenCodeMessageReader().listMessages(endpoint, sessionId);
    const busyFrom = log.received.length;
    await client.promptAsync(endpoint, sessionId, "please sleep 3s");
    await log.waitFor((e) => e.type === "session.status" && JSON.stringify(e.properties).includes('"busy"') && JSON.stringify(e.properties).includes(sessionId), 60_000, busyFrom);
    const again = { answerId: String(answer?.info.id), userMessageId: String(user?.info.id), partId: String(user?.parts[0]?.id), text: "first" };
    await expect(client.answerAgain(endpoint, sessionId, again)).rejects.toMatchObject({ name: "AgentUnavailableError", retryable: false, context: { operation: "revert", httpStatus: 409 } });
    await log.waitFor(is("session.idle", sessionId), 60_000, busyFrom);
  }, TIMEOUT);

  it("isBusy is true during a `sleep 3s` turn and false after it", async () => {
    const sessionId = await client.ensureSession(endpoint);
    expect(await client.isBusy(endpoint, sessionId)).toBe(false);
    const from = log.received.length;
    await client.promptAsync(endpoint, sessionId, "please sleep 3s");
    expect(await client.isBusy(endpoint, sessionId)).toBe(true);
    const busySince = Date.now();

    await log.waitFor(is("session.idle", sessionId), 60_000, from);
    expect(Date.now() - busySince).toBeGreaterThanOrEqual(2_000);
    expect(await client.isBusy(endpoint, sessionId)).toBe(false);
  }, TIMEOUT);

  it("abort ends a busy turn before its tool call would have finished", async () => {
    const sessionId = await client.ensureSession(endpoint);
    const from = log.received.length;
    await client.promptAsync(endpoint, sessionId, "please sleep 3s");
    await log.waitFor(
      (e) => e.type === "message.part.updated" && e.properties.sessionID === sessionId && (e.properties.part as { tool?: string }).tool === "bash",
      30_000,
      from,
    );
    expect(await client.isBusy(endpoint, sessionId)).toBe(true);

    const abortedAt = Date.now();
    await client.abort(endpoint, sessionId);
    await waitFor(async () => !(await client.isBusy(endpoint, sessionId)), { timeoutMs: 2_000, message: "not busy after abort" });
    expect(Date.now() - abortedAt).toBeLessThan(2_000);
    await log.waitFor(is("session.idle", sessionId), 5_000, from);

    const history = await messages(endpoint, sessionId);
    const assistant = history.filter((m) => m.info.role === "assistant");
    expect(assistant.at(-1)?.info.error?.name).toBe("MessageAbortedError");
    expect(history.map(textOf).join("\n")).not.toContain("echo: please sleep 3s");
  }, TIMEOUT);

  it("queues a second prompt sent during a busy turn: the turn finishes, then the loop answers the newest prompt", async () => {
    const sessionId = await client.ensureSession(endpoint);
    const from = log.received.length;
    await client.promptAsync(endpoint, sessionId, "first please sleep 3s");
    await client.promptAsync(endpoint, sessionId, "second prompt");
    expect(await client.isBusy(endpoint, sessionId)).toBe(true);

    await log.waitFor(is("session.idle", sessionId), 60_000, from);
    // Read at the first idle: the second prompt was answered within the same busy period.
    const history = await messages(endpoint, sessionId);
    expect(log.ofSession(sessionId, from).filter((e) => e.type === "session.idle")).toHaveLength(1);

    const users = history.filter((m) => m.info.role === "user");
    expect(users.map(textOf)).toEqual(["first please sleep 3s", "second prompt"]);
    const [first, second] = users;
    const replyTo = (user: Message | undefined) => history.filter((m) => m.info.role === "assistant" && m.info.parentID === user?.info.id);

    // Not aborted: the first turn's tool call ran to completion without an error.
    const firstReplies = replyTo(first);
    expect(firstReplies.flatMap((m) => m.parts).filter((p) => p.tool === "bash").map((p) => p.state?.status)).toEqual(["completed"]);
    expect(firstReplies.every((m) => m.info.error === undefined)).toBe(true);
    // Not rejected: the second prompt got its own answer.
    expect(replyTo(second).map(textOf)).toEqual(["echo: second prompt"]);
    // The development model answers only the newest user message, so the first gets no echo of its own.
    expect(history.map(textOf)).not.toContain("echo: first please sleep 3s");
    expect(await client.isBusy(endpoint, sessionId)).toBe(false);
  }, TIMEOUT);

  it("maps a prompt for an unknown session (404) to a non-retryable AgentUnavailableError", async () => {
    const err = await client.promptAsync(endpoint, "ses_doesnotexist0000000000", "hi").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentUnavailableError);
    expect(err).toMatchObject({ retryable: false, status: 502, code: "agent_unavailable", context: { httpStatus: 404 } });
  });

  it("ends the event stream quietly when its signal aborts", async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    const drained = (async () => {
      for await (const e of client.events(endpoint, controller.signal)) {
        seen.push(e.type);
        if (e.type === "server.connected") controller.abort();
      }
    })();
    await expect(drained).resolves.toBeUndefined();
    expect(seen[0]).toBe("server.connected");

    const already = AbortSignal.abort();
    const none: AgentEvent[] = [];
    for await (const e of client.events(endpoint, already)) none.push(e);
    expect(none).toEqual([]);
  });
});

describe("OpenCode's server password (OPENCODE_SERVER_PASSWORD, from the sandbox key)", () => {
  const wrong = (): AgentEndpoint => ({ url: baseUrl, authorization: agentAuthorization("not-the-password") });
  const none = (): AgentEndpoint => ({ url: baseUrl, authorization: null });
  const raw = (path: string, headers: Record<string, string> = {}) => fetch(`${baseUrl}${path}`, { headers, signal: AbortSignal.timeout(10_000) });

  it("every route answers 401 with a Basic challenge and an empty body without the password, /event and /doc included", async () => {
    for (const path of ["/session", "/session/status", `/session/${SESSION}/message`, "/event", "/doc", "/global/health", "/config", "/"]) {
      const res = await raw(path);
      expect(res.status, path).toBe(401);
      expect(res.headers.get("www-authenticate"), path).toMatch(/^Basic /);
      expect(await res.text(), path).toBe("");
    }
    // A wrong password, a wrong user name, the password as a bearer token: all 401.
    expect((await raw("/session", { authorization: agentAuthorization("nope") })).status).toBe(401);
    expect((await raw("/session", { authorization: `Basic ${Buffer.from(`admin:${PASSWORD}`).toString("base64")}` })).status).toBe(401);
    expect((await raw("/session", { authorization: `Bearer ${PASSWORD}` })).status).toBe(401);
    // The user name is OpenCode's default, "opencode"; the right header opens every route.
    expect((await raw("/session", { authorization: agentAuthorization(PASSWORD) })).status).toBe(200);
    expect((await raw("/doc", { authorization: agentAuthorization(PASSWORD) })).status).toBe(200);
  });

  it("a client without the password, or with a wrong one, gets a non-retryable HTTP 401 that never holds a credential", async () => {
    for (const target of [none(), wrong()]) {
      for (const attempt of [
        () => client.ensureSession(target),
        () => client.ensureSession(target, "ses_doesnotexist0000000000"),
        () => client.promptAsync(target, "ses_x", "hi"),
        () => client.isBusy(target, "ses_x"),
        () => client.abort(target, "ses_x"),
        () => new OpenCodeMessageReader().listMessages(target, "ses_x"),
        () => client.events(target, new AbortController().signal)[Symbol.asyncIterator]().next(),
      ]) {
        const err = await attempt().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AgentUnavailableError);
        expect(err).toMatchObject({ retryable: false, context: { httpStatus: 401 } });
        const text = `${(err as Error).message} ${JSON.stringify(err)}`;
        expect(text).toContain("HTTP 401");
        for (const secret of [PASSWORD, SANDBOX_KEY, agentAuthorization(PASSWORD), "not-the-password", baseUrl]) expect(text).not.toContain(secret);
      }
    }
  });

  it("with the session's endpoint the message reader works too", async () => {
    const sessionId = await client.ensureSession(endpoint);
    expect(await new OpenCodeMessageReader().listMessages(endpoint, sessionId)).toEqual([]);
  });
});

describe("OpenCodeAgentClient failure mapping", () => {
  it("an unreachable base URL (closed port) is a retryable AgentUnavailableError without the URL in the message", async () => {
    const port = await closedPort();
    const unreachable = `http://127.0.0.1:${port}`;
    for (const attempt of [
      () => client.ensureSession(open(unreachable), "ses_x"),
      () => client.promptAsync(open(unreachable), "ses_x", "hi"),
      () => client.isBusy(open(unreachable), "ses_x"),
      () => client.abort(open(unreachable), "ses_x"),
    ]) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentUnavailableError);
      expect(err).toMatchObject({ retryable: true, context: { networkCode: "ECONNREFUSED" } });
      expect((err as Error).message).not.toContain(String(port));
    }
    const stream = client.events(open(unreachable), new AbortController().signal)[Symbol.asyncIterator]();
    await expect(stream.next()).rejects.toMatchObject({ name: "AgentUnavailableError", retryable: true });
  });

  it("a server that never answers times out after requestTimeoutMs, retryable", async () => {
    const { server, url } = await listen(() => undefined);
    try {
      const quick = new OpenCodeAgentClient({ requestTimeoutMs: 200 });
      const started = Date.now();
      const err = await quick.isBusy(open(url), "ses_x").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentUnavailableError);
      expect(err).toMatchObject({ retryable: true, message: expect.stringContaining("no answer within 200 ms") });
      expect(Date.now() - started).toBeLessThan(5_000);
      const stream = quick.events(open(url), new AbortController().signal)[Symbol.asyncIterator]();
      await expect(stream.next()).rejects.toMatchObject({ name: "AgentUnavailableError", retryable: true });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it("a 5xx is retryable, and the echoed body is redacted", async () => {
    const secret = ["sk-ant-api03-", "Xy7kQm2pL9vR4tW8zA1bC3dE5fG6hJ0kLmNoPq"].join("");
    const { server, url } = await listen((_req, res) => {
      res.writeHead(503, { "content-type": "text/plain" });
      res.end(`upstream failed with key ${secret}`);
    });
    try {
      const err = await client.ensureSession(open(url)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentUnavailableError);
      expect(err).toMatchObject({ retryable: true, context: { httpStatus: 503 } });
      expect((err as Error).message).toContain("HTTP 503");
      expect((err as Error).message).not.toContain(secret);
      // A 5xx on verification must not fork the conversation into a new session.
      await expect(client.ensureSession(open(url), "ses_existing")).rejects.toMatchObject({ retryable: true });
    } finally {
      server.close();
    }
  });

  it("refuses a base URL with credentials without sending it or echoing it", async () => {
    const err = await client.isBusy(open("http://user:hunter2secret@127.0.0.1:1"), "ses_x").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentUnavailableError);
    expect(err).toMatchObject({ retryable: false });
    expect((err as Error).message).not.toContain("hunter2secret");
  });
});
