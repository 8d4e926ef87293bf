/**
 * Readiness backoff (seed 003 §5: 200 ms × 1.5 capped at 2 s, 30 s budget), deterministic: the
 * injected `sleep` records the delays and returns at once.
 */
import { describe, expect, it } from "vitest";
import { waitForOpenCodeReady } from "../../functions/providers/sandbox-boot";
import { backoffSchedule, waitUntilReady, type ProbeResult } from "../../sandbox/boot/readiness";
import { agentAuthorization, deriveAgentPassword } from "../../sandbox/shared/access-token";

function recorder() {
  const sleeps: number[] = [];
  return { sleeps, sleep: async (ms: number) => void sleeps.push(ms) };
}

const notReady = async (): Promise<ProbeResult> => ({ ready: false, reason: "connection refused" });

describe("backoffSchedule", () => {
  it("starts at 200 ms, grows ×1.5, caps at 2 s, and sums to the 30 s budget", () => {
    const delays = backoffSchedule(30_000);
    expect(delays.slice(0, 8)).toEqual([200, 300, 450, 675, 1013, 1520, 2000, 2000]);
    expect(Math.max(...delays)).toBe(2_000);
    const total = delays.reduce((a, b) => a + b, 0);
    expect(total).toBeGreaterThanOrEqual(30_000);
    // The last sleep is the one that reaches the budget, not one past it.
    expect(total - (delays.at(-1) ?? 0)).toBeLessThan(30_000);
  });
});

describe("waitUntilReady", () => {
  it("never ready: sleeps exactly the schedule, then fails as a TimeoutError naming the budget and the last reason", async () => {
    const { sleeps, sleep } = recorder();
    const err = await waitUntilReady(notReady, { sleep, budgetMs: 30_000, what: "OpenCode" }).catch((e: unknown) => e);
    expect(sleeps).toEqual(backoffSchedule(30_000));
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).toBe("TimeoutError");
    expect((err as Error).message).toBe("OpenCode did not become ready within 30000ms (connection refused)");
  });

  it("ready on the fourth probe: three sleeps of the schedule", async () => {
    const { sleeps, sleep } = recorder();
    let probes = 0;
    const result = await waitUntilReady(async () => (++probes >= 4 ? { ready: true } : { ready: false, reason: "503" }), { sleep, budgetMs: 30_000, what: "x" });
    expect(result).toEqual({ attempts: 4, waitedMs: 950 });
    expect(sleeps).toEqual([200, 300, 450]);
  });

  it("a fatal probe (the process exited) fails at once, without sleeping", async () => {
    const { sleeps, sleep } = recorder();
    const err = await waitUntilReady(async () => ({ ready: false, fatal: true, reason: "exited with 1" }), { sleep, budgetMs: 30_000, what: "opencode" }).catch(
      (e: unknown) => e,
    );
    expect((err as Error).name).toBe("ReadinessAbortedError");
    expect((err as Error).message).toBe("opencode exited with 1");
    expect(sleeps).toEqual([]);
  });

  it("a probe that throws counts as not ready yet", async () => {
    const { sleep } = recorder();
    let probes = 0;
    const result = await waitUntilReady(
      async () => {
        probes += 1;
        if (probes === 1) throw new Error("ECONNREFUSED");
        return { ready: true };
      },
      { sleep, budgetMs: 1_000, what: "x" },
    );
    expect(result.attempts).toBe(2);
  });
});

describe("waitForOpenCodeReady (cloud providers, through the tunnel)", () => {
  it("polls /session with the same schedule and fails transient", async () => {
    const { sleeps, sleep } = recorder();
    const urls = new Set<string>();
    const err = await waitForOpenCodeReady("https://sb-1.example/", { sleep, fetch: async (url) => (urls.add(url), { ok: false, status: 502 }) }).catch(
      (e: unknown) => e,
    );
    expect([...urls]).toEqual(["https://sb-1.example/session"]);
    expect(sleeps).toEqual(backoffSchedule(30_000));
    expect((err as Error).name).toBe("TimeoutError");
    expect((err as Error).message).toContain("HTTP 502");
  });

  it("with the create call's sandbox key, every probe sends OpenCode's Authorization; no key, no header", async () => {
    const { sleep } = recorder();
    const seen: (Record<string, string> | undefined)[] = [];
    let calls = 0;
    const fetch = async (_url: string, init?: { headers: Record<string, string> }) => {
      seen.push(init?.headers);
      calls += 1;
      return calls < 3 ? { ok: false, status: 401 } : { ok: true, status: 200 };
    };
    await waitForOpenCodeReady("https://sb-1.example", { sleep, fetch }, { sandboxKey: "key-0123456789" });
    expect(seen).toEqual(Array(3).fill({ authorization: agentAuthorization(deriveAgentPassword("key-0123456789")) }));

    seen.length = 0;
    calls = 2;
    await waitForOpenCodeReady("https://sb-1.example", { sleep, fetch }, { sandboxKey: null });
    expect(seen).toEqual([undefined]);
  });

  it("a 401 (a key that does not match the sandbox's) times out naming the status, never the credential", async () => {
    const { sleep } = recorder();
    const err = await waitForOpenCodeReady("https://sb-1.example", { sleep, fetch: async () => ({ ok: false, status: 401 }) }, { sandboxKey: "key-0123456789", budgetMs: 1_000 }).catch(
      (e: unknown) => e,
    );
    expect((err as Error).message).toContain("HTTP 401");
    expect((err as Error).message).not.toContain(deriveAgentPassword("key-0123456789"));
    expect((err as Error).message).not.toContain(agentAuthorization(deriveAgentPassword("key-0123456789")));
  });
});
