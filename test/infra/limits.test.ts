/**
 * Limits that must nest, read from the synthesized template (function timeouts, state machine
 * definitions and their TimeoutSeconds) and from the code's own constants (lease TTL default,
 * heartbeat fraction, boot exec bound, agent request deadline). Changing one side without the
 * other fails here, not in production:
 *
 * - the flow lease outlives the gap between two renewals (Begin, then every step renews it every
 *   TTL x LEASE_HEARTBEAT_FRACTION while it runs; between steps there is a retry backoff and a
 *   cold start);
 * - the provision step's Lambda outlives the boot exec it waits for, with room to create the
 *   sandbox before and terminate it after;
 * - each state machine's TimeoutSeconds covers its worst path: every Task at its Lambda timeout
 *   for every attempt its retriers allow (invoke-level `Lambda.*` errors fail at invoke time and
 *   are not counted at full timeout), plus every backoff;
 * - the prompt route outlives the agent requests it makes, and answers within the HTTP API's
 *   integration timeout.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_REQUEST_TIMEOUT_MS } from "../../functions/agent/opencode-agent-client";
import { parseConfig } from "../../functions/config/config";
import { LEASE_HEARTBEAT_FRACTION } from "../../functions/flows/step";
import { FLOW_STEPS, stepArnVariable } from "../../functions/flows/steps";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { BOOT_EXEC_TIMEOUT_MS } from "../../functions/providers/sandbox-boot";
import { HTTP_INTEGRATION_TIMEOUT_SECONDS, type ControlPlaneStack } from "../../infra/control-plane-stack";
import { deployableFlows } from "../../infra/lifecycle-flows";
import { stackQueries, synthWithoutBundling, type Resources } from "./stack-queries";

interface Retrier {
  ErrorEquals: string[];
  IntervalSeconds?: number;
  MaxAttempts?: number;
  BackoffRate?: number;
  MaxDelaySeconds?: number;
}
interface State {
  Type: string;
  Resource?: string;
  Retry?: Retrier[];
}
interface Definition {
  TimeoutSeconds?: number;
  States: Record<string, State>;
}

/** A Lambda cold start plus Step Functions' own transition between two states, generously. */
const STEP_GAP_SECONDS = 30;
/** What provision does around the boot exec: the provider's create call and the agent session, then a terminate. */
const PROVISION_MARGIN_SECONDS = 120;
/** Prompt delivery's sequential agent requests (isBusy, promptAsync). */
const PROMPT_AGENT_REQUESTS = 2;

let stack: ControlPlaneStack;
let resources: Resources;
let outdir: string;
let q: ReturnType<typeof stackQueries>;

beforeAll(() => {
  ({ stack, resources, dir: outdir } = synthWithoutBundling());
  q = stackQueries({ stack, resources });
});
afterAll(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

const timeoutOf = (fnId: string): number => {
  const fn = resources[q.logicalIdOf(stack.functions[fnId])];
  return fn?.Properties.Timeout as number;
};

/** The synthesized definition of a flow's state machine (the string CloudFormation deploys). */
function definitionOf(flow: string): Definition {
  const machine = Object.values(resources).find(
    (r) => r.Type === "AWS::StepFunctions::StateMachine" && JSON.stringify(r.Properties.StateMachineName ?? "").endsWith(`-${flow}"`),
  );
  if (!machine) throw new Error(`no state machine for ${flow}`);
  return JSON.parse(machine.Properties.DefinitionString as string) as Definition;
}

const stepOfResource = (resource: string): string => {
  const step = FLOW_STEPS.find((s) => resource === `\${${stepArnVariable(s)}}`);
  if (!step) throw new Error(`Task resource ${resource} is no flow step`);
  return step.id;
};

const isInvokeError = (r: Retrier): boolean => r.ErrorEquals.every((e) => e.startsWith("Lambda."));

/** The backoffs one retrier can add, in seconds (jitter only shortens them). */
function retrierDelays(r: Retrier): number[] {
  const delays: number[] = [];
  for (let attempt = 0; attempt < (r.MaxAttempts ?? 3); attempt++) {
    const delay = (r.IntervalSeconds ?? 1) * (r.BackoffRate ?? 2) ** attempt;
    delays.push(r.MaxDelaySeconds === undefined ? delay : Math.min(delay, r.MaxDelaySeconds));
  }
  return delays;
}

describe("limits nest", () => {
  it("the flow lease outlives two heartbeat intervals plus the longest gap between two steps", () => {
    const ttl = parseConfig({ TABLE_NAME: "t" }).LEASE_TTL_SECONDS;
    const heartbeat = ttl * LEASE_HEARTBEAT_FRACTION;
    for (const flow of deployableFlows()) {
      const states = Object.values(definitionOf(flow).States).filter((s) => s.Type === "Task");
      const longestBackoff = Math.max(0, ...states.flatMap((s) => (s.Retry ?? []).flatMap(retrierDelays)));
      // Renewed at t, the step ends up to one interval later, the next step starts after the gap
      // and renews one interval after it starts.
      expect(2 * heartbeat + longestBackoff + STEP_GAP_SECONDS, `${flow}: lease TTL ${ttl} s`).toBeLessThan(ttl);
    }
  });

  it("the provision step's Lambda outlives the boot exec, with room to create before and terminate after", () => {
    expect(timeoutOf("ProvisionStep")).toBeGreaterThanOrEqual(BOOT_EXEC_TIMEOUT_MS / 1000 + PROVISION_MARGIN_SECONDS);
    expect(timeoutOf("ProvisionStep")).toBeLessThanOrEqual(900);
  });

  it("each state machine's TimeoutSeconds covers its worst path (every Task at its timeout for every attempt, plus backoffs)", () => {
    for (const flow of deployableFlows()) {
      const definition = definitionOf(flow);
      let worst = 0;
      for (const state of Object.values(definition.States)) {
        if (state.Type !== "Task" || !state.Resource) continue;
        const timeout = timeoutOf(stepOfResource(state.Resource));
        const fullAttempts = 1 + (state.Retry ?? []).filter((r) => !isInvokeError(r)).reduce((n, r) => n + (r.MaxAttempts ?? 3), 0);
        const backoffs = (state.Retry ?? []).flatMap(retrierDelays).reduce((a, b) => a + b, 0);
        worst += timeout * fullAttempts + backoffs;
      }
      expect(definition.TimeoutSeconds, flow).toBeGreaterThanOrEqual(worst);
    }
  });

  it("POST /prompts outlives the agent requests it makes and answers within the HTTP API's integration timeout", () => {
    const agentRoutes = HTTP_ROUTES.filter((r) => r.agentAccess);
    expect(agentRoutes.map((r) => r.id)).toContain("CreatePrompt");
    for (const route of agentRoutes) {
      expect(timeoutOf(route.id), route.id).toBeGreaterThan((PROMPT_AGENT_REQUESTS * AGENT_REQUEST_TIMEOUT_MS) / 1000 + 5);
      expect(timeoutOf(route.id), route.id).toBeLessThan(HTTP_INTEGRATION_TIMEOUT_SECONDS);
    }
  });
});
