/**
 * The WebSocket contract (API.md "WebSocket"): the frames a client sends, validated by the
 * server's `$default` handler (functions/ws/handlers/message.ts) with these very schemas, and the
 * frames the server pushes, which the typed client (clients/api-client) reads. Server frames are
 * open (`looseObject`): the server may add fields, and a client must keep working when it does.
 */
import * as z from "zod";
import { PromptContent } from "../domain/prompt-content";
import { PERMISSION_RESPONSES } from "../ports/agent-client";
import { SessionRecord } from "../domain/session";
import { VerificationReport } from "../../sandbox/shared/agent-tool-requests";

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

/** A snapshot a resume can restore (functions/domain/restore-source.ts). */
const RestoreCandidateView = z.looseObject({
  /** `memory`: processes survive; `filesystem`: the sandbox boots from the files. */
  kind: z.enum(["memory", "filesystem"]),
  snapshotId: z.string(),
  /** When the provider stops restoring it; null: kept until deleted. */
  expiresAt: z.string().nullable(),
});

/** A sandbox's preview (its exposed port's URL), only while it runs. */
export const PreviewView = z.looseObject({ url: z.string() });

/**
 * The fields of the stored session record that clients never see (functions/domain/session.ts
 * `toSessionView`): tenancy, concurrency and the sandbox's own addresses and keys.
 */
const INTERNAL_SESSION_FIELDS = { orgId: true, version: true, runningSince: true, initialPrompt: true, openCodeUrl: true, sandboxKeyEpoch: true, resumeRequestedAt: true, previewUrl: true } as const;

/**
 * The session object (API.md "Session object"): the stored record's public fields (the
 * record's own schema, so a field the record gains is in the contract too) plus `restoreFrom`,
 * which snapshot a resume restores (issue 22; null: a fresh sandbox), and `preview`. More fields
 * are allowed. test/unit/contract-frames.test.ts checks real views and frames against it.
 */
export const SessionView = z.looseObject({
  ...SessionRecord.omit(INTERNAL_SESSION_FIELDS).shape,
  restoreFrom: RestoreCandidateView.extend({
    /** Every snapshot the session has is past its expiry (a restore is still tried). */
    expired: z.boolean(),
    /** What a later resume restores once this one has expired. */
    fallback: RestoreCandidateView.nullable(),
  }).nullable(),
  preview: PreviewView.nullable(),
});
export type SessionView = z.infer<typeof SessionView>;

/** Every frame the server sends (ws handlers, the relay, the flows, the agent tools); each may carry more fields. */
export const ServerFrame = z.discriminatedUnion("type", [
  z.looseObject({
    type: z.literal("init"),
    session: SessionView,
    messages: z.array(TranscriptMessageView),
    data: z.looseObject({
      connectedClients: z.number(),
      promptsQueued: z.number(),
      agentBusy: z.boolean().optional(),
      /** The session's connected users, by arrival (issue 25 presence). */
      connectedUsers: z.array(z.looseObject({ userId: z.string() })).optional(),
    }),
  }),
  z.looseObject({ type: z.literal("status"), status: z.enum(CLIENT_STATUS_VALUES), message: z.string().optional(), preview: PreviewView.nullable().optional() }),
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
  /** To the sender, and with its `content` to the session's other clients (issue 25 §6). */
  z.looseObject({
    type: z.literal("prompt.queued"),
    promptId: z.string(),
    position: z.number(),
    status: z.enum(["queued", "processing"]).optional(),
    authorId: z.string().optional(),
    content: z.string().optional(),
  }),
  /** `agent_error` frames carry the classified error and its message's id. */
  z.looseObject({ type: z.literal("error"), code: z.string(), message: z.string(), error: AgentErrorFrame.optional(), messageId: z.string().optional() }),
  z.looseObject({ type: z.literal("pong") }),
  /** The agent asks for a permission (policy `ask`): answer with `permission.reply`. */
  z.looseObject({
    type: z.literal("permission.asked"),
    permissionId: z.string(),
    permission: z.string().optional(),
    patterns: z.array(z.string()).optional(),
    always: z.array(z.string()).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    tool: z.looseObject({ messageId: z.string(), callId: z.string() }).nullable().optional(),
  }),
  z.looseObject({ type: z.literal("permission.replied"), permissionId: z.string(), response: z.enum(PERMISSION_RESPONSES) }),
  /** A turn failed on its model and goes on with the next of the session's `fallbackModels` (seed 004). */
  z.looseObject({ type: z.literal("agent.failover"), promptId: z.string(), from: z.string().nullable(), to: z.string(), reason: z.string(), message: z.string() }),
  /** The agent asks the user for env values (its `request_env_variables` tool). */
  z.looseObject({
    type: z.literal("env.requested"),
    requestId: z.string(),
    keys: z.array(z.looseObject({ name: z.string(), required: z.boolean(), description: z.string().nullable(), available: z.boolean() })),
    reason: z.string().nullable(),
  }),
  /** The agent asks for its work to be reviewed (its `verify` tool). */
  z.looseObject({ type: z.literal("verification.reported"), requestId: z.string(), ...VerificationReport.shape }),
  z.looseObject({ type: z.literal("user.joined"), userId: z.string() }),
  z.looseObject({ type: z.literal("user.left"), userId: z.string() }),
]);
export type ServerFrame = z.infer<typeof ServerFrame>;
/** A server frame of one `type`. */
export type ServerFrameOf<T extends ServerFrame["type"]> = Extract<ServerFrame, { type: T }>;
