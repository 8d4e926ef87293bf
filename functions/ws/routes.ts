/**
 * The WebSocket API route table: one source for the CDK stack (one function per route) and the
 * local WebSocket server (which builds the same events for the same handlers). `SendInit` is
 * not a route: `$connect` invokes it asynchronously once the connection is open.
 */
import type { FlowName } from "../ports/flow-runner";
import type { WsDeps, WsEvent, WsResult } from "./ws-deps";
import { makeConnectHandler } from "./handlers/connect";
import { makeDisconnectHandler } from "./handlers/disconnect";
import { makeMessageHandler } from "./handlers/message";

export interface WsRouteDefinition {
  id: string;
  routeKey: "$connect" | "$disconnect" | "$default";
  entry: string;
  make: (deps: WsDeps) => (event: WsEvent) => Promise<WsResult>;
  /** Lifecycle flows the route starts (`states:StartExecution`): connect and prompts wake sessions. */
  startsFlows: readonly FlowName[];
  /** Arms lifecycle schedules (the idle check when the last client leaves). */
  armsSchedules?: boolean;
  /** Calls the agent in the session's sandbox (prompt delivery, cancel): needs the sandbox access key for its password. */
  agentAccess?: boolean;
  /** Closes connections (`DeleteConnection`): a frame from a revoked or expired API token's connection. */
  closesConnections?: boolean;
}

export const WS_ROUTES: readonly WsRouteDefinition[] = [
  { id: "WsConnect", routeKey: "$connect", entry: "functions/ws/handlers/connect.ts", make: makeConnectHandler, startsFlows: ["ensure-runtime"] },
  { id: "WsDisconnect", routeKey: "$disconnect", entry: "functions/ws/handlers/disconnect.ts", make: makeDisconnectHandler, startsFlows: [], armsSchedules: true },
  { id: "WsMessage", routeKey: "$default", entry: "functions/ws/handlers/message.ts", make: makeMessageHandler, startsFlows: ["ensure-runtime"], agentAccess: true, closesConnections: true },
];

export const SEND_INIT_ENTRY = "functions/ws/handlers/send-init.ts";
