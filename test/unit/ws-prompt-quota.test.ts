/**
 * The queued-prompt cap on the WebSocket edge (issue 14 §7): a `prompt` frame over
 * MAX_QUEUED_PROMPTS_PER_SESSION gets an `error` frame with code `quota_exceeded` naming the
 * limit, the prompt is not stored, and the connection stays usable.
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../functions/config/config";
import type { QueuedPrompt } from "../../functions/ports/session-items";
import { makeMessageHandler } from "../../functions/ws/handlers/message";
import type { WsDeps } from "../../functions/ws/ws-deps";
import { buildSession, T0 } from "../support/builders";

describe("WebSocket prompt frames over the queued-prompt cap", () => {
  it("answer quota_exceeded and store nothing", async () => {
    const session = buildSession({ status: "paused" });
    const queued: QueuedPrompt[] = ["a", "b"].map((content, i) => ({
      promptId: `prm_${i}`,
      sessionId: session.id,
      content,
      status: "queued",
      source: "user:u",
      createdAt: T0.toISOString(),
      updatedAt: T0.toISOString(),
    }));
    const sent: Record<string, unknown>[] = [];
    const enqueued: unknown[] = [];
    const deps = {
      push: { send: async (_id: string, message: Record<string, unknown>) => void sent.push(message) },
      connections: { lookup: async () => ({ connectionId: "c1", sessionId: session.id, userId: "u", orgId: session.orgId }) },
      sessions: { getSession: async () => session, touchActivity: async () => undefined },
      prompts: { list: async () => queued, enqueue: async (p: unknown) => void enqueued.push(p) },
      config: parseConfig({ TABLE_NAME: "t", MAX_QUEUED_PROMPTS_PER_SESSION: "2" }),
      now: () => T0,
      logger: new Logger({ serviceName: "test", logLevel: "SILENT" }),
    } as unknown as WsDeps;
    const handle = makeMessageHandler(deps);
    const res = await handle({ requestContext: { connectionId: "c1", routeKey: "$default" }, body: JSON.stringify({ type: "prompt", content: "three" }) });
    expect(res.statusCode).toBe(200);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ type: "error", code: "quota_exceeded" });
    expect(String(sent[0]?.message)).toContain("limit is 2");
    expect(enqueued).toEqual([]);
  });
});
