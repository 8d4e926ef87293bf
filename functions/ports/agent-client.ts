/**
 * Agent client port: the coding agent's (OpenCode's) HTTP API and SSE event stream inside a
 * sandbox. One implementation (HTTP + SSE) serves the cloud and the local provider alike.
 */
import type { OpenCodePermissionRequest } from "../relay/permission-asks";

export interface AgentEvent {
  type: string;
  properties: Record<string, unknown>;
}

/**
 * Where a sandbox's agent answers and how to authenticate to it: OpenCode's base URL (the
 * provider's tunnel) and the `Authorization` header value its server password calls for
 * (sandbox/shared/access-token.ts `agentAuthorization`), or null for an agent without one.
 * Built by functions/agent/agent-endpoint.ts; the authorization is a credential and never
 * appears in an error, a log line or a stored record.
 */
export interface AgentEndpoint {
  url: string;
  authorization: string | null;
}

/** OpenCode's answers to a permission request: allow this call, allow its pattern for good, refuse. */
export const PERMISSION_RESPONSES = ["once", "always", "reject"] as const;
export type PermissionResponse = (typeof PERMISSION_RESPONSES)[number];

/** A user message to answer again, and the empty answer it replaces. */
export interface AnswerAgain {
  /** The first (empty) answer after the user message, reverted with everything after it; none: nothing to revert. */
  answerId?: string;
  userMessageId: string;
  /** The user message's text part, sent again with the same id and text. */
  partId: string;
  text: string;
  /** `provider/model` of the empty answer: the new one runs on the same model. */
  model?: string;
}

export interface AgentClient {
  /** Creates a coding-agent session, or verifies that `existingId` still exists; returns its id. */
  ensureSession(endpoint: AgentEndpoint, existingId?: string | null): Promise<string>;
  /**
   * Sends a prompt without waiting for the turn (`prompt_async`); `options.model`
   * (`provider/model`) runs this turn on that model instead of the configured one (failover).
   */
  promptAsync(endpoint: AgentEndpoint, agentSessionId: string, text: string, options?: { model?: string }): Promise<void>;
  /**
   * Asks for a user message's answer again (issue 25, relay/empty-turns.ts): reverts the session
   * to `answerId` (an empty answer: no text, no tool call, so no file change to undo), then sends
   * the user message again under its own message and part ids, so the agent's history keeps one
   * copy of it. Optional: an agent without it leaves empty answers as they are.
   */
  answerAgain?(endpoint: AgentEndpoint, agentSessionId: string, again: AnswerAgain): Promise<void>;
  /** Answers a permission request the agent raised (`permission.asked`, OpenCode `POST /permission/{id}/reply`). */
  replyPermission(endpoint: AgentEndpoint, permissionId: string, response: PermissionResponse): Promise<void>;
  /**
   * The permission requests the agent is waiting on in that session (OpenCode `GET /permission`,
   * filtered by session), as its `permission.asked` events carry them: for clients that were not
   * there when they were asked.
   */
  pendingPermissions(endpoint: AgentEndpoint, agentSessionId: string): Promise<OpenCodePermissionRequest[]>;
  abort(endpoint: AgentEndpoint, agentSessionId: string): Promise<void>;
  /** True while the agent is working on a turn in that session (OpenCode `GET /session/status`). */
  isBusy(endpoint: AgentEndpoint, agentSessionId: string): Promise<boolean>;
  /** Streams `/event` until `signal` aborts or the stream ends. */
  events(endpoint: AgentEndpoint, signal: AbortSignal): AsyncIterable<AgentEvent>;
}
