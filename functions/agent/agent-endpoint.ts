/**
 * The agent endpoint of a session's sandbox (ports/agent-client.ts `AgentEndpoint`): its OpenCode
 * URL plus the basic auth OpenCode requires there. Every sandbox of a session runs OpenCode with
 * the password derived from the session's sandbox key (sandbox/shared/access-token.ts), so the
 * control plane derives the same one from its keyring: nothing is stored.
 */
import { agentAuthorization, deriveAgentPassword } from "../../sandbox/shared/access-token";
import type { SandboxKeyring } from "../config/sandbox-keyring";
import type { AgentEndpoint } from "../ports/agent-client";

export async function agentEndpoint(keys: SandboxKeyring, sessionId: string, url: string): Promise<AgentEndpoint> {
  return { url, authorization: agentAuthorization(deriveAgentPassword(await keys.sandboxKey(sessionId))) };
}

/**
 * The endpoint of an agent whose sandbox was created with `sandboxKey` (the providers' readiness
 * probe, which has the create call's env vars rather than the keyring); no key, no password.
 */
export function agentEndpointForKey(url: string, sandboxKey: string | undefined | null): AgentEndpoint {
  return { url, authorization: sandboxKey ? agentAuthorization(deriveAgentPassword(sandboxKey)) : null };
}
