/**
 * A timer for any delay. Node's setTimeout holds at most MAX_TIMER_DELAY_MS (2^31-1 ms, about
 * 24.8 days) and fires a longer delay at once; this waits in chunks it can hold until the whole
 * delay has passed. The remainder is counted down per chunk rather than re-read from a clock, so
 * an injected clock that does not advance cannot stall the chain. Unref'd: it never keeps the
 * process alive. Used by the local lifecycle and automation schedulers.
 */

/** setTimeout's largest delay (2^31-1 ms, about 24.8 days); longer delays fire at once in Node. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export interface LongTimeout {
  /** Cancels it (no-op once fired or cleared). */
  clear(): void;
}

/** Calls `callback` once, `delayMs` from now (a negative delay: on the next tick). */
export function setLongTimeout(callback: () => void, delayMs: number): LongTimeout {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let cleared = false;
  const wait = (remainingMs: number): void => {
    const chunk = Math.min(Math.max(0, remainingMs), MAX_TIMER_DELAY_MS);
    timer = setTimeout(() => {
      if (cleared) return;
      if (remainingMs > chunk) wait(remainingMs - chunk);
      else callback();
    }, chunk);
    timer.unref();
  };
  wait(delayMs);
  return {
    clear: () => {
      cleared = true;
      clearTimeout(timer);
    },
  };
}
