/**
 * Client push over the API Gateway Management API: `PostToConnection` with the message as JSON,
 * `DeleteConnection` to close one (a revoked API token's connections).
 * A connection that is gone (410) is reported as `gone` so the caller deletes its connection
 * item; every other error propagates.
 */
import { DeleteConnectionCommand, GoneException, PostToConnectionCommand, type ApiGatewayManagementApiClient } from "@aws-sdk/client-apigatewaymanagementapi";
import type { ClientPush, PushOutcome } from "../../ports/client-push";

const encoder = new TextEncoder();

function isGone(err: unknown): boolean {
  return err instanceof GoneException || (err as { name?: string } | null)?.name === "GoneException";
}

export class ApiGatewayClientPush implements ClientPush {
  /** The client's endpoint is the WebSocket API's management URL (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`). */
  constructor(private readonly client: ApiGatewayManagementApiClient) {}

  async send(connectionId: string, message: { type: string } & Record<string, unknown>): Promise<PushOutcome> {
    try {
      await this.client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: encoder.encode(JSON.stringify(message)) }));
      return "sent";
    } catch (err) {
      if (isGone(err)) return "gone";
      throw err;
    }
  }

  async disconnect(connectionId: string): Promise<PushOutcome> {
    try {
      await this.client.send(new DeleteConnectionCommand({ ConnectionId: connectionId }));
      return "sent";
    } catch (err) {
      if (isGone(err)) return "gone";
      throw err;
    }
  }
}
