/**
 * Checks a frame the server sent against the contract (functions/contract/frames.ts) strictly:
 * it must parse, and every field it carries must be one the contract names (the contract's
 * schemas are open for clients, so the check for drift is here). Returns what is wrong, [] if nothing.
 */
import type * as z from "zod";
import { ServerFrame, SessionView } from "../../functions/contract/frames";

function extraKeys(value: unknown, shape: Record<string, unknown>, where: string): string[] {
  if (!value || typeof value !== "object") return [];
  return Object.keys(value)
    .filter((k) => !(k in shape))
    .map((k) => `${where}.${k} is not in the contract`);
}

/** What in a session view the contract's SessionView does not describe. */
export function sessionViewIssues(view: unknown, where = "session"): string[] {
  const parsed = SessionView.safeParse(view);
  if (!parsed.success) return parsed.error.issues.map((i) => `${where}.${i.path.join(".")}: ${i.message}`);
  return extraKeys(view, SessionView.shape, where);
}

/** What in a server frame the contract's ServerFrame union does not describe. */
export function serverFrameIssues(frame: unknown): string[] {
  const type = (frame as { type?: unknown } | null)?.type;
  const member = ServerFrame.options.find((o) => (o.shape.type as z.ZodLiteral).value === type);
  if (!member) return [`frame type ${JSON.stringify(type)} is not in the contract`];
  const parsed = member.safeParse(frame);
  if (!parsed.success) return parsed.error.issues.map((i) => `${String(type)}.${i.path.join(".")}: ${i.message}`);
  const issues = extraKeys(frame, member.shape, String(type));
  if (type === "init") {
    const init = frame as { session: unknown; data: unknown };
    issues.push(...sessionViewIssues(init.session, "init.session"));
    const data = (member.shape as Record<string, unknown>).data as z.ZodObject;
    issues.push(...extraKeys(init.data, data.shape, "init.data"));
  }
  return issues;
}
