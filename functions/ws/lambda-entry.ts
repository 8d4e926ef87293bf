/**
 * Lambda entry for the WebSocket handlers: the flow dependencies (cold start, once) plus token
 * lookup, the transcript and the asynchronous send-init invocation. The push adapter points at
 * the WebSocket API's management endpoint (`WS_MANAGEMENT_ENDPOINT`).
 */
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { loadConfig } from "../config/config";
import { awsFlowDeps } from "../flows/lambda-entry";
import { createDocumentClient } from "../store/dynamo-client";
import { DynamoApiTokenStore } from "../store/dynamo-session-store";
import { DynamoTranscriptStore } from "../store/dynamo-transcript";
import { DynamoWsTicketStore } from "../store/dynamo-ws-tickets";
import type { WsDeps, WsEvent, WsResult } from "./ws-deps";

let deps: WsDeps | undefined;

export function awsWsDeps(): WsDeps {
  if (!deps) {
    const config = loadConfig();
    const doc = createDocumentClient(config.DYNAMODB_ENDPOINT ? { endpoint: config.DYNAMODB_ENDPOINT } : {});
    const lambda = new LambdaClient({});
    const sendInitFunction = process.env.SEND_INIT_FUNCTION_NAME;
    deps = {
      ...awsFlowDeps(),
      tokens: new DynamoApiTokenStore(doc, config.TABLE_NAME),
      wsTickets: new DynamoWsTicketStore(doc, config.TABLE_NAME),
      transcript: new DynamoTranscriptStore(doc, config.TABLE_NAME),
      afterConnect: async (request) => {
        if (!sendInitFunction) throw new Error("invalid configuration: SEND_INIT_FUNCTION_NAME is not set");
        // Asynchronous: the connection opens only once $connect has returned.
        await lambda.send(new InvokeCommand({ FunctionName: sendInitFunction, InvocationType: "Event", Payload: Buffer.from(JSON.stringify(request)) }));
      },
    };
  }
  return deps;
}

export function wsEntry(make: (deps: WsDeps) => (event: WsEvent) => Promise<WsResult>): (event: WsEvent) => Promise<WsResult> {
  let handler: ((event: WsEvent) => Promise<WsResult>) | undefined;
  return (event) => {
    handler ??= make(awsWsDeps());
    return handler(event);
  };
}

/** A lazily built handler for non-route functions (send-init). */
export function lazyEntry<E, R>(make: (deps: WsDeps) => (event: E) => Promise<R>): (event: E) => Promise<R> {
  let handler: ((event: E) => Promise<R>) | undefined;
  return (event) => {
    handler ??= make(awsWsDeps());
    return handler(event);
  };
}
