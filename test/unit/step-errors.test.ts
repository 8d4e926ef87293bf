import { describe, expect, it } from "vitest";
import {
  AgentUnavailableError,
  ConflictError,
  InvalidTransitionError,
  LeaseBusyError,
  LeaseLostError,
  NotFoundError,
  ProviderError,
  StaleWriteError,
  ValidationError,
} from "../../functions/domain/errors";
import { RESTORE_OPERATIONS, STEP_ERRORS, StepError, toStepError } from "../../functions/flows/step-errors";
import { RESUME_SANDBOX_OPERATION } from "../../functions/providers/e2b/e2b-provider";
import { RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION } from "../../functions/providers/modal/modal-provider";

function expectStepError(err: unknown, name: string): StepError {
  const mapped = toStepError(err);
  expect(mapped).toBeInstanceOf(StepError);
  expect(mapped.name).toBe(name);
  expect(mapped.original).toBe(err);
  return mapped;
}

describe("toStepError: domain errors", () => {
  const cases: [string, Error, string][] = [
    ["LeaseBusyError", new LeaseBusyError("session s1 is busy"), STEP_ERRORS.leaseBusy],
    ["LeaseLostError", new LeaseLostError("lease of f1 is no longer held"), STEP_ERRORS.leaseLost],
    ["StaleWriteError", new StaleWriteError("session s1 changed concurrently"), STEP_ERRORS.staleWrite],
    ["InvalidTransitionError", new InvalidTransitionError("stopped", "running"), STEP_ERRORS.invalidTransition],
    ["NotFoundError", new NotFoundError("session s1 not found"), STEP_ERRORS.sessionNotFound],
  ];

  it.each(cases)("%s becomes its STEP_ERRORS name and keeps its message", (_label, err, name) => {
    expect(expectStepError(err, name).message).toBe(err.message);
  });

  it("the names are the ones the ASL files match", () => {
    expect(cases.map(([, , name]) => name)).toEqual(["LeaseBusy", "LeaseLost", "StaleWrite", "InvalidTransition", "SessionNotFound"]);
  });

  it("a StepError passes through as the same object", () => {
    const step = new StepError("LeaseBusy", "busy");
    expect(toStepError(step)).toBe(step);
  });
});

describe("toStepError: provider errors", () => {
  it("retryable -> ProviderTransient, non-retryable -> ProviderFailed", () => {
    const transient = new ProviderError("modal", "createSandbox", "rate limited", { retryable: true });
    const failed = new ProviderError("modal", "createSandbox", "image not found", { retryable: false });
    expect(expectStepError(transient, "ProviderTransient").message).toBe("modal createSandbox failed: rate limited");
    expectStepError(failed, "ProviderFailed");
    expectStepError(new ProviderError("e2b", "snapshot", "boom"), "ProviderFailed");
  });

  it.each([RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION, RESUME_SANDBOX_OPERATION])(
    "a permanent %s failure is RestoreFailed; a retryable one stays ProviderTransient",
    (operation) => {
      expectStepError(new ProviderError("p", operation, "snapshot gone", { retryable: false }), STEP_ERRORS.restoreFailed);
      expectStepError(new ProviderError("p", operation, "503", { retryable: true }), STEP_ERRORS.providerTransient);
    },
  );

  it("an operation that only resembles a restore is not one", () => {
    expectStepError(new ProviderError("modal", "restore", "x"), "ProviderFailed");
    expectStepError(new ProviderError("modal", "RESUMESANDBOX", "x"), "ProviderFailed");
  });

  it("AgentUnavailableError: retryable -> ProviderTransient, otherwise ProviderFailed", () => {
    expectStepError(new AgentUnavailableError("agent timed out", { retryable: true }), STEP_ERRORS.providerTransient);
    expectStepError(new AgentUnavailableError("agent refused (400)", { retryable: false }), STEP_ERRORS.providerFailed);
    expectStepError(new AgentUnavailableError("agent refused"), STEP_ERRORS.providerFailed);
  });
});

describe("toStepError: anything else", () => {
  it("keeps a specific error name", () => {
    expectStepError(new TypeError("x is undefined"), "TypeError");
    expectStepError(new ValidationError("bad input"), "ValidationError");
    expectStepError(new ConflictError("conflict"), "ConflictError");
  });

  it("a plain Error or a non-error becomes StepFailed", () => {
    expect(expectStepError(new Error("plain"), "StepFailed").message).toBe("plain");
    expect(expectStepError("thrown string", "StepFailed").message).toBe("thrown string");
    expect(expectStepError(undefined, "StepFailed").message).toBe("undefined");
  });

  it("every STEP_ERRORS value is unique", () => {
    const names = Object.values(STEP_ERRORS);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe("RESTORE_OPERATIONS", () => {
  it("names exactly the providers' restore operations", () => {
    expect([...RESTORE_OPERATIONS].sort()).toEqual([RESTORE_FROM_MEMORY_SNAPSHOT_OPERATION, RESUME_SANDBOX_OPERATION].sort());
  });
});
