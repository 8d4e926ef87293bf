/**
 * OpenCode's permission requests as clients see them (`permission.asked`, issue 25 §3): one
 * mapping for the live event the relay translates and for the pending requests listed again
 * (`GET /permission`) when a client connects late (ws/handlers/send-init.ts) or a relay takes a
 * session over (relay.ts), so a question is never lost to a client that was not there when it was
 * asked. Metadata is bounded and secret-looking values redacted, as tool input is.
 */
import * as z from "zod";
import { clipToolValue } from "./agent-errors";

/** OpenCode asks to run a tool that its permission rules say needs approval (`permission.asked`). */
// A type (not an interface) so that a frame built from it is a plain record for the push port.
export type PermissionAsk = {
  permissionId: string;
  permission: string;
  patterns: string[];
  /** What may be approved for good with `always`. */
  always: string[];
  metadata: Record<string, unknown>;
  tool: { messageId: string; callId: string } | null;
};

/** OpenCode's `PermissionRequest` (the `permission.asked` event's properties and each item of `GET /permission`). */
export const OpenCodePermissionRequest = z.object({
  id: z.string(),
  sessionID: z.string().optional(),
  permission: z.string(),
  patterns: z.array(z.string()).default([]),
  always: z.array(z.string()).default([]),
  metadata: z.record(z.string(), z.unknown()).default({}),
  tool: z.object({ messageID: z.string(), callID: z.string() }).optional(),
});
export type OpenCodePermissionRequest = z.infer<typeof OpenCodePermissionRequest>;

export function permissionAskOf(p: OpenCodePermissionRequest): PermissionAsk {
  return {
    permissionId: p.id,
    permission: p.permission,
    patterns: p.patterns,
    always: p.always,
    metadata: clipToolValue(p.metadata) as Record<string, unknown>,
    tool: p.tool ? { messageId: p.tool.messageID, callId: p.tool.callID } : null,
  };
}
