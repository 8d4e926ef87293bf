/**
 * Text the API accepts (issue 14 §4): every string a client sends is bounded, and only
 * printable. Two kinds:
 * - `singleLineText`: names, titles, paths, branches, ids. No control characters at all (C0,
 *   DEL, C1) and no invisible formatting characters that reorder or hide what a reader sees
 *   (bidi embeddings, overrides, isolates and marks, zero-width characters, word joiner, BOM,
 *   line and paragraph separators), so what every client shows is what was stored.
 * - `multiLineText`: prompts and instructions. Tab, newline and carriage return are allowed
 *   (code is pasted into prompts), every other control character is not; bidi marks are left
 *   alone (right-to-left languages use them in prose).
 * Neither accepts a lone UTF-16 surrogate (not encodable as the UTF-8 the table stores).
 */
import * as z from "zod";

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_EXCEPT_TAB_NEWLINE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;
const INVISIBLE_FORMATTING = /[\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why `value` is not printable single-line text, or null. */
export function singleLineProblem(value: string): string | null {
  if (CONTROL.test(value)) return "must be printable: control characters (NUL, newline, tab, ...) are not allowed";
  if (INVISIBLE_FORMATTING.test(value)) return "must be printable: invisible formatting characters (bidi controls, zero-width characters) are not allowed";
  if (LONE_SURROGATE.test(value)) return "must be valid Unicode text";
  return null;
}

/** Why `value` is not acceptable multi-line text, or null. */
export function multiLineProblem(value: string): string | null {
  if (CONTROL_EXCEPT_TAB_NEWLINE.test(value)) return "must be printable: control characters other than tab and newline are not allowed";
  if (LONE_SURROGATE.test(value)) return "must be valid Unicode text";
  return null;
}

/** `superRefine` callbacks for schemas that need more than the builders below (trimming, ...). */
export function refineSingleLine(value: string, ctx: z.RefinementCtx): void {
  const message = singleLineProblem(value);
  if (message) ctx.addIssue({ code: "custom", message });
}

export function refineMultiLine(value: string, ctx: z.RefinementCtx): void {
  const message = multiLineProblem(value);
  if (message) ctx.addIssue({ code: "custom", message });
}

/** Printable single-line text of 1..`max` characters. */
export function singleLineText(max: number) {
  return z.string().min(1).max(max, `must be at most ${max} characters`).superRefine(refineSingleLine);
}

/** Multi-line text (tab and newline allowed) of at most `max` characters. */
export function multiLineText(max: number) {
  return z.string().max(max, `must be at most ${max} characters`).superRefine(refineMultiLine);
}

/**
 * Why a workspace-relative path the API stores is unacceptable as text, or null: printable, at
 * most 1024 characters, 255 per segment, and no `.git` segment (any case), since the agent's
 * repositories keep their config and hooks there.
 */
export function workspacePathTextProblem(path: string): string | null {
  const text = singleLineProblem(path);
  if (text) return text;
  if (path.length > 1024) return "must be at most 1024 characters";
  const segments = path.split("/");
  if (segments.some((s) => s.length > 255)) return "each path segment must be at most 255 characters";
  if (segments.some((s) => s.toLowerCase() === ".git")) return "must not name a .git directory or anything inside one";
  return null;
}
