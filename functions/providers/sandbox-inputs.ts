/**
 * What the cloud providers check or normalize before they call their SDK (issue 22 §5), so a
 * bad input fails here with a clear, non-retryable ProviderError naming it, never deep in the
 * SDK or on the provider's servers:
 *
 * - env var names (`invalidEnvVarNames`): Modal refuses names outside `^[a-zA-Z_][a-zA-Z0-9_]*$`;
 * - exec `timeoutMs`: Modal takes whole seconds only (a multiple of 1000), so it is rounded up;
 *   zero, negative or not a number is refused;
 * - exec `cwd`: Modal takes absolute paths only; a relative one is resolved against the image's
 *   workspace, as the local provider resolves it against its workspace.
 */
import { posix } from "node:path";
import { ProviderError } from "../domain/errors";
import { ENV_VAR_NAME_RULE, invalidEnvVarNames } from "../domain/env-var-name";
import { IMAGE_PATHS } from "../../sandbox/boot/layout";

export function requireValidEnvNames(provider: string, operation: string, env: Readonly<Record<string, string>>): void {
  const bad = invalidEnvVarNames(env);
  if (bad.length === 0) return;
  throw new ProviderError(provider, operation, `invalid environment variable name${bad.length > 1 ? "s" : ""} ${bad.map((n) => JSON.stringify(n.slice(0, 64))).join(", ")}: ${ENV_VAR_NAME_RULE}`, {
    retryable: false,
    context: { kind: "other" },
  });
}

/** Whole seconds, rounded up (Modal's exec and sandbox timeouts). */
export function wholeSecondsMs(provider: string, operation: string, timeoutMs: number): number {
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new ProviderError(provider, operation, `timeoutMs must be a positive number of milliseconds, got ${String(timeoutMs)}`, { retryable: false, context: { kind: "other" } });
  }
  return Math.ceil(timeoutMs / 1_000) * 1_000;
}

/** An absolute working directory: relative paths are resolved against the image's workspace. */
export function absoluteCwd(cwd: string): string {
  return posix.resolve(IMAGE_PATHS.workspace, cwd);
}

export interface ExecOptions {
  cwd?: string;
  timeoutMs?: number;
}

/** `cwd` absolute and `timeoutMs` in whole seconds; absent options stay absent. */
export function normalizeExecOptions<T extends ExecOptions>(provider: string, operation: string, opts: T): T {
  return {
    ...opts,
    ...(opts.cwd !== undefined ? { cwd: absoluteCwd(opts.cwd) } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: wholeSecondsMs(provider, operation, opts.timeoutMs) } : {}),
  };
}
