/**
 * Flow runner port: starts a lifecycle flow (Step Functions state machine) for a session.
 * AWS adapter: `StartExecution` with a deterministic execution name per
 * (session, operation, generation), so a second request for the same work joins the running
 * execution instead of starting a duplicate. Local adapter: the same ASL files executed by
 * aws-local-stepfunctions with Task states bound to the same step handlers.
 */
export const FLOW_NAMES = ["ensure-runtime", "pause", "snapshot", "stop", "migrate", "idle-snapshot"] as const;
export type FlowName = (typeof FLOW_NAMES)[number];

export interface StartFlowInput {
  flow: FlowName;
  sessionId: string;
  /** Distinguishes successive runs of the same operation (e.g. the session version it acts on). */
  generation: number | string;
  /** Who asked: "user", "schedule:expiry", "relay", ... (recorded in the audit trail). */
  actor: string;
  reason?: string;
}

export interface StartFlowResult {
  executionName: string;
  /** False when an execution with the same name was already running and this call joined it. */
  started: boolean;
}

export interface FlowRunner {
  start(input: StartFlowInput): Promise<StartFlowResult>;
}

/** Execution names: [A-Za-z0-9-_], max 80 characters (Step Functions limit). */
export function executionName(input: Pick<StartFlowInput, "flow" | "sessionId" | "generation">): string {
  return `${input.flow}-${input.sessionId}-${input.generation}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 80);
}
