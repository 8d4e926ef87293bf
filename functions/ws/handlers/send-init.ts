/**
 * Sends a new connection its `init` (API.md: session, transcript, `{connectedClients,
 * promptsQueued, agentBusy}`), marks it ready for pushes, then sends the current status.
 * Order is what clients rely on: `init` first, then every status change. A status that changed
 * between the two is covered by the status sent after marking ready (a duplicate is harmless;
 * a gap is not). In AWS this runs as its own function, invoked asynchronously by `$connect`;
 * a connection that is not open yet is retried briefly.
 *
 * Presence (seed 001, issue 25 §6): `init` names the distinct users with a live connection
 * (`data.connectedUsers: [{userId}]`), and once the new connection is ready its user's arrival
 * is announced to the session's other clients (`user.joined {userId}`) unless that user was
 * already connected from elsewhere.
 *
 * A client joining mid-turn (issue 25): once it is ready, the session's relay is nudged, and
 * catches it up with the turn in progress before its next frame (relay/fan-out.ts).
 *
 * Permissions (issue 25 §3): under `permissionPolicy: "ask"` the questions the agent is waiting
 * on are sent after the status, as the live `permission.asked` frames are (the relay may send a
 * question again at the same moment: answering twice is harmless, the second gets `not_found`).
 */
import * as z from "zod";
import { connectionExpiresAt } from "../../domain/connection-liveness";
import { sessionPreview, toSessionView, type ClientStatus, type SessionRecord } from "../../domain/session";
import { clientStatusOf } from "../../domain/session-transitions";
import type { TranscriptMessage } from "../../ports/transcript";
import type { WsDeps } from "../ws-deps";
import type { ClientConnection } from "../../ports/session-items";
import { broadcast, statusFrame } from "../../services/broadcast";
import { lazyEntry } from "../lambda-entry";
import { agentEndpoint } from "../../agent/agent-endpoint";
import { errorForLog } from "../../observability/logger";
import { permissionAskOf, type PermissionAsk } from "../../relay/permission-asks";

export const SendInitEvent = z.object({ connectionId: z.string().min(1), sessionId: z.string().min(1) });

/** How much transcript `init` carries; older messages page through GET .../messages. */
export const INIT_TRANSCRIPT_LIMIT = 500;

async function transcriptOf(deps: WsDeps, sessionId: string): Promise<TranscriptMessage[]> {
  const messages: TranscriptMessage[] = [];
  let cursor: string | null = null;
  do {
    const page = await deps.transcript.list(sessionId, { limit: 100, cursor });
    messages.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor && messages.length < INIT_TRANSCRIPT_LIMIT);
  return messages.slice(-INIT_TRANSCRIPT_LIMIT);
}

/** Distinct users of the given connections, in order of first connection. */
export function connectedUsers(connections: Pick<ClientConnection, "userId" | "connectedAt">[]): { userId: string }[] {
  const byArrival = [...connections].sort((a, b) => a.connectedAt.localeCompare(b.connectedAt));
  return [...new Set(byArrival.map((c) => c.userId))].map((userId) => ({ userId }));
}

/** What a client should show now: the stored status, or the flow in progress on it. */
export async function currentClientStatus(deps: Pick<WsDeps, "sessions" | "now">, session: SessionRecord): Promise<ClientStatus> {
  const lease = await deps.sessions.readLease(session.id);
  const flowRunning = lease?.owner !== null && lease !== null && (lease.expiresAt ?? 0) > deps.now().getTime();
  if (flowRunning && (session.status === "paused" || session.status === "error")) return "resuming";
  return clientStatusOf(session.status);
}

/**
 * The `permission.asked` frames of the questions the session's agent is waiting on (policy `ask`,
 * a running session with an agent session). Reaching the agent is best effort: the `init` is sent
 * already, and a failure costs the late client only the question it would otherwise have missed.
 */
export async function pendingPermissionFrames(deps: Pick<WsDeps, "agent" | "sandboxKeys" | "logger">, session: SessionRecord): Promise<({ type: "permission.asked" } & PermissionAsk)[]> {
  if (session.permissionPolicy !== "ask" || session.status !== "running" || !session.openCodeUrl || !session.codingAgentSessionId) return [];
  try {
    const endpoint = await agentEndpoint(deps.sandboxKeys, session.id, session.openCodeUrl);
    const pending = await deps.agent.pendingPermissions(endpoint, session.codingAgentSessionId);
    return pending.map((p) => ({ type: "permission.asked" as const, ...permissionAskOf(p) }));
  } catch (err) {
    deps.logger.warn("pending permissions could not be listed for a new connection", { sessionId: session.id, error: errorForLog(err) });
    return [];
  }
}

/**
 * Tells the session's relay that a client is ready (issue 25): it reads the session's connection
 * list again and sends the joiner the turn in progress before its next frame, instead of finding
 * it at its next backstop read. Best effort: the backstop read catches it up too, only later.
 */
async function nudgeRelayOfJoin(deps: Pick<WsDeps, "relayNudge" | "logger">, sessionId: string): Promise<void> {
  try {
    await deps.relayNudge?.nudge(sessionId);
  } catch (err) {
    deps.logger.warn("relay nudge for a new connection failed", { sessionId, error: errorForLog(err) });
  }
}

export function makeSendInitHandler(deps: WsDeps, options: { attempts?: number; retryMs?: number } = {}): (event: unknown) => Promise<{ sent: boolean }> {
  const attempts = options.attempts ?? 10;
  const retryMs = options.retryMs ?? 200;
  return async (event) => {
    const { connectionId, sessionId } = SendInitEvent.parse(event);
    const session = await deps.sessions.getSession(sessionId);
    if (!session) return { sent: false };
    const [messages, connections, queued] = await Promise.all([
      transcriptOf(deps, sessionId),
      // Only connections that count (issue 14 §3): aborted handshakes and vanished clients do not.
      deps.connections.listLive(sessionId, deps.now()),
      deps.prompts.list(sessionId, "queued"),
    ]);
    const init = {
      type: "init",
      session: toSessionView(session, deps.now()),
      messages,
      data: { connectedClients: connections.length, connectedUsers: connectedUsers(connections), promptsQueued: queued.length, agentBusy: session.agentBusy },
    };
    let sent = false;
    for (let i = 0; i < attempts && !sent; i++) {
      sent = (await deps.push.send(connectionId, init)) === "sent";
      if (!sent) await new Promise((r) => setTimeout(r, retryMs));
    }
    if (!sent) {
      await deps.connections.remove(sessionId, connectionId);
      return { sent: false };
    }
    if (!(await deps.connections.markReady(sessionId, connectionId, connectionExpiresAt(deps.now(), deps.config.CONNECTION_TTL_SECONDS)))) return { sent: true };
    const fresh = (await deps.sessions.getSession(sessionId)) ?? session;
    // Its preview too when running: the session may have started running since the init above.
    await deps.push.send(connectionId, statusFrame(await currentClientStatus(deps, fresh), { preview: sessionPreview(fresh) }));
    // Issue 25 §3: a question the agent is waiting on was asked before this client came (or before a relay takeover).
    for (const frame of await pendingPermissionFrames(deps, fresh)) await deps.push.send(connectionId, frame);
    // A turn may be streaming: its relay catches this client up with it now (relay/fan-out.ts).
    if (fresh.status === "running") await nudgeRelayOfJoin(deps, sessionId);
    const self = connections.find((c) => c.connectionId === connectionId);
    if (self && !connections.some((c) => c.userId === self.userId && c.connectionId !== connectionId)) {
      await broadcast(deps, sessionId, { type: "user.joined", userId: self.userId }, { except: connectionId });
    }
    return { sent: true };
  };
}

export const handler = lazyEntry((deps) => makeSendInitHandler(deps));
