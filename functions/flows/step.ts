/**
 * The wrapper every flow step shares: parse the flow document, time the step, log it, and turn
 * any escaping error into a `StepError` whose name the ASL `Retry`/`Catch` rules match.
 */
import { errorForLog } from "../observability/logger";
import type { FlowDeps } from "./flow-deps";
import { FlowDocument } from "./flow-document";
import { toStepError } from "./step-errors";

export type StepHandler = (event: unknown) => Promise<unknown>;

export type StepFactory = (deps: FlowDeps) => StepHandler;

export function flowStep<R extends object>(name: string, run: (doc: FlowDocument, deps: FlowDeps) => Promise<R>): StepFactory {
  return (deps) => async (event) => {
    const started = Date.now();
    const doc = FlowDocument.parse(event);
    const log = { step: name, flow: doc.flow, sessionId: doc.sessionId, execution: doc.execution };
    try {
      const result = await run(doc, deps);
      const ms = Date.now() - started;
      deps.logger.info("flow step done", { ...log, ms });
      return { ...result, ms };
    } catch (err) {
      const stepError = toStepError(err);
      deps.logger.warn("flow step failed", { ...log, ms: Date.now() - started, errorName: stepError.name, error: errorForLog(err) });
      throw stepError;
    }
  };
}

/** The lease a step acts under; every step after `begin` has one. */
export function leaseOf(doc: FlowDocument): { sessionId: string; owner: string; fence: number; expiresAt: number } {
  if (!doc.begin) throw new Error(`flow document of ${doc.execution} has no lease (begin did not run)`);
  return doc.begin.lease;
}
