/**
 * Whoever starts a boot process (`main.ts start` inside an image, the local provider on the
 * host) waits for it here: the boot reports phase 1's outcome over the IPC channel, or exits,
 * or takes longer than the deadline. After the answer the channel is closed and the child is
 * released, so the boot outlives the process that started it.
 */
import type { ChildProcess } from "node:child_process";
import type { BootReport } from "./supervisor";

export type BootOutcome = BootReport | { type: "boot.exited"; code: number | null; signal: NodeJS.Signals | null } | { type: "boot.timeout"; afterMs: number };

function isReport(message: unknown): message is BootReport {
  if (typeof message !== "object" || message === null) return false;
  const type = (message as { type?: unknown }).type;
  return type === "boot.ready" || type === "boot.failed";
}

export function awaitBootOutcome(child: ChildProcess, deadlineMs: number): Promise<BootOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: BootOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("close", onExit);
      child.off("error", onError);
      if (child.connected) child.disconnect();
      child.unref();
      resolve(outcome);
    };
    const onMessage = (message: unknown) => {
      if (isReport(message)) finish(message);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => finish({ type: "boot.exited", code, signal });
    const onError = () => finish({ type: "boot.exited", code: null, signal: null });
    const timer = setTimeout(() => finish({ type: "boot.timeout", afterMs: deadlineMs }), deadlineMs);
    child.on("message", onMessage);
    // "close", not "exit": it comes after the IPC channel drained, so a report sent just
    // before the boot exited is not lost.
    child.once("close", onExit);
    child.once("error", onError);
  });
}

/** One sentence for an error message. */
export function describeOutcome(outcome: BootOutcome): string {
  switch (outcome.type) {
    case "boot.ready":
      return `ready at ${outcome.openCodeUrl}`;
    case "boot.failed":
      return `boot step "${outcome.step}" failed: ${outcome.error}`;
    case "boot.exited":
      return `boot exited with ${outcome.signal ?? outcome.code} before reporting`;
    case "boot.timeout":
      return `boot did not finish phase 1 within ${outcome.afterMs} ms`;
  }
}
