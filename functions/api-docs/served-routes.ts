/**
 * Every HTTP route the API serves, from the route tables themselves (the root stack's, Slack's,
 * the automations', this document's): what the OpenAPI document holds, exactly (functions/contract/openapi.ts).
 */
import type { ServedRoute } from "../contract/openapi";
import { AUTOMATION_ROUTES } from "../automations/route-table";
import { HTTP_ROUTES } from "../http/routes";
import { SLACK_ACK_ROUTES, SLACK_WORKSPACE_ROUTES } from "../slack/routes";
import { API_DOC_ROUTES } from "./routes";

export function servedRoutes(): ServedRoute[] {
  return [...HTTP_ROUTES, ...SLACK_ACK_ROUTES, ...SLACK_WORKSPACE_ROUTES, ...AUTOMATION_ROUTES, ...API_DOC_ROUTES].map((r) => ({ method: r.method, path: r.path }));
}
