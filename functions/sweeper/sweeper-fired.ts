/**
 * Lambda entry of the orphan sweeper: invoked every SWEEPER_INTERVAL_SECONDS by an EventBridge
 * Scheduler rate schedule (infra/control-plane-stack.ts). Builds the flow dependencies once per
 * container and runs one sweep.
 */
import { stepEntry } from "../flows/lambda-entry";
import { awsProviders } from "../providers/aws-providers";
import { sweep } from "./orphan-sweeper";

export const handler = stepEntry((deps) => () => sweep(deps), awsProviders);
