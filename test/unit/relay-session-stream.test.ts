/**
 * SessionStream on fake timers with a scripted agent: reconnect backoff [1 s, 2 s, 5 s, 10 s,
 * 10 s...], its reset after a good connection, the heartbeat timeout, the connect snapshot
 * before any event, and that nothing from an older generation acts after close() (seed 002 c. 12).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AgentUnavailableError } from "../../functions/domain/errors";
import type { AgentEndpoint, AgentEvent } from "../../functions/ports/agent-client";
import type { AgentMessage } from "../../functions/relay/agent-messages";
import { DEFAULT_HEARTBEAT_TIMEOUT_MS, SessionStream, type DisconnectReason, type SessionStreamHandler, type StreamSnapshot } from "../../functions/relay/session-stream";

/** What one connection attempt does. */
type Attempt =
  | "refused" // events() throws before anything arrives
  | "silent" // server.connected, then nothing until aborted
  | "heartbeats" // server.connected, then a heartbeat every 10 s
  | "drops"; // server.connected, one event, then the connection breaks

const connected: AgentEvent = { type: "server.connected", properties: {} };

function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

class ScriptedStreamAgent {
  /** `Date.now()` (fake) at each connection attempt. */
  readonly attempts: number[] = [];
  busy = false;
  constructor(private readonly script: Attempt[]) {}

  async *events(_endpoint: AgentEndpoint, signal: AbortSignal): AsyncIterable<AgentEvent> {
    this.attempts.push(Date.now());
    const mode = this.script.shift() ?? "refused";
    if (mode === "refused") throw new AgentUnavailableError("OpenCode events failed: unreachable", { retryable: true });
    yield connected;
    if (mode === "silent") {
      await untilAborted(signal);
      return;
    }
    if (mode === "drops") {
      yield { type: "session.status", properties: { sessionID: "ses_a", status: { type: "busy" } } };
      throw new AgentUnavailableError("OpenCode events failed: unreachable", { retryable: true });
    }
    const aborted = untilAborted(signal);
    while (!signal.aborted) {
      await Promise.race([new Promise((r) => setTimeout(r, 10_000)), aborted]);
      if (!signal.aborted) yield { type: "server.heartbeat", properties: {} };
    }
  }

  isBusy(): Promise<boolean> {
    return Promise.resolve(this.busy);
  }
}

class RecordingHandler implements SessionStreamHandler {
  readonly log: string[] = [];
  readonly disconnects: { reason: DisconnectReason; retryInMs: number }[] = [];
  snapshots: StreamSnapshot[] = [];
  onConnected(snapshot: StreamSnapshot): Promise<void> {
    this.snapshots.push(snapshot);
    this.log.push(`connected busy=${snapshot.busy} messages=${snapshot.messages.length}`);
    return Promise.resolve();
  }
  onEvent(event: AgentEvent): Promise<void> {
    this.log.push(event.type);
    return Promise.resolve();
  }
  onDisconnected(info: { reason: DisconnectReason; retryInMs: number }): void {
    this.disconnects.push({ reason: info.reason, retryInMs: info.retryInMs });
  }
}

const messages: AgentMessage[] = [{ info: { id: "msg_1", role: "user", time: { created: 1 } }, parts: [] }];

function streamWith(agent: ScriptedStreamAgent, handler: SessionStreamHandler = new RecordingHandler()) {
  return new SessionStream({
    agent,
    messages: { listMessages: () => Promise.resolve(messages) },
    endpoint: { url: "http://oc.invalid", authorization: null },
    agentSessionId: "ses_a",
    handler,
  });
}

const gaps = (times: number[]) => times.slice(1).map((t, i) => t - (times[i] ?? 0));

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("SessionStream reconnects", () => {
  it("backs off 1 s, 2 s, 5 s, 10 s, then 10 s while the agent stays unreachable", async () => {
    const agent = new ScriptedStreamAgent([]);
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(1_000 + 2_000 + 5_000 + 10_000 + 10_000 + 10_000);
    expect(gaps(agent.attempts)).toEqual([1_000, 2_000, 5_000, 10_000, 10_000, 10_000]);
    expect(handler.disconnects.every((d) => d.reason === "error")).toBe(true);
    expect(stream.state).toBe("waiting");
    await stream.close();
  });

  it("starts the backoff over after a connection that went live", async () => {
    const agent = new ScriptedStreamAgent(["refused", "refused", "drops", "refused"]);
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(1_000 + 2_000 + 1_000 + 2_000);
    expect(gaps(agent.attempts)).toEqual([1_000, 2_000, 1_000, 2_000]);
    expect(handler.disconnects.map((d) => d.retryInMs)).toEqual([1_000, 2_000, 1_000, 2_000, 5_000]);
    await stream.close();
  });

  it("gives the connect snapshot (busy state, stored messages) before the first event, on every connect", async () => {
    const agent = new ScriptedStreamAgent(["drops", "silent"]);
    agent.busy = true;
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(handler.log).toEqual([
      "connected busy=true messages=1",
      "server.connected",
      "session.status",
      "connected busy=true messages=1",
      "server.connected",
    ]);
    expect(stream.state).toBe("open");
    await stream.close();
  });

  it("a handler failure drops the connection and reconnects with a fresh snapshot", async () => {
    const agent = new ScriptedStreamAgent(["silent", "silent"]);
    let failures = 1;
    const handler = new RecordingHandler();
    const failing: SessionStreamHandler = {
      onConnected: (s) => handler.onConnected(s),
      onEvent: (e) => (failures-- > 0 ? Promise.reject(new Error("store unreachable")) : handler.onEvent(e)),
      onDisconnected: (i) => handler.onDisconnected(i),
    };
    const stream = streamWith(agent, failing);
    stream.start();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(handler.disconnects.map((d) => d.reason)).toEqual(["error"]);
    expect(handler.log).toEqual(["connected busy=false messages=1", "connected busy=false messages=1", "server.connected"]);
    await stream.close();
  });
});

describe("SessionStream heartbeat timeout", () => {
  it("a silent stream is dropped after the timeout and reconnected 1 s later", async () => {
    const agent = new ScriptedStreamAgent(["silent", "silent"]);
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    // 20 s: at least one of OpenCode's 10 s heartbeats missed (seed 000's 30 s leaves the loss check the rest).
    expect(DEFAULT_HEARTBEAT_TIMEOUT_MS).toBe(20_000);
    await vi.advanceTimersByTimeAsync(DEFAULT_HEARTBEAT_TIMEOUT_MS - 1);
    expect(agent.attempts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1 + 1_000);
    expect(agent.attempts).toEqual([0, DEFAULT_HEARTBEAT_TIMEOUT_MS + 1_000]);
    expect(handler.disconnects).toEqual([{ reason: "heartbeat", retryInMs: 1_000 }]);
    expect(stream.counters.heartbeatTimeouts).toBe(1);
    await stream.close();
  });

  it("OpenCode's 10 s heartbeats keep a quiet stream open", async () => {
    const agent = new ScriptedStreamAgent(["heartbeats"]);
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(300_000);
    expect(agent.attempts).toHaveLength(1);
    expect(handler.disconnects).toEqual([]);
    expect(handler.log.filter((l) => l === "server.heartbeat")).toHaveLength(30);
    await stream.close();
  });
});

describe("SessionStream generations (seed 002 constraint 12)", () => {
  it("beforeReconnect runs when the delay is over: false means no reconnect; a failing check reconnects as before", async () => {
    const declined = new ScriptedStreamAgent(["refused", "silent"]);
    const checks: number[] = [];
    const handler = Object.assign(new RecordingHandler(), {
      beforeReconnect: () => {
        checks.push(Date.now());
        return Promise.resolve(false);
      },
    });
    const stream = streamWith(declined, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(checks).toEqual([1_000]);
    expect(declined.attempts).toEqual([0]);
    await stream.close();

    const failing = new ScriptedStreamAgent(["refused", "silent"]);
    const broken = streamWith(failing, Object.assign(new RecordingHandler(), { beforeReconnect: () => Promise.reject(new Error("store unreachable")) }));
    broken.start();
    await vi.advanceTimersByTimeAsync(1_500);
    expect(gaps(failing.attempts)).toEqual([1_000]);
    await broken.close();
  });

  it("close() while a reconnect is pending: the reconnect never happens", async () => {
    const agent = new ScriptedStreamAgent(["refused", "silent"]);
    const stream = streamWith(agent);
    stream.start();
    await vi.advanceTimersByTimeAsync(500);
    expect(stream.state).toBe("waiting");
    await stream.close();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(agent.attempts).toEqual([0]);
    expect(stream.state).toBe("closed");
  });

  it("close() while the connect snapshot is being read: no snapshot or event is delivered, no reconnect", async () => {
    const agent = new ScriptedStreamAgent(["silent", "silent"]);
    let answer: (busy: boolean) => void = () => undefined;
    agent.isBusy = () => new Promise<boolean>((resolve) => (answer = resolve));
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(10);
    const closing = stream.close();
    answer(false);
    await closing;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(handler.log).toEqual([]);
    expect(agent.attempts).toHaveLength(1);
  });

  it("close() while connected ends the stream quietly (no disconnect report, no reconnect); start() after close does nothing", async () => {
    const agent = new ScriptedStreamAgent(["silent", "silent"]);
    const handler = new RecordingHandler();
    const stream = streamWith(agent, handler);
    stream.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(stream.state).toBe("open");
    await stream.close();
    stream.start();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(agent.attempts).toHaveLength(1);
    expect(handler.disconnects).toEqual([]);
  });
});
