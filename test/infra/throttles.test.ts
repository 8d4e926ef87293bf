/**
 * Throttles and reserved concurrency in the stack (issue 14 §7): the HTTP and WebSocket stages
 * keep their stage-wide default and add tighter route settings on the expensive routes (each
 * naming a route the stage depends on, so the first deployment has it); the functions that start
 * sandboxes or sweep have reserved concurrency, which a context flag turns off.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { WS_ROUTES } from "../../functions/ws/routes";
import { DEFAULT_STAGE_THROTTLE, HTTP_ROUTE_THROTTLES, RESERVED_CONCURRENCY, WS_ROUTE_THROTTLES } from "../../infra/api-throttles";
import type { ControlPlaneStack } from "../../infra/control-plane-stack";
import { stackQueries, synthWithoutBundling, type Resources } from "./stack-queries";

let stack: ControlPlaneStack;
let resources: Resources;
let outdir: string;
let q: ReturnType<typeof stackQueries>;

beforeAll(() => {
  ({ stack, resources, dir: outdir } = synthWithoutBundling());
  q = stackQueries({ stack, resources });
});
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

interface StageProps {
  StageName: string;
  ApiId: unknown;
  DefaultRouteSettings: { ThrottlingRateLimit: number; ThrottlingBurstLimit: number };
  RouteSettings?: Record<string, { ThrottlingRateLimit: number; ThrottlingBurstLimit: number }>;
}

function stageOf(apiLogicalId: string): { id: string; props: StageProps; dependsOn: string[] } {
  const found = Object.entries(resources).filter(
    ([, r]) => r.Type === "AWS::ApiGatewayV2::Stage" && JSON.stringify(r.Properties.ApiId) === JSON.stringify({ Ref: apiLogicalId }),
  );
  expect(found).toHaveLength(1);
  const [id, r] = found[0] as [string, Resources[string]];
  return { id, props: r.Properties as unknown as StageProps, dependsOn: r.DependsOn ?? [] };
}

function routeLogicalIds(apiLogicalId: string): Map<string, string> {
  return new Map(
    Object.entries(resources)
      .filter(([, r]) => r.Type === "AWS::ApiGatewayV2::Route" && JSON.stringify(r.Properties.ApiId) === JSON.stringify({ Ref: apiLogicalId }))
      .map(([id, r]) => [r.Properties.RouteKey as string, id]),
  );
}

describe("HTTP API stage", () => {
  it("keeps the stage-wide default and throttles each expensive route tighter, by its route key", () => {
    const api = q.logicalIdOf(stack.httpApi);
    const stage = stageOf(api);
    expect(stage.props.DefaultRouteSettings).toMatchObject({ ThrottlingRateLimit: DEFAULT_STAGE_THROTTLE.rateLimit, ThrottlingBurstLimit: DEFAULT_STAGE_THROTTLE.burstLimit });
    const expected = Object.fromEntries(
      Object.entries(HTTP_ROUTE_THROTTLES).map(([id, t]) => {
        const route = HTTP_ROUTES.find((r) => r.id === id);
        if (!route) throw new Error(`HTTP_ROUTE_THROTTLES names unknown route ${id}`);
        return [`${route.method} ${route.path}`, { ThrottlingRateLimit: t.rateLimit, ThrottlingBurstLimit: t.burstLimit }];
      }),
    );
    expect(stage.props.RouteSettings).toEqual(expected);
    expect(stage.props.RouteSettings?.["POST /v1/sessions"]?.ThrottlingRateLimit).toBeLessThan(DEFAULT_STAGE_THROTTLE.rateLimit);
    expect(stage.props.RouteSettings?.["POST /v1/sessions/{id}/prompts"]?.ThrottlingRateLimit).toBeLessThan(DEFAULT_STAGE_THROTTLE.rateLimit);
    // Every throttled route exists before the stage deploys.
    const routes = routeLogicalIds(api);
    for (const key of Object.keys(expected)) expect(stage.dependsOn).toContain(routes.get(key));
  });
});

describe("WebSocket stage", () => {
  it("throttles $connect (it provisions sandboxes) tighter than the stage; frames keep the stage's throttle", () => {
    const api = q.logicalIdOf(stack.webSocketApi);
    const stage = stageOf(api);
    expect(stage.props.DefaultRouteSettings).toMatchObject({ ThrottlingRateLimit: DEFAULT_STAGE_THROTTLE.rateLimit });
    expect(Object.keys(WS_ROUTE_THROTTLES).every((k) => WS_ROUTES.some((r) => r.routeKey === k))).toBe(true);
    expect(stage.props.RouteSettings).toEqual(
      Object.fromEntries(Object.entries(WS_ROUTE_THROTTLES).map(([k, t]) => [k, { ThrottlingRateLimit: t.rateLimit, ThrottlingBurstLimit: t.burstLimit }])),
    );
    expect(stage.props.RouteSettings?.$connect?.ThrottlingRateLimit).toBeLessThan(DEFAULT_STAGE_THROTTLE.rateLimit);
    expect(stage.props.RouteSettings?.$default).toBeUndefined();
  });
});

describe("reserved concurrency", () => {
  it("is set on the functions that create sessions, start flows for prompts and resumes, and sweep; nowhere else", () => {
    const reserved = Object.fromEntries(
      Object.keys(stack.functions)
        .map((id) => [id, resources[q.logicalIdOf(stack.functions[id])]?.Properties.ReservedConcurrentExecutions] as const)
        .filter(([, n]) => n !== undefined),
    );
    expect(reserved).toEqual(RESERVED_CONCURRENCY);
    expect(reserved.Sweeper).toBe(1);
  });

  it("is off with the reservedConcurrency=false context", () => {
    const off = synthWithoutBundling({ reservedConcurrency: "false" });
    try {
      const withReserved = Object.values(off.resources).filter((r) => r.Type === "AWS::Lambda::Function" && r.Properties.ReservedConcurrentExecutions !== undefined);
      expect(withReserved).toEqual([]);
      // The throttles stay.
      const stages = Object.values(off.resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Stage");
      expect(stages.every((s) => s.Properties.RouteSettings !== undefined)).toBe(true);
    } finally {
      rmSync(off.dir, { recursive: true, force: true });
    }
  });
});
