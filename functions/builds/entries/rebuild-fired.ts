/**
 * Lambda entry of the scheduled prebuild rebuild: invoked by an EventBridge Scheduler rate
 * schedule (infra/snapshot-builder.ts). Starts a build of every prebuild whose latest build
 * started at least PREBUILD_REBUILD_INTERVAL_SECONDS ago (../build-start.ts).
 */
import type { Context } from "aws-lambda";
import { awsRuntime, stepMetric, withPowertools } from "../../composition/lambda";
import { rebuildStalePrebuilds } from "../build-start";

type Report = Awaited<ReturnType<typeof rebuildStalePrebuilds>>;
let fired: ((event: unknown, context: Context) => Promise<Report>) | undefined;

export const handler = (event: unknown, context: Context): Promise<Report> => {
  if (!fired) {
    const rt = awsRuntime();
    fired = withPowertools(rt, () => rebuildStalePrebuilds(rt.httpDeps), stepMetric<unknown, Report>());
  }
  return fired(event, context);
};
