/**
 * Lambda entry of the metering pass: invoked every METERING_INTERVAL_SECONDS by an EventBridge
 * Scheduler rate schedule (infra/control-plane-stack.ts). Builds the flow dependencies once per
 * container and runs one pass (./metering-pass.ts). No provider credentials: it only reads and
 * writes the table and starts `pause` flows.
 */
import { stepEntry } from "../flows/lambda-entry";
import { meterRunningSessions } from "./metering-pass";

export const handler = stepEntry((deps) => () => meterRunningSessions(deps));
