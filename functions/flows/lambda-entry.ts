/**
 * Lambda entry for flow steps, schedule targets and the sweeper: the dependencies come from the
 * container's runtime (functions/composition, built once per container at cold start), and the
 * handler wears the Powertools middlewares (Lambda context on every log line, metrics flushed).
 * The local runtime does not use this: it passes its own runtime's dependencies to the same
 * step factories.
 */
import type { Context } from "aws-lambda";
import { awsRuntime, noProviders, stepMetric, withPowertools, type ProviderBinding } from "../composition/lambda";
import type { FlowDeps } from "./flow-deps";

/** The Lambda handler for a step: dependencies on first invocation, then the step itself. */
export function stepEntry<R = unknown>(
  make: (deps: FlowDeps) => (event: unknown) => Promise<R>,
  providers: ProviderBinding = noProviders,
): (event: unknown, context: Context) => Promise<R> {
  let handler: ((event: unknown, context: Context) => Promise<R>) | undefined;
  return (event, context) => {
    if (!handler) {
      const rt = awsRuntime(providers);
      const step = make(rt.flowDeps);
      handler = withPowertools(rt, (e: unknown) => step(e), stepMetric<unknown, R>());
    }
    return handler(event, context);
  };
}
