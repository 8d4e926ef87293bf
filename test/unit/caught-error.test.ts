/**
 * A step caught by a Catch sees Step Functions' `{Error, Cause}`. For a Lambda function error the
 * Cause is the runtime's error payload as JSON (stack trace included): only its message may reach
 * the session's errorMessage and the lifecycle events (found by the deploy rehearsal).
 */
import { describe, expect, it } from "vitest";
import { CaughtError } from "../../functions/flows/flow-document";

describe("CaughtError", () => {
  it("keeps only the errorMessage of a Lambda error payload", () => {
    const cause = JSON.stringify({ errorType: "ProviderFailed", errorMessage: 'the model key secret "K" no longer exists', trace: ["ProviderFailed: ...", "    at toStepError (/var/task/index.mjs:1:2)"] });
    expect(CaughtError.parse({ Error: "ProviderFailed", Cause: cause })).toEqual({ Error: "ProviderFailed", Cause: 'the model key secret "K" no longer exists' });
  });

  it("keeps any other Cause as it is (States.* errors, plain messages, JSON without a message)", () => {
    for (const cause of ["Task timed out", "{not json", JSON.stringify({ detail: "x" }), JSON.stringify({ errorMessage: 3 })]) {
      expect(CaughtError.parse({ Error: "States.TaskFailed", Cause: cause }).Cause).toBe(cause);
    }
    expect(CaughtError.parse({ Error: "States.Timeout" })).toEqual({ Error: "States.Timeout" });
  });
});
