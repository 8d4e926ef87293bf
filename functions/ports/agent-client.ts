/**
 * Agent client port: the coding agent's (OpenCode's) HTTP API and SSE event stream inside a
 * sandbox. One implementation (HTTP + SSE) serves the cloud and the local provider alike.
 */
export interface AgentEvent {
  type: string;
  properties: Record<string, unknown>;
}

export interface AgentClient {
  /** Creates a coding-agent session, or verifies that `existingId` still exists; returns its id. */
  ensureSession(baseUrl: string, existingId?: string | null): Promise<string>;
  /** Sends a prompt without waiting for the turn (`prompt_async`). */
  promptAsync(baseUrl: string, agentSessionId: string, text: string): Promise<void>;
  abort(baseUrl: string, agentSessionId: string): Promise<void>;
  /** True while the agent is working on a turn in that session (OpenCode `GET /session/status`). */
  isBusy(baseUrl: string, agentSessionId: string): Promise<boolean>;
  /** Streams `/event` until `signal` aborts or the stream ends. */
  events(baseUrl: string, signal: AbortSignal): AsyncIterable<AgentEvent>;
}
