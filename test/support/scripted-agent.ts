/**
 * An in-memory `AgentClient` for flow tests on the instant provider (no OpenCode behind the
 * sandbox): records prompts per agent session and lets a test hold a turn busy.
 */
import type { AgentClient, AgentEvent } from "../../functions/ports/agent-client";

export class ScriptedAgent implements AgentClient {
  readonly prompts: { baseUrl: string; agentSessionId: string; text: string }[] = [];
  readonly aborts: string[] = [];
  private readonly busy = new Set<string>();
  private counter = 0;

  ensureSession(_baseUrl: string, existingId?: string | null): Promise<string> {
    return Promise.resolve(existingId ?? `agent_${++this.counter}`);
  }
  promptAsync(baseUrl: string, agentSessionId: string, text: string): Promise<void> {
    this.prompts.push({ baseUrl, agentSessionId, text });
    return Promise.resolve();
  }
  abort(_baseUrl: string, agentSessionId: string): Promise<void> {
    this.aborts.push(agentSessionId);
    this.busy.delete(agentSessionId);
    return Promise.resolve();
  }
  isBusy(_baseUrl: string, agentSessionId: string): Promise<boolean> {
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
