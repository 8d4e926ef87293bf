import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { InvalidTransitionError } from "../../functions/domain/errors";
import { SESSION_STATUSES, type SessionStatus } from "../../functions/domain/session";
import {
  SESSION_TRANSITIONS,
  allowedSources,
  applyTransition,
  canTransition,
  clientStatusOf,
  isTerminal,
} from "../../functions/domain/session-transitions";
import { buildSession, T0 } from "../support/builders";

/** The expected table, written out pair by pair: a change to the table must change this test. */
const EXPECTED: Record<SessionStatus, Record<SessionStatus, boolean>> = {
  starting: { starting: false, running: true, paused: false, stopped: true, error: true },
  running: { starting: false, running: false, paused: true, stopped: true, error: true },
  paused: { starting: false, running: true, paused: false, stopped: true, error: true },
  stopped: { starting: false, running: false, paused: false, stopped: false, error: false },
  error: { starting: false, running: true, paused: false, stopped: true, error: false },
};

describe("transition table: every pair of statuses", () => {
  for (const from of SESSION_STATUSES) {
    for (const to of SESSION_STATUSES) {
      const allowed = EXPECTED[from][to];
      it(`${from} -> ${to} is ${allowed ? "allowed" : "rejected"}`, () => {
        expect(canTransition(from, to)).toBe(allowed);
        expect(allowedSources(to).includes(from)).toBe(allowed);
        const current = buildSession({ status: from });
        if (allowed) {
          expect(applyTransition(current, to, T0).status).toBe(to);
        } else {
          expect(() => applyTransition(current, to, T0)).toThrow(InvalidTransitionError);
        }
      });
    }
  }

  it("has an entry for every stored status and names only known statuses", () => {
    expect(Object.keys(SESSION_TRANSITIONS).sort()).toEqual([...SESSION_STATUSES].sort());
    for (const targets of Object.values(SESSION_TRANSITIONS)) {
      for (const t of targets) expect(SESSION_STATUSES).toContain(t);
    }
  });

  it("only stopped is terminal, and nothing re-enters starting", () => {
    expect(SESSION_STATUSES.filter(isTerminal)).toEqual(["stopped"]);
    expect(allowedSources("starting")).toEqual([]);
  });

  it("maps stored statuses to the client vocabulary", () => {
    expect(SESSION_STATUSES.map(clientStatusOf)).toEqual(["creating", "running", "paused", "stopped", "error"]);
  });
});

describe("applyTransition", () => {
  const status = fc.constantFrom(...SESSION_STATUSES);

  it("law: the version grows by exactly one and lastActivityAt never changes", () => {
    fc.assert(
      fc.property(status, status, fc.integer({ min: 0, max: 10_000 }), (from, to, secs) => {
        fc.pre(canTransition(from, to));
        const current = buildSession({ status: from, version: 7, runningSince: from === "running" ? T0.toISOString() : null });
        const next = applyTransition(current, to, new Date(T0.getTime() + secs * 1000));
        expect(next.version).toBe(8);
        expect(next.lastActivityAt).toBe(current.lastActivityAt);
      }),
    );
  });

  it("law: active seconds grow by the running period on every exit from running, never otherwise", () => {
    fc.assert(
      fc.property(status, fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 1000 }), (to, secs, prior) => {
        fc.pre(canTransition("running", to));
        const current = buildSession({ status: "running", runningSince: T0.toISOString(), activeSeconds: prior });
        const next = applyTransition(current, to, new Date(T0.getTime() + secs * 1000));
        expect(next.activeSeconds).toBe(prior + secs);
        expect(next.runningSince).toBeNull();
      }),
    );
    const paused = buildSession({ status: "paused", activeSeconds: 5 });
    const resumed = applyTransition(paused, "running", new Date(T0.getTime() + 50_000));
    expect(resumed.activeSeconds).toBe(5);
    expect(resumed.runningSince).toBe(new Date(T0.getTime() + 50_000).toISOString());
  });

  it("stamps pausedAt on pause, endedAt on stop, and clears pause fields on resume", () => {
    const running = buildSession({ status: "running", runningSince: T0.toISOString() });
    const at = new Date(T0.getTime() + 1000);
    const paused = applyTransition(running, "paused", at, { pauseReason: "inactivity", snapshotId: "snap" });
    expect(paused).toMatchObject({ pausedAt: at.toISOString(), pauseReason: "inactivity", snapshotId: "snap" });
    const resumed = applyTransition(paused, "running", at, { sandboxId: "sb" });
    expect(resumed).toMatchObject({ pausedAt: null, pauseReason: null, snapshotId: "snap", sandboxId: "sb" });
    expect(applyTransition(resumed, "stopped", at).endedAt).toBe(at.toISOString());
  });
});
