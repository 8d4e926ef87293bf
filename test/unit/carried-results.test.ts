/**
 * Issue 15: a step that leaves the normal path with its work done (Begin with nothing to do, a
 * Commit whose in-process finish did not complete) carries its result through the ASL Catch in
 * the error's message; Finish's document lifts it back. And a failed conditional write's `Item`
 * (ReturnValuesOnConditionCheckFailure ALL_OLD, which dynalite ignores, so the adapter tests take
 * the read fallback) is read as plain values.
 */
import { describe, expect, it } from "vitest";
import { FlowDocument } from "../../functions/flows/flow-document";
import { flowStep } from "../../functions/flows/step";
import { CarryError, STEP_ERRORS, StepError } from "../../functions/flows/step-errors";
import type { FlowDeps } from "../../functions/flows/flow-deps";
import { conditionFailureItem } from "../../functions/store/item-lease";

const input = { sessionId: "ses_1", flow: "pause", generation: 3, actor: "user", reason: null, execution: "pause-ses_1-3" } as const;
const begin = {
  lease: { sessionId: "ses_1", owner: "pause-ses_1-3", fence: 4, expiresAt: 1 },
  proceed: false,
  skipReason: "session is paused",
  branch: null,
  progressStatus: null,
  fromStatus: "paused",
  sandboxId: null,
  startedAt: "2026-01-01T00:00:00.000Z",
  ms: 12,
};

describe("carried results", () => {
  it("Finish's document lifts Begin's result from a Lambda error payload (AWS) and from a plain message (local runner)", () => {
    const message = JSON.stringify({ begin });
    const lambdaCause = JSON.stringify({ errorType: STEP_ERRORS.nothingToDo, errorMessage: message, trace: ["NothingToDo: ..."] });
    for (const Cause of [lambdaCause, message]) {
      const doc = FlowDocument.parse({ ...input, carried: { Error: STEP_ERRORS.nothingToDo, Cause } });
      expect(doc.begin).toEqual(begin);
      expect(doc.commit).toBeUndefined();
    }
  });

  it("keys the document already has win, and a Cause that is not a carried document lifts nothing", () => {
    const own = { ...begin, skipReason: "own" };
    expect(FlowDocument.parse({ ...input, begin: own, carried: { Error: "X", Cause: JSON.stringify({ begin }) } }).begin?.skipReason).toBe("own");
    expect(FlowDocument.parse({ ...input, carried: { Error: "States.Timeout", Cause: "Task timed out" } }).begin).toBeUndefined();
  });

  it("flowStep turns a CarryError into the named StepError whose message is the result with the step's ms", async () => {
    const logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
    const deps = { logger, config: { LEASE_TTL_SECONDS: 60 } } as unknown as FlowDeps;
    const step = flowStep("begin", () => Promise.reject(new CarryError(STEP_ERRORS.nothingToDo, "begin", { skipReason: "x" }, { other: 1 })))(deps);
    const err = await step(input).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StepError);
    expect((err as StepError).name).toBe("NothingToDo");
    const carried = JSON.parse((err as StepError).message) as { begin: { skipReason: string; ms: number }; other: number };
    expect(carried.begin.skipReason).toBe("x");
    expect(typeof carried.begin.ms).toBe("number");
    expect(carried.other).toBe(1);
  });
});

describe("conditionFailureItem", () => {
  it("reads the ALL_OLD item of a failed condition as plain values", () => {
    const err = Object.assign(new Error("The conditional request failed"), {
      name: "ConditionalCheckFailedException",
      Item: { PK: { S: "SESSION#s" }, fence: { N: "7" }, leaseOwner: { S: "x" }, agentBusy: { BOOL: false }, pausedAt: { NULL: true }, repos: { L: [{ M: { url: { S: "u" } } }] } },
    });
    expect(conditionFailureItem(err)).toEqual({ PK: "SESSION#s", fence: 7, leaseOwner: "x", agentBusy: false, pausedAt: null, repos: [{ url: "u" }] });
  });

  it("is undefined when the backend returned no item (dynalite, or no such item): the caller reads instead", () => {
    expect(conditionFailureItem(Object.assign(new Error("failed"), { name: "ConditionalCheckFailedException" }))).toBeUndefined();
  });
});
