/**
 * The contract's view and frame schemas (functions/contract/frames.ts) against what the server
 * really sends: session views from the server's own `toSessionView`, the relay translator's
 * frames for recorded OpenCode streams, an `init` as send-init builds it, and the relay's and
 * the agent tools' frames as their code writes them. A field the server sends that the contract
 * does not name fails here (the schemas are open for clients: test/support/contract-frames.ts
 * checks strictly).
 */
import { readFileSync, readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { toSessionView } from "../../functions/domain/session";
import type { AgentEvent } from "../../functions/ports/agent-client";
import { EventTranslator } from "../../functions/relay/event-translator";
import { permissionAskOf } from "../../functions/relay/permission-asks";
import { connectedUsers } from "../../functions/ws/handlers/send-init";
import { buildSession, T0 } from "../support/builders";
import { serverFrameIssues, sessionViewIssues } from "../support/contract-frames";

const LATER = new Date(T0.getTime() + 60_000);

const views = {
  starting: toSessionView(buildSession({ title: "t", permissionPolicy: "ask", fallbackModels: ["openai/gpt-4o"] }), T0),
  running: toSessionView(
    buildSession({ status: "running", sandboxId: "sb-1", openCodeUrl: "http://127.0.0.1:4096", previewUrl: "https://preview.example.test", runningSince: T0.toISOString(), agentBusy: true, codingAgentSessionId: "ses_agent" }),
    LATER,
  ),
  paused: toSessionView(
    buildSession({
      status: "paused",
      pauseReason: "user",
      pausedAt: T0.toISOString(),
      snapshotId: "mem:snap-1",
      snapshotExpiresAt: new Date(T0.getTime() + 7 * 86_400_000).toISOString(),
      durableSnapshotId: "fs-snap-1",
      durableSnapshotExpiresAt: null,
    }),
    LATER,
  ),
};

describe("contract SessionView", () => {
  it("describes every field of the server's session views (restoreFrom, preview, permissionPolicy, fallbackModels among them)", () => {
    expect(views.running.preview).toEqual({ url: "https://preview.example.test" });
    expect(views.paused.restoreFrom).toMatchObject({ kind: "memory", snapshotId: "mem:snap-1", fallback: { kind: "filesystem", snapshotId: "fs-snap-1" } });
    expect(views.starting).toMatchObject({ permissionPolicy: "ask", fallbackModels: ["openai/gpt-4o"], restoreFrom: null, preview: null });
    for (const [state, view] of Object.entries(views)) expect(sessionViewIssues(view), state).toEqual([]);
  });

  it("names a field the contract does not describe", () => {
    expect(sessionViewIssues({ ...views.running, surprise: 1 })).toEqual(["session.surprise is not in the contract"]);
    expect(serverFrameIssues({ type: "status", status: "running", surprise: 1 })).toEqual(["status.surprise is not in the contract"]);
    expect(serverFrameIssues({ type: "novel.frame" })).toEqual(['frame type "novel.frame" is not in the contract']);
  });
});

describe("contract ServerFrame", () => {
  it("describes the relay translator's frames for recorded OpenCode turns", () => {
    const dir = new URL("../fixtures/opencode/", import.meta.url);
    const frames = readdirSync(dir).flatMap((name) => {
      const translator = new EventTranslator({ sessionId: "ses_relaytest000000000000000", agentSessionId: "ses_dff6dec16ffeJtGK53goJY0q3e" });
      return readFileSync(new URL(name, dir), "utf8")
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .flatMap((line) => translator.apply(JSON.parse(line.slice("data: ".length)) as AgentEvent).client);
    });
    expect(new Set(frames.map((f) => f.type))).toEqual(new Set(["message.create", "message.part.text-delta", "message.part.tool-update", "message.finalize"]));
    for (const frame of frames) expect(serverFrameIssues(frame), JSON.stringify(frame)).toEqual([]);
  });

  it("describes init as send-init builds it, with connectedUsers as {userId} objects", () => {
    const users = connectedUsers([
      { userId: "user-b", connectedAt: "2026-11-01T10:00:02.000Z" },
      { userId: "user-a", connectedAt: "2026-11-01T10:00:01.000Z" },
    ]);
    const message = { sessionId: views.running.id, messageId: "msg_1", role: "assistant", text: "echo: hi", parts: [{ partId: "p1", type: "text", text: "echo: hi" }], createdAt: T0.toISOString(), completedAt: T0.toISOString(), reason: "end_turn" };
    const init = { type: "init", session: views.running, messages: [message], data: { connectedClients: 2, connectedUsers: users, promptsQueued: 0, agentBusy: true } };
    expect(serverFrameIssues(init)).toEqual([]);
    expect(users).toEqual([{ userId: "user-a" }, { userId: "user-b" }]);
  });

  it("describes the relay's, the ws handlers' and the agent tools' other frames", () => {
    const ask = permissionAskOf({ id: "per_1", sessionID: "ses_agent", permission: "bash", patterns: ["rm *"], always: ["rm *"], metadata: { command: "rm -rf x" }, tool: { messageID: "msg_1", callID: "call_1" } } as Parameters<typeof permissionAskOf>[0]);
    const frames = [
      { type: "status", status: "running", preview: { url: "https://preview.example.test" } },
      { type: "status", status: "error", message: "boot failed" },
      { type: "permission.asked", ...ask },
      { type: "permission.replied", permissionId: "per_1", response: "once" },
      { type: "agent.failover", promptId: "prm_1", from: "dev/echo", to: "openai/gpt-4o", reason: "auth", message: "auth happened" },
      { type: "agent.failover", promptId: "prm_1", from: null, to: "openai/gpt-4o", reason: "rate_limit", message: "slow down" },
      { type: "env.requested", requestId: "evt_1", keys: [{ name: "DATABASE_URL", required: true, description: null, available: false }], reason: "to run the tests" },
      { type: "verification.reported", requestId: "evt_2", folder: "evidence", summary: "all green", files: [{ path: "evidence/shot.png", bytes: 12 }], truncated: false, services: [{ name: "web", status: "running", exitCode: null }] },
      { type: "prompt.queued", promptId: "prm_2", position: 1, status: "queued", authorId: "user-a" },
      { type: "prompt.queued", promptId: "prm_2", position: 1, status: "queued", authorId: "user-a", content: "hello" },
      { type: "error", code: "agent_error", message: "the model failed", error: { code: "auth", message: "the model failed" }, messageId: "msg_1" },
      { type: "error", code: "invalid_frame", message: "type: unknown" },
      { type: "pong" },
      { type: "user.joined", userId: "user-b" },
      { type: "user.left", userId: "user-b" },
    ];
    for (const frame of frames) expect(serverFrameIssues(frame), JSON.stringify(frame)).toEqual([]);
  });
});
