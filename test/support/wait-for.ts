/**
 * The one polling helper of the test suites: waits for a condition the test cannot be told about
 * (a stored item, a process, a file), checking it every `intervalMs` until it holds or
 * `timeoutMs` runs out. Prefer waiting on the event itself (a promise, a held call's `reached`,
 * a WebSocket message) when there is one; never sleep a fixed time to let something happen.
 */

export interface WaitForOptions<T> {
  /** How long to wait before failing (default 10 s). */
  timeoutMs?: number;
  /** How long to wait between two checks (default 25 ms). */
  intervalMs?: number;
  /**
   * What is awaited, named in the timeout error; a function is called only on timeout, with the
   * last value seen, to say where things stand.
   */
  message?: string | ((last: T) => string | Promise<string>);
  /** When the value is the one awaited (default: when it is truthy). */
  until?: (value: T) => boolean;
}

/** What a probe returns when the condition does not hold yet. */
type Falsy = false | 0 | "" | null | undefined;

const MAX_SHOWN = 2_000;

/**
 * Calls `probe` until its value is the one awaited (`until`, or truthy), and returns that value;
 * fails naming `message` after `timeoutMs`. A probe that throws fails the wait at once (a broken
 * probe is not "not yet").
 */
export function waitFor<T>(probe: () => T | Promise<T>, options: WaitForOptions<T> & { until: (value: T) => boolean }): Promise<T>;
export function waitFor<T>(probe: () => T | Promise<T>, options?: WaitForOptions<T>): Promise<Exclude<T, Falsy>>;
export async function waitFor<T>(probe: () => T | Promise<T>, options: WaitForOptions<T> = {}): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 25, message = "a condition", until = (value: T) => Boolean(value) } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (until(value)) return value;
    if (Date.now() >= deadline) {
      const what = typeof message === "function" ? await message(value) : message;
      const last = options.until ? `; last value ${(JSON.stringify(value) ?? String(value)).slice(0, MAX_SHOWN)}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}
