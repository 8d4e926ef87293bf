/**
 * An in-memory `AgentClient` for flow tests on the instant provider (no OpenCode behind the
 * sandbox): records prompts per agent session and lets a test hold a turn busy.
 */
import type { AgentClient, AgentEndpoint, AgentEvent } from "../../functions/ports/agent-client";

export class ScriptedAgent implements AgentClient {
  readonly prompts: { baseUrl: string; authorization: string | null; agentSessionId: string; text: string }[] = [];
  readonly aborts: string[] = [];
  private readonly busy = new Set<string>();
  private counter = 0;

  ensureSession(_endpoint: AgentEndpoint, existingId?: string | null): Promise<string> {
    return Promise.resolve(existingId ?? `agent_${++this.counter}`);
  }
  promptAsync(endpoint: AgentEndpoint, agentSessionId: string, text: string): Promise<void> {
    this.prompts.push({ baseUrl: endpoint.url, authorization: endpoint.authorization, agentSessionId, text });
    return Promise.resolve();
  }
  abort(_endpoint: AgentEndpoint, agentSessionId: string): Promise<void> {
    this.aborts.push(agentSessionId);
    this.busy.delete(agentSessionId);
    return Promise.resolve();
  }
  isBusy(_endpoint: AgentEndpoint, agentSessionId: string): Promise<boolean> {
    return Promise.resolve(this.busy.has(agentSessionId));
  }
  setBusy(agentSessionId: string, busy: boolean): void {
    if (busy) this.busy.add(agentSessionId);
    else this.busy.delete(agentSessionId);
  }
  // eslint-disable-next-line require-yield
  async *events(): AsyncIterable<AgentEvent> {
    return;
  }
}
