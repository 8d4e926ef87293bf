/**
 * The WebSocket contract (API.md "WebSocket"): the frames a client sends, validated by the
 * server's `$default` handler (functions/ws/handlers/message.ts) with these very schemas, and the
 * frames the server pushes, which the typed client (clients/api-client) reads. Server frames are
 * open (`looseObject`): the server may add fields, and a client must keep working when it does.
 */
import * as z from "zod";
import { PromptContent } from "../domain/prompt-content";
import { PERMISSION_RESPONSES } from "../ports/agent-client";

export const ClientFrame = z.discriminatedUnion("type", [
  z.object({ type: z.literal("prompt"), content: PromptContent }).strict(),
  z.object({ type: z.literal("cancel") }).strict(),
  z.object({ type: z.literal("ping") }).strict(),
  z.object({ type: z.literal("heartbeat") }).strict(),
  /** Answers the agent's `permission.asked` (policy `ask`): once, always (that pattern, for good), or reject. */
  z
    .object({
      type: z.literal("permission.reply"),
      permissionId: z.string().regex(/^per_[A-Za-z0-9]{1,64}$/, "must be the permissionId of a permission.asked message"),
      response: z.enum(PERMISSION_RESPONSES),
    })
    .strict(),
]);
export type ClientFrame = z.infer<typeof ClientFrame>;

export const CLIENT_STATUS_VALUES = ["creating", "resuming", "running", "paused", "stopped", "error", "migrating"] as const;
export const TOOL_STATUS_VALUES = ["pending", "running", "completed", "error"] as const;

const AgentErrorFrame = z.looseObject({ code: z.string(), message: z.string() });

/** A transcript message (GET /v1/sessions/{id}/messages and `init.messages`). */
export const TranscriptMessageView = z.looseObject({
  sessionId: z.string(),
  messageId: z.string(),
  role: z.enum(["user", "assistant", "system"]),
  text: z.string(),
  parts: z.array(
    z.looseObject({
      partId: z.string().optional(),
      type: z.string(),
      text: z.string().optional(),
      tool: z.string().optional(),
      status: z.string().optional(),
      title: z.string().optional(),
      input: z.record(z.string(), z.unknown()).optional(),
      output: z.string().optional(),
      error: z.string().optional(),
    }),
  ),
  createdAt: z.string(),
  completedAt: z.string().nullable(),
  reason: z.enum(["end_turn", "error", "canceled"]).optional(),
  error: AgentErrorFrame.optional(),
  authorId: z.string().optional(),
});
export type TranscriptMessageView = z.infer<typeof TranscriptMessageView>;

/** The session object (API.md "Session object"); more fields are allowed. */
export const SessionView = z.looseObject({
  id: z.string(),
  title: z.string().nullable().optional(),
  status: z.enum(["starting", "running", "paused", "stopped", "error"]),
  clientType: z.string(),
  sessionType: z.string(),
  provider: z.string(),
  sandboxId: z.string().nullable(),
  snapshotId: z.string().nullable().optional(),
  pauseReason: z.string().nullable().optional(),
  stopReason: z.string().nullable().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  pausedAt: z.string().nullable().optional(),
  endedAt: z.string().nullable().optional(),
  lastActivityAt: z.string().nullable().optional(),
  sandboxExpiresAt: z.string().nullable().optional(),
  activeSeconds: z.number().optional(),
});
export type SessionView = z.infer<typeof SessionView>;

export const ServerFrame = z.discriminatedUnion("type", [
  z.looseObject({
    type: z.literal("init"),
    session: SessionView,
    messages: z.array(TranscriptMessageView),
    data: z.looseObject({ connectedClients: z.number(), promptsQueued: z.number(), agentBusy: z.boolean().optional(), connectedUsers: z.array(z.string()).optional() }),
  }),
  z.looseObject({ type: z.literal("status"), status: z.enum(CLIENT_STATUS_VALUES), message: z.string().optional() }),
  z.looseObject({ type: z.literal("message.create"), messageId: z.string(), role: z.string() }),
  z.looseObject({ type: z.literal("message.part.text-delta"), messageId: z.string(), partId: z.string(), delta: z.string() }),
  z.looseObject({
    type: z.literal("message.part.tool-update"),
    messageId: z.string(),
    partId: z.string(),
    tool: z.string(),
    status: z.enum(TOOL_STATUS_VALUES),
    title: z.string().optional(),
    input: z.record(z.string(), z.unknown()).optional(),
    output: z.string().optional(),
    error: z.string().optional(),
  }),
  z.looseObject({ type: z.literal("message.finalize"), messageId: z.string(), text: z.string(), reason: z.string(), error: AgentErrorFrame.optional() }),
  z.looseObject({ type: z.literal("prompt.queued"), promptId: z.string(), position: z.number() }),
  z.looseObject({ type: z.literal("error"), code: z.string(), message: z.string() }),
  z.looseObject({ type: z.literal("pong") }),
  z.looseObject({ type: z.literal("permission.asked"), permissionId: z.string() }),
  z.looseObject({ type: z.literal("user.joined") }),
  z.looseObject({ type: z.literal("user.left") }),
]);
export type ServerFrame = z.infer<typeof ServerFrame>;
/** A server frame of one `type`. */
export type ServerFrameOf<T extends ServerFrame["type"]> = Extract<ServerFrame, { type: T }>;
