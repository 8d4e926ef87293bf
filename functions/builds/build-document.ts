/**
 * The JSON document the snapshot builder carries from state to state (the Step Functions state
 * input of statemachines/builds/snapshot-builder.asl.json): the execution input, then each Task's
 * result under its own key. Small on purpose: setup logs go to the build item, not through here.
 */
import * as z from "zod";
import { BuildTarget } from "../domain/repos-prebuilds";
import { CaughtError } from "../flows/flow-document";

export const BuildDocument = z.object({
  orgId: z.string().min(1),
  target: BuildTarget,
  buildId: z.string().min(1),
  execution: z.string().min(1),
  provision: z.object({ sandboxId: z.string(), ms: z.number() }).optional(),
  setup: z.object({ commands: z.number(), services: z.number(), ms: z.number() }).optional(),
  capture: z.object({ snapshotId: z.string(), recorded: z.boolean(), deleted: z.array(z.string()), ms: z.number() }).optional(),
  failure: CaughtError.optional(),
  failed: z.object({ ms: z.number() }).optional(),
  terminate: z.object({ sandboxId: z.string().nullable(), ms: z.number() }).optional(),
});
export type BuildDocument = z.infer<typeof BuildDocument>;
