/**
 * An in-memory `AgentClient` for flow tests on the instant provider (no OpenCode behind the
 * sandbox): records prompts per agent session and lets a test hold a turn busy.
 */
import type { AgentClient, AgentEndpoint, AgentEvent } from "../../functions/ports/agent-client";
import type { OpenCodePermissionRequest } from "../../functions/relay/permission-asks";

export class ScriptedAgent implements AgentClient {
  readonly prompts: { baseUrl: string; authorization: string | null; agentSessionId: string; text: string }[] = [];
  readonly aborts: string[] = [];
  /** How many times each agent session's status was asked. */
  readonly busyChecks = new Map<string, number>();
  private readonly busy = new Set<string>();
  /** Busy sessions whose turn ends after this many more status checks. */
  private readonly checksLeft = new Map<string, number>();
  private counter = 0;

  ensureSession(_endpoint: AgentEndpoint, existingId?: string | null): Promise<string> {
    return Promise.resolve(existingId ?? `agent_${++this.counter}`);
  }
  promptAsync(endpoint: AgentEndpoint, agentSessionId: string, text: string): Promise<void> {
    this.prompts.push({ baseUrl: endpoint.url, authorization: endpoint.authorization, agentSessionId, text });
    return Promise.resolve();
  }
  readonly permissionReplies: { permissionId: string; response: string }[] = [];
  replyPermission(_endpoint: AgentEndpoint, permissionId: string, response: string): Promise<void> {
    this.permissionReplies.push({ permissionId, response });
    return Promise.resolve();
  }
  /** Permission requests the agent waits on, by agent session (OpenCode `GET /permission`). */
  readonly pending = new Map<string, OpenCodePermissionRequest[]>();
  pendingPermissions(_endpoint: AgentEndpoint, agentSessionId: string): Promise<OpenCodePermissionRequest[]> {
    return Promise.resolve(this.pending.get(agentSessionId) ?? []);
  }
  abort(_endpoint: AgentEndpoint, agentSessionId: string): Promise<void> {
    this.aborts.push(agentSessionId);
    this.busy.delete(agentSessionId);
    return Promise.resolve();
  }
  isBusy(_endpoint: AgentEndpoint, agentSessionId: string): Promise<boolean> {
    this.busyChecks.set(agentSessionId, (this.busyChecks.get(agentSessionId) ?? 0) + 1);
    const left = this.checksLeft.get(agentSessionId);
    if (left === 0) this.setBusy(agentSessionId, false);
    else if (left !== undefined) this.checksLeft.set(agentSessionId, left - 1);
    return Promise.resolve(this.busy.has(agentSessionId));
  }
  /** `checks`: the turn ends by itself once its status has been asked that many times (busy each time). */
  setBusy(agentSessionId: string, busy: boolean, options: { checks?: number } = {}): void {
    this.checksLeft.delete(agentSessionId);
    if (busy) this.busy.add(agentSessionId);
    else this.busy.delete(agentSessionId);
    if (busy && options.checks !== undefined) this.checksLeft.set(agentSessionId, options.checks);
  }
  // eslint-disable-next-line require-yield
  async *events(): AsyncIterable<AgentEvent> {
    return;
  }
}
