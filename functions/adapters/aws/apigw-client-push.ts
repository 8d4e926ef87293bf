/**
 * Client push over the API Gateway Management API: `PostToConnection` with the message as JSON,
 * `DeleteConnection` to close one (a revoked API token's connections).
 * A connection that is gone (410) is reported as `gone` so the caller deletes its connection
 * item; every other error propagates. The SDK is loaded on the first push (./sdk-client.ts).
 */
import type { ApiGatewayManagementApiClient } from "@aws-sdk/client-apigatewaymanagementapi";
import type { ClientPush, PushOutcome } from "../../ports/client-push";
import { hasErrorName, onFirstUse, type ClientFactory } from "./sdk-client";

const encoder = new TextEncoder();

const sdk = () => import("@aws-sdk/client-apigatewaymanagementapi");

/** A management API client for `endpoint`, its SDK loaded by this call. */
export async function apiGatewayManagementClient(endpoint: string): Promise<ApiGatewayManagementApiClient> {
  return new (await sdk()).ApiGatewayManagementApiClient({ endpoint });
}

function isGone(err: unknown): boolean {
  return hasErrorName(err, "GoneException");
}

export class ApiGatewayClientPush implements ClientPush {
  private readonly client: () => Promise<ApiGatewayManagementApiClient>;

  /** The client's endpoint is the WebSocket API's management URL (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`). */
  constructor(client: ClientFactory<ApiGatewayManagementApiClient>) {
    this.client = onFirstUse(client);
  }

  async send(connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    const [client, { PostToConnectionCommand }] = await Promise.all([this.client(), sdk()]);
    try {
      await client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: encoder.encode(JSON.stringify(message)) }));
      return "sent";
    } catch (err) {
      if (isGone(err)) return "gone";
      throw err;
    }
  }

  async disconnect(connectionId: string): Promise<PushOutcome> {
    const [client, { DeleteConnectionCommand }] = await Promise.all([this.client(), sdk()]);
    try {
      await client.send(new DeleteConnectionCommand({ ConnectionId: connectionId }));
      return "sent";
    } catch (err) {
      if (isGone(err)) return "gone";
      throw err;
    }
  }
}
