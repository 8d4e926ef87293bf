/**
 * Reads a coding-agent session's stored messages (OpenCode `GET /session/{id}/message`): the
 * relay's catch-up source after a (re)connect or a takeover, so a message that finished while no
 * relay watched still reaches the transcript. Kept beside the relay because nothing else needs
 * it; failures are `AgentUnavailableError`s that never hold the base URL nor the endpoint's
 * authorization (sent as the `Authorization` header when the endpoint has one).
 */
import { z } from "zod";
import { AgentUnavailableError } from "../domain/errors";
import { redactSecrets } from "../observability/redact-secrets";
import { withAuthorization } from "../agent/opencode-agent-client";
import type { AgentEndpoint } from "../ports/agent-client";

export const AgentMessagePart = z.object({
  id: z.string(),
  type: z.string(),
  text: z.string().optional(),
  synthetic: z.boolean().optional(),
  ignored: z.boolean().optional(),
  tool: z.string().optional(),
  state: z.object({ status: z.string().optional(), title: z.string().optional() }).optional(),
});
export type AgentMessagePart = z.infer<typeof AgentMessagePart>;

/** One stored message as OpenCode lists it: `{info, parts}`; fields the relay does not use pass through unchecked. */
export const AgentMessage = z.object({
  info: z.object({
    id: z.string(),
    role: z.string(),
    time: z.object({ created: z.number(), completed: z.number().optional() }),
  }),
  parts: z.array(AgentMessagePart),
});
export type AgentMessage = z.infer<typeof AgentMessage>;

export interface AgentMessageSource {
  /** The session's messages, oldest first. */
  listMessages(endpoint: AgentEndpoint, agentSessionId: string): Promise<AgentMessage[]>;
}

const BODY_EXCERPT = 300;

/** `AgentMessageSource` over OpenCode's HTTP API (the same for every provider). */
export class OpenCodeMessageReader implements AgentMessageSource {
  constructor(private readonly options: { requestTimeoutMs?: number } = {}) {}

  async listMessages(endpoint: AgentEndpoint, agentSessionId: string): Promise<AgentMessage[]> {
    const context = { operation: "listMessages" };
    let base: URL;
    try {
      base = new URL(endpoint.url);
    } catch {
      throw new AgentUnavailableError("OpenCode listMessages failed: the base URL is not a URL", { context });
    }
    const url = new URL(`${base.pathname.replace(/\/+$/, "")}/session/${encodeURIComponent(agentSessionId)}/message`, base);
    let status: number;
    let text: string;
    try {
      const res = await fetch(url, { headers: withAuthorization({ accept: "application/json" }, endpoint), signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 10_000) });
      status = res.status;
      text = await res.text();
    } catch (err) {
      const name = err instanceof Error ? err.name : "Error";
      // Only the error's name: fetch messages can carry the request URL.
      throw new AgentUnavailableError(`OpenCode listMessages failed: ${name === "TimeoutError" ? "no answer in time" : "unreachable"}`, {
        retryable: true,
        context: { ...context, errorName: name },
      });
    }
    if (status < 200 || status >= 300) {
      const excerpt = redactSecrets(text.slice(0, BODY_EXCERPT)).trim();
      throw new AgentUnavailableError(`OpenCode listMessages failed: HTTP ${status}${excerpt ? `: ${excerpt}` : ""}`, {
        retryable: status >= 500,
        context: { ...context, httpStatus: status },
      });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    const parsed = z.array(AgentMessage).safeParse(json);
    if (!parsed.success) {
      throw new AgentUnavailableError(`OpenCode listMessages failed: unexpected response: ${redactSecrets(text.slice(0, BODY_EXCERPT)).trim()}`, {
        context: { ...context, httpStatus: status },
      });
    }
    return parsed.data;
  }
}
