/**
 * The HTTP API route table: one source for the CDK stack (one Lambda function per route, with
 * the table access it needs) and for the local runtime (which serves the same handlers).
 */
import type { HttpDeps, HttpHandler } from "./http-handler";
import { makeCreateSessionHandler } from "./handlers/create-session";
import { makeGetSessionHandler } from "./handlers/get-session";
import { makeHealthHandler } from "./handlers/health";
import { makeHeartbeatHandler } from "./handlers/heartbeat";
import { makeListSessionsHandler } from "./handlers/list-sessions";

export type TableAccess = "none" | "read" | "readwrite";

export interface HttpRouteDefinition {
  /** Construct id and function name stem. */
  id: string;
  method: "GET" | "POST" | "DELETE";
  /** API Gateway route path; `{id}` is a path parameter. */
  path: string;
  /** Handler module, relative to the repository root (the Lambda bundle's entry). */
  entry: string;
  make: (deps: HttpDeps) => HttpHandler;
  /** Least privilege: what the function may do on the table (token lookups are reads). */
  tableAccess: TableAccess;
}

export const HTTP_ROUTES: readonly HttpRouteDefinition[] = [
  { id: "Health", method: "GET", path: "/v1/health", entry: "functions/http/handlers/health.ts", make: makeHealthHandler, tableAccess: "none" },
  { id: "CreateSession", method: "POST", path: "/v1/sessions", entry: "functions/http/handlers/create-session.ts", make: makeCreateSessionHandler, tableAccess: "readwrite" },
  { id: "ListSessions", method: "GET", path: "/v1/sessions", entry: "functions/http/handlers/list-sessions.ts", make: makeListSessionsHandler, tableAccess: "read" },
  { id: "GetSession", method: "GET", path: "/v1/sessions/{id}", entry: "functions/http/handlers/get-session.ts", make: makeGetSessionHandler, tableAccess: "read" },
  { id: "Heartbeat", method: "POST", path: "/v1/sessions/{id}/heartbeat", entry: "functions/http/handlers/heartbeat.ts", make: makeHeartbeatHandler, tableAccess: "readwrite" },
];

/** Matches a concrete path against a route path; returns the path parameters or null. */
export function matchRoutePath(routePath: string, actual: string): Record<string, string> | null {
  const want = routePath.split("/");
  const got = actual.split("/");
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i] ?? "";
    const g = got[i] ?? "";
    if (w.startsWith("{") && w.endsWith("}")) {
      if (!g) return null;
      params[w.slice(1, -1)] = decodeURIComponent(g);
    } else if (w !== g) {
      return null;
    }
  }
  return params;
}
