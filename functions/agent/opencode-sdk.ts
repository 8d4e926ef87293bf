/**
 * OpenCode's generated client (`@opencode-ai/sdk`), built for functions/agent/opencode-agent-client.ts,
 * which imports this module dynamically on its first call: building a client creates fetch
 * `Headers`, which loads Node's fetch implementation, so a function that never calls the agent
 * evaluates neither (issue 13: cold import). The only module that imports the SDK's values.
 */
import { OpencodeClient } from "@opencode-ai/sdk/v2/client";
import { createClient, type Client } from "@opencode-ai/sdk/v2/gen/client";

/**
 * `http` is the low-level client (`/event` is read through it as a raw stream, see
 * `OpenCodeAgentClient.events`), `sdk` the typed one over it.
 */
export interface OpenCodeSdk {
  http: Client;
  sdk: OpencodeClient;
}

export function newOpenCodeSdk(): OpenCodeSdk {
  const http = createClient();
  return { http, sdk: new OpencodeClient({ client: http }) };
}
