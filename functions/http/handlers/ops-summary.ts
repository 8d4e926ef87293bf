/**
 * `GET /v1/ops/summary` *admin* (issue 19), served by the local runtime only (infra/local/runtime.ts):
 * the key operational figures from the in-process metrics (observability/ops-summary.ts), so a
 * developer sees them without AWS. In AWS the dashboards show them (infra/ops-stack.ts). A member
 * gets 403.
 */
import { opsSummary, type OpsSources } from "../../observability/ops-summary";
import { httpRoute } from "../http-handler";
import { requireAdmin } from "../session-access";

export const OPS_SUMMARY_ROUTE = { id: "GetOpsSummary", method: "GET", path: "/v1/ops/summary" } as const;

export function makeOpsSummaryHandler(sources: () => Omit<OpsSources, "now">) {
  return httpRoute({ name: OPS_SUMMARY_ROUTE.id, auth: true }, async ({ principal }, deps) => {
    requireAdmin(principal);
    return { status: 200, body: { summary: opsSummary({ ...sources(), now: deps.now() }) } };
  });
}
