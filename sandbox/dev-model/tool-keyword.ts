/**
 * The development model calls a named tool on a keyword (issue 25 §4 tests): a prompt line
 * `/tool <name> <JSON arguments>` makes it call that tool with those arguments, and once the
 * tool's result is back the turn ends with `tool <name> answered: <result>`, so a test reads
 * what the tool returned to the agent from the transcript. Pure.
 */
export const TOOL_PATTERN = /^\s*\/tool ([A-Za-z0-9_-]+)(?: (\{.*\}))?\s*$/m;

export interface ToolKeywordMessage {
  role: string;
  content?: unknown;
}

export type ToolKeywordReply = { kind: "text"; text: string } | { kind: "tool_call"; name: string; arguments: Record<string, unknown> };

function toolResultText(message: ToolKeywordMessage): string {
  const { content } = message;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p: unknown) => (typeof p === "object" && p !== null && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : "")).join("\n");
  }
  return JSON.stringify(content ?? null);
}

/** The reply for a prompt with a `/tool` line, or null when the prompt has none. `after`: the messages after the prompt. */
export function toolKeywordReply(prompt: string, after: readonly ToolKeywordMessage[]): ToolKeywordReply | null {
  const match = TOOL_PATTERN.exec(prompt);
  if (!match?.[1]) return null;
  const name = match[1];
  const result = after.find((m) => m.role === "tool");
  if (result) return { kind: "text", text: `tool ${name} answered: ${toolResultText(result)}` };
  let args: Record<string, unknown> = {};
  if (match[2]) {
    try {
      const parsed: unknown = JSON.parse(match[2]);
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
    } catch {
      return { kind: "text", text: `tool ${name}: the arguments are not a JSON object` };
    }
  }
  return { kind: "tool_call", name, arguments: args };
}
