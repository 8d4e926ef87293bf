/**
 * Reads a coding-agent session's stored messages (OpenCode `GET /session/{id}/message`): the
 * relay's catch-up source after a (re)connect or a takeover, so a message that finished while no
 * relay watched still reaches the transcript. Kept beside the relay because nothing else needs
 * it; failures are `AgentUnavailableError`s that never hold the base URL nor the endpoint's
 * authorization (sent as the `Authorization` header when the endpoint has one), mapped as the
 * agent client maps them (functions/agent/opencode-agent-client.ts `OpenCodeApi`).
 */
import * as z from "zod";
import { OpenCodeApi } from "../agent/opencode-agent-client";
import type { AgentEndpoint } from "../ports/agent-client";

export const AgentMessagePart = z.object({
  id: z.string(),
  type: z.string(),
  text: z.string().optional(),
  synthetic: z.boolean().optional(),
  ignored: z.boolean().optional(),
  tool: z.string().optional(),
  state: z
    .object({
      status: z.string().optional(),
      title: z.string().optional(),
      input: z.record(z.string(), z.unknown()).optional(),
      output: z.string().optional(),
      error: z.string().optional(),
    })
    .optional(),
});
export type AgentMessagePart = z.infer<typeof AgentMessagePart>;

/** One stored message as OpenCode lists it: `{info, parts}`; fields the relay does not use pass through unchecked. */
export const AgentMessage = z.object({
  info: z.object({
    id: z.string(),
    role: z.string(),
    time: z.object({ created: z.number(), completed: z.number().optional() }),
    /** Assistant messages: the user message they answer, and their model. */
    parentID: z.string().optional(),
    providerID: z.string().optional(),
    modelID: z.string().optional(),
    /** Why an assistant message failed (OpenCode's error object, classified by ./agent-errors.ts). */
    error: z.unknown().optional(),
  }),
  parts: z.array(AgentMessagePart),
});
export type AgentMessage = z.infer<typeof AgentMessage>;

export interface AgentMessageSource {
  /** The session's messages, oldest first. */
  listMessages(endpoint: AgentEndpoint, agentSessionId: string): Promise<AgentMessage[]>;
}

/** `AgentMessageSource` over OpenCode's HTTP API (the same for every provider), through the SDK like the agent client. */
export class OpenCodeMessageReader implements AgentMessageSource {
  private readonly api: OpenCodeApi;

  constructor(options: { requestTimeoutMs?: number } = {}) {
    this.api = new OpenCodeApi(options.requestTimeoutMs);
  }

  async listMessages(endpoint: AgentEndpoint, agentSessionId: string): Promise<AgentMessage[]> {
    const { api } = this;
    const answer = await api.call("listMessages", endpoint, (o, { sdk }) => sdk.session.messages({ sessionID: agentSessionId }, o));
    return api.parse("listMessages", answer, z.array(AgentMessage));
  }
}
