/**
 * WebSocket `$default`: client frames (API.md): `prompt {content}`, `cancel`, `ping`,
 * `heartbeat`. Frames are validated with zod; an invalid frame gets an `error` message and the
 * connection stays open. `ping` answers `pong` at any time, also while the sandbox starts.
 * `heartbeat` refreshes the idle grace only and never resumes (seed 002 §11b). `prompt` has the
 * HTTP route's semantics (services/submit-prompt.ts) and answers `prompt.queued {promptId,
 * position}`. `cancel` aborts the agent's current turn. Every frame is activity that keeps the
 * connection counted as present: its expiry moves forward (issue 14 §3).
 *
 * Every frame but `ping` reads the connection's item anyway; it also carries the API token's
 * expiry and a revocation mark (issue 14 item 5), so a frame from a connection whose token
 * expired or was revoked is refused (`error` `unauthorized`) and the connection closed, at no
 * extra read. (`ping` reads nothing and stays answered until then.)
 */
import { connectionExpiresAt, connectionRefreshDue } from "../../domain/connection-liveness";
import { agentEndpoint } from "../../agent/agent-endpoint";
import { authorOf, submitPrompt } from "../../services/submit-prompt";
import { ClientFrame } from "../../contract/frames";
import { describeZodError } from "../../http/http-handler";
import { errorForLog } from "../../observability/logger";
import type { ClientConnection } from "../../ports/session-items";
import { broadcast } from "../../services/broadcast";
import { AgentUnavailableError, AppError, ConflictError, NotFoundError } from "../../domain/errors";
import type { WsDeps, WsEvent, WsResult } from "../ws-deps";
import { wsEntry } from "../lambda-entry";

// The client frames live in the public contract (functions/contract/frames.ts), shared with the typed client.
export { ClientFrame } from "../../contract/frames";

function parseFrame(event: WsEvent, maxBytes: number): { frame: ClientFrame } | { error: string } {
  const raw = event.isBase64Encoded ? Buffer.from(event.body ?? "", "base64").toString("utf8") : (event.body ?? "");
  if (Buffer.byteLength(raw) > maxBytes) return { error: `frame is ${Buffer.byteLength(raw)} bytes; the limit is ${maxBytes}` };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return { error: "frame: not valid JSON" };
  }
  const parsed = ClientFrame.safeParse(json);
  return parsed.success ? { frame: parsed.data } : { error: describeZodError(parsed.error, "frame") };
}

/** Why a connection's API token no longer lets it send frames, or null. */
export function tokenRefusal(connection: Pick<ClientConnection, "revokedAt" | "tokenExpiresAt">, now: Date): string | null {
  if (connection.revokedAt) return "the API token of this connection was revoked; connect again with a valid token";
  if (connection.tokenExpiresAt && Date.parse(connection.tokenExpiresAt) <= now.getTime()) {
    return "the API token of this connection has expired; connect again with a valid token";
  }
  return null;
}

/**
 * A frame proves the client is there: move its connection's expiry forward (at most one write
 * per half TTL). Best effort: a failed refresh never fails the frame.
 */
async function keepConnectionAlive(deps: WsDeps, connectionId: string, known?: ClientConnection | null): Promise<void> {
  try {
    const connection = known === undefined ? await deps.connections.lookup(connectionId) : known;
    const now = deps.now();
    const ttl = deps.config.CONNECTION_TTL_SECONDS;
    if (connection && connectionRefreshDue(connection, now, ttl)) await deps.connections.refresh(connection.sessionId, connectionId, connectionExpiresAt(now, ttl));
  } catch (err) {
    deps.logger.warn("connection expiry not refreshed", { connectionId, error: errorForLog(err) });
  }
}

export function makeMessageHandler(deps: WsDeps): (event: WsEvent) => Promise<WsResult> {
  return async (event) => {
    const connectionId = event.requestContext.connectionId;
    const reply = (message: { type: string } & Record<string, unknown>) => deps.push.send(connectionId, message);
    const parsed = parseFrame(event, deps.config.MAX_BODY_BYTES);
    if ("error" in parsed) {
      await reply({ type: "error", code: "invalid_frame", message: parsed.error });
      await keepConnectionAlive(deps, connectionId);
      return { statusCode: 200 };
    }
    const frame = parsed.frame;
    if (frame.type === "ping") {
      // Answered first: ping works at any time, also before the store is reachable.
      await reply({ type: "pong" });
      await keepConnectionAlive(deps, connectionId);
      return { statusCode: 200 };
    }
    try {
      const connection = await deps.connections.lookup(connectionId);
      await keepConnectionAlive(deps, connectionId, connection);
      if (!connection) {
        await reply({ type: "error", code: "not_connected", message: "this connection is not registered to a session; reconnect" });
        return { statusCode: 200 };
      }
      const refusal = tokenRefusal(connection, deps.now());
      if (refusal) {
        await reply({ type: "error", code: "unauthorized", message: refusal });
        await deps.push.disconnect(connectionId);
        deps.logger.info("frame refused: token no longer valid", { connectionId, sessionId: connection.sessionId, tokenId: connection.tokenId });
        return { statusCode: 200 };
      }
      const sessionId = connection.sessionId;
      switch (frame.type) {
        case "heartbeat":
          await deps.sessions.touchActivity(sessionId, deps.now());
          break;
        case "prompt": {
          const session = await deps.sessions.getSession(sessionId);
          if (!session) throw new Error(`session ${sessionId} vanished`);
          const submitted = await submitPrompt(deps, session, { content: frame.content, source: `user:${connection.userId}`, maxQueued: deps.config.MAX_QUEUED_PROMPTS_PER_SESSION });
          const queued = { type: "prompt.queued", promptId: submitted.prompt.promptId, position: submitted.position, status: submitted.status, authorId: authorOf(submitted.prompt.source) };
          await reply(queued);
          // Issue 25 §6: the session's other clients see who asked what, as it is asked.
          await broadcast(deps, sessionId, { ...queued, content: submitted.prompt.content }, { except: connectionId });
          break;
        }
        case "permission.reply": {
          await deps.sessions.touchActivity(sessionId, deps.now());
          const session = await deps.sessions.getSession(sessionId);
          if (session?.status !== "running" || !session.openCodeUrl) throw new ConflictError(`session is ${session?.status ?? "gone"}: no permission request to answer`);
          try {
            await deps.agent.replyPermission(await agentEndpoint(deps.sandboxKeys, sessionId, session.openCodeUrl), frame.permissionId, frame.response);
          } catch (err) {
            // OpenCode answers 404 for a request that was answered already (or never asked).
            if (err instanceof AgentUnavailableError && err.context.httpStatus === 404) throw new NotFoundError(`no pending permission request ${frame.permissionId}: it was answered already or never asked`);
            throw err;
          }
          break;
        }
        case "cancel": {
          await deps.sessions.touchActivity(sessionId, deps.now());
          const session = await deps.sessions.getSession(sessionId);
          if (session?.status === "running" && session.openCodeUrl && session.codingAgentSessionId) {
            await deps.agent.abort(await agentEndpoint(deps.sandboxKeys, sessionId, session.openCodeUrl), session.codingAgentSessionId);
          }
          break;
        }
      }
      return { statusCode: 200 };
    } catch (err) {
      if (err instanceof AppError && err.expose) {
        await reply({ type: "error", code: err.code, message: err.message });
        return { statusCode: 200 };
      }
      deps.logger.error("frame failed", { connectionId, frame: frame.type, error: errorForLog(err) });
      await reply({ type: "error", code: "internal_error", message: "internal error" });
      return { statusCode: 200 };
    }
  };
}

export const handler = wsEntry(makeMessageHandler);
