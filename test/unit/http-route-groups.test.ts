/**
 * Route groups (routes.ts `group`): one Lambda serves a family of routes and dispatches on the
 * route key. Each group's entry maps exactly its routes to the route table's own handlers, so a
 * route added to a group without its entry (or the other way round) fails here, not as a 404 in AWS.
 */
import { describe, expect, it } from "vitest";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { lambdaRouteGroup } from "../../functions/http/lambda-entry";

const groups = [...new Set(HTTP_ROUTES.flatMap((r) => (r.group ? [r.group] : [])))];

describe("HTTP route groups", () => {
  it("exist (the stack stays under CloudFormation's 500 resources with them)", () => {
    expect(groups.sort()).toEqual(["Org", "Prebuilds", "Repos", "SandboxAgentTools"]);
  });

  for (const group of groups) {
    it(`${group}: one entry, mapping exactly the group's route keys to their handlers`, async () => {
      const routes = HTTP_ROUTES.filter((r) => r.group === group);
      const entries = new Set(routes.map((r) => r.entry));
      expect(entries.size).toBe(1);
      const mod = (await import(`../../${[...entries][0]}`)) as { ROUTES: Record<string, unknown>; handler: unknown };
      expect(typeof mod.handler).toBe("function");
      expect(Object.keys(mod.ROUTES).sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
      for (const r of routes) expect(mod.ROUTES[`${r.method} ${r.path}`], r.id).toBe(r.make);
    });
  }

  it("a route key outside the group is a 404, built without touching the runtime", async () => {
    const handler = lambdaRouteGroup({});
    const res = await handler({ routeKey: "GET /v1/nothing" } as Parameters<typeof handler>[0], {} as Parameters<typeof handler>[1]);
    expect(res.statusCode).toBe(404);
    expect(JSON.parse(String(res.body))).toEqual({ error: { code: "not_found", message: "no route GET /v1/nothing" } });
  });
});
