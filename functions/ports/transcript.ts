/**
 * The persisted transcript (issue 5): every finalized message of a session, so it is readable
 * while the session is paused and after a sandbox is lost. Items live in the session's
 * partition (`MSG#<createdAt>#<messageId>`, store/table-layout.ts); `upsert` is idempotent per
 * agent message id, so two relays (or a relay catching up after a takeover) never duplicate one.
 */
import * as z from "zod";

export const TranscriptPart = z.object({
  partId: z.string(),
  type: z.enum(["text", "tool"]),
  text: z.string().optional(),
  tool: z.string().optional(),
  status: z.string().optional(),
  /** A tool call's arguments, and its output or error once it ended (bounded, redacted). */
  input: z.record(z.string(), z.unknown()).optional(),
  output: z.string().optional(),
  error: z.string().optional(),
});
export type TranscriptPart = z.infer<typeof TranscriptPart>;

export const TranscriptMessage = z.object({
  sessionId: z.string(),
  /** The agent's message id (OpenCode `msg_...`). */
  messageId: z.string(),
  /** `system`: a note of the control plane's own (a model failover), not something the agent said. */
  role: z.enum(["user", "assistant", "system"]),
  /** The message's full text (text parts joined). */
  text: z.string(),
  parts: z.array(TranscriptPart),
  /** When the agent created the message (ISO). Orders the transcript. */
  createdAt: z.iso.datetime(),
  completedAt: z.iso.datetime().nullable(),
  /** How an assistant message ended (`message.finalize`'s reason), and the error that ended it. */
  reason: z.enum(["end_turn", "error", "canceled"]).optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  /** Who sent a user message: the user id of the prompt's author. */
  authorId: z.string().optional(),
});
export type TranscriptMessage = z.infer<typeof TranscriptMessage>;

export interface TranscriptStore {
  /** Insert or replace (same session + createdAt + messageId = same item). */
  upsert(message: TranscriptMessage): Promise<void>;
  /** Oldest first. */
  list(sessionId: string, options: { limit: number; cursor?: string | null }): Promise<{ items: TranscriptMessage[]; nextCursor: string | null }>;
}
