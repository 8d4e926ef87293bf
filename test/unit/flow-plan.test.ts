import { describe, expect, it } from "vitest";
import { CLIENT_TYPES, SESSION_STATUSES, type ClientStatus, type SessionStatus } from "../../functions/domain/session";
import {
  commitKind,
  finalClientStatus,
  pauseReasonFor,
  pausedChanges,
  planFlow,
  snapshotMethod,
  terminatesSandbox,
  type CommitKind,
  type FlowPlan,
  type MigrateBranch,
  type SnapshotMethod,
} from "../../functions/flows/plan";
import { FLOW_NAMES, type FlowName } from "../../functions/ports/flow-runner";
import { buildSession } from "../support/builders";

const go = (progressStatus: ClientStatus | null, branch: MigrateBranch | null = null): FlowPlan => ({ proceed: true, skipReason: null, progressStatus, branch });
const skip = (skipReason: string): FlowPlan => ({ proceed: false, skipReason, progressStatus: null, branch: null });
const notNow = (status: SessionStatus) => skip(`session is ${status}`);

/**
 * Every flow against every stored status, for a web session that has a sandbox and no
 * connected client. Written out cell by cell: a change to planFlow must change this table.
 */
const EXPECTED: Record<FlowName, Record<SessionStatus, FlowPlan>> = {
  "ensure-runtime": {
    starting: go("creating"),
    running: notNow("running"),
    paused: go("resuming"),
    stopped: notNow("stopped"),
    error: go("resuming"),
  },
  pause: { starting: notNow("starting"), running: go(null), paused: notNow("paused"), stopped: notNow("stopped"), error: notNow("error") },
  snapshot: { starting: notNow("starting"), running: go(null), paused: notNow("paused"), stopped: notNow("stopped"), error: notNow("error") },
  "idle-snapshot": { starting: notNow("starting"), running: go(null), paused: notNow("paused"), stopped: notNow("stopped"), error: notNow("error") },
  stop: { starting: go(null), running: go(null), paused: go(null), stopped: skip("session is already stopped"), error: go(null) },
  migrate: { starting: notNow("starting"), running: go(null, "pause"), paused: notNow("paused"), stopped: notNow("stopped"), error: notNow("error") },
};

/** The idle predicate's verdict for a session that is idle (idle snapshots act on it). */
const IDLE = { idle: true, reason: null, graceExpiresAt: new Date(0), recheckAt: null };

describe("planFlow: idle snapshots act on the predicate evaluated under the lease", () => {
  const running = buildSession({ status: "running", sandboxId: "sb-1" });
  it("skips, naming the condition, when the session is not idle", () => {
    const verdict = { idle: false, reason: "in_grace" as const, graceExpiresAt: new Date(0), recheckAt: new Date(0) };
    expect(planFlow("idle-snapshot", running, { connectedClients: 0, idle: verdict })).toEqual(skip("not idle: in_grace"));
  });
  it("skips when nobody evaluated the predicate", () => {
    expect(planFlow("idle-snapshot", running, { connectedClients: 0 })).toEqual(skip("idle predicate not evaluated"));
  });
});

describe("planFlow: every flow x every stored status", () => {
  it("the table covers every flow and every status", () => {
    expect(Object.keys(EXPECTED).sort()).toEqual([...FLOW_NAMES].sort());
    for (const row of Object.values(EXPECTED)) expect(Object.keys(row).sort()).toEqual([...SESSION_STATUSES].sort());
  });

  for (const flow of FLOW_NAMES) {
    for (const status of SESSION_STATUSES) {
      const expected = EXPECTED[flow][status];
      it(`${flow} on a ${status} session: ${expected.proceed ? "proceeds" : "skips"}`, () => {
        const session = buildSession({ status, sandboxId: "sb-1", clientType: "web" });
        expect(planFlow(flow, session, { connectedClients: 0, idle: IDLE })).toEqual(expected);
      });
    }
  }
});

describe("planFlow: sessions without a sandbox", () => {
  const noSandbox = (status: SessionStatus) => buildSession({ status, sandboxId: null });

  it.each(["pause", "snapshot", "idle-snapshot", "migrate"] as const)("%s on a running session with no sandbox skips", (flow) => {
    expect(planFlow(flow, noSandbox("running"), { connectedClients: 3 })).toEqual(skip("session has no sandbox"));
  });

  it("stop and ensure-runtime do not need a sandbox", () => {
    for (const status of ["starting", "running", "paused", "error"] as const) {
      expect(planFlow("stop", noSandbox(status), { connectedClients: 0 })).toEqual(go(null));
    }
    expect(planFlow("ensure-runtime", noSandbox("starting"), { connectedClients: 0 })).toEqual(go("creating"));
    expect(planFlow("ensure-runtime", noSandbox("paused"), { connectedClients: 0 })).toEqual(go("resuming"));
    expect(planFlow("ensure-runtime", noSandbox("error"), { connectedClients: 0 })).toEqual(go("resuming"));
  });

  it("a status skip wins over a missing sandbox", () => {
    expect(planFlow("pause", noSandbox("paused"), { connectedClients: 0 })).toEqual(notNow("paused"));
    expect(planFlow("migrate", noSandbox("stopped"), { connectedClients: 1 })).toEqual(notNow("stopped"));
  });
});

describe("planFlow: migrate branch", () => {
  const running = (clientType: (typeof CLIENT_TYPES)[number]) => buildSession({ status: "running", sandboxId: "sb-1", clientType });

  it.each(CLIENT_TYPES)("a %s session with a connected client migrates, shown as migrating", (clientType) => {
    expect(planFlow("migrate", running(clientType), { connectedClients: 1 })).toEqual(go("migrating", "migrate"));
    expect(planFlow("migrate", running(clientType), { connectedClients: 5 })).toEqual(go("migrating", "migrate"));
  });

  it("with no connected client only automation keeps its sandbox; the others pause", () => {
    const branches = Object.fromEntries(CLIENT_TYPES.map((t) => [t, planFlow("migrate", running(t), { connectedClients: 0 })]));
    expect(branches).toEqual({
      web: go(null, "pause"),
      cli: go(null, "pause"),
      slack: go(null, "pause"),
      automation: go("migrating", "migrate"),
    });
  });

  it("only migrate ever chooses a branch", () => {
    for (const flow of FLOW_NAMES.filter((f) => f !== "migrate")) {
      for (const status of SESSION_STATUSES) {
        const session = buildSession({ status, sandboxId: "sb-1", clientType: "automation" });
        expect(planFlow(flow, session, { connectedClients: 2 }).branch).toBeNull();
      }
    }
  });
});

describe("snapshotMethod", () => {
  const CAPABILITIES = [
    { supportsPause: true, supportsMemorySnapshot: true },
    { supportsPause: true, supportsMemorySnapshot: false },
    { supportsPause: false, supportsMemorySnapshot: true },
    { supportsPause: false, supportsMemorySnapshot: false },
  ] as const;
  const PAUSING: [SnapshotMethod, SnapshotMethod, SnapshotMethod, SnapshotMethod] = ["pause", "pause", "memory", "filesystem"];
  const KEEPS_RUNNING: [SnapshotMethod, SnapshotMethod, SnapshotMethod, SnapshotMethod] = ["filesystem", "filesystem", "filesystem", "filesystem"];

  const cases: [FlowName, MigrateBranch | null, SnapshotMethod[]][] = [
    ["pause", null, PAUSING],
    ["idle-snapshot", null, PAUSING],
    ["migrate", "pause", PAUSING],
    ["migrate", "migrate", KEEPS_RUNNING],
    ["migrate", null, KEEPS_RUNNING],
    ["snapshot", null, KEEPS_RUNNING],
    ["stop", null, KEEPS_RUNNING],
    ["ensure-runtime", null, KEEPS_RUNNING],
  ];

  it.each(cases)("%s (branch %s) over [pause+memory, pause, memory, neither]", (flow, branch, expected) => {
    expect(CAPABILITIES.map((c) => snapshotMethod(flow, branch, c))).toEqual(expected);
  });
});

describe("terminatesSandbox", () => {
  const METHODS = ["pause", "memory", "filesystem", "lost", null] as const;
  const cases: [FlowName, MigrateBranch | null, boolean[]][] = [
    // over METHODS:      pause  memory filesystem lost null
    ["stop", null, [true, true, true, true, true]],
    ["snapshot", null, [false, false, false, false, false]],
    ["migrate", "migrate", [true, true, true, false, true]],
    ["migrate", "pause", [false, true, true, false, true]],
    ["pause", null, [false, true, true, false, true]],
    ["idle-snapshot", null, [false, true, true, false, true]],
  ];

  it.each(cases)("%s (branch %s) over [pause, memory, filesystem, lost, none]", (flow, branch, expected) => {
    expect(METHODS.map((m) => terminatesSandbox(flow, branch, m))).toEqual(expected);
  });
});

describe("pausedChanges", () => {
  const base = { snapshotId: "snap-9", sandboxId: "sb-1", pauseReason: "inactivity", now: new Date("2026-01-01T00:00:00Z") };
  /** A paused session's agent state is history: cleared by every pause commit. */
  const agent = { agentBusy: false, lastKnownAgentIdleAt: null, idleSnapshotFailures: 0 };
  const METHODS = ["pause", "memory", "filesystem"] as const;

  it("never holds an undefined value, for every method, outcome and sandbox", () => {
    for (const method of METHODS) {
      for (const terminated of [true, false]) {
        for (const sandboxId of ["sb-1", null]) {
          const changes = pausedChanges({ ...base, sandboxId, method, terminated });
          expect(Object.values(changes), `${method} terminated=${terminated} sandbox=${sandboxId}`).not.toContain(undefined);
          expect(changes).toMatchObject({ snapshotId: "snap-9", pauseReason: "inactivity" });
        }
      }
    }
  });

  it("keeps the sandbox for a native pause, terminated or not", () => {
    const expected = { ...agent, snapshotId: "snap-9", pauseReason: "inactivity", sandboxId: "sb-1" };
    expect(pausedChanges({ ...base, method: "pause", terminated: false })).toEqual(expected);
    expect(pausedChanges({ ...base, method: "pause", terminated: true })).toEqual(expected);
  });

  it("keeps the sandbox when terminate failed, so the sweeper retries it", () => {
    for (const method of ["memory", "filesystem"] as const) {
      expect(pausedChanges({ ...base, method, terminated: false })).toEqual({ ...agent, snapshotId: "snap-9", pauseReason: "inactivity", sandboxId: "sb-1" });
    }
  });

  it("a lost sandbox: no sandbox, the last snapshot kept, and a message saying what resume does", () => {
    const withSnapshot = pausedChanges({ ...base, method: "lost", terminated: false });
    expect(withSnapshot).toMatchObject({ ...agent, snapshotId: "snap-9", sandboxId: null, openCodeUrl: null, sandboxExpiresAt: null });
    expect(withSnapshot.errorMessage).toMatch(/lost; resume restores the last snapshot/);
    const none = pausedChanges({ ...base, snapshotId: null, method: "lost", terminated: false });
    expect(none).toMatchObject({ snapshotId: null, sandboxId: null });
    expect(none.errorMessage).toMatch(/no snapshot; resume starts a fresh sandbox/);
  });

  it("drops the sandbox and its expiry once it was terminated", () => {
    for (const method of ["memory", "filesystem"] as const) {
      expect(pausedChanges({ ...base, method, terminated: true })).toEqual({ ...agent, snapshotId: "snap-9", pauseReason: "inactivity", sandboxId: null, sandboxExpiresAt: null });
    }
  });
});

describe("commitKind", () => {
  const cases: [FlowName, MigrateBranch | null, CommitKind][] = [
    ["ensure-runtime", null, "running"],
    ["pause", null, "paused"],
    ["idle-snapshot", null, "paused"],
    ["stop", null, "stopped"],
    ["snapshot", null, "snapshot"],
    ["migrate", "migrate", "swap"],
    ["migrate", "pause", "paused"],
    ["migrate", null, "paused"],
  ];

  it.each(cases)("%s (branch %s) commits %s", (flow, branch, kind) => {
    expect(commitKind(flow, branch)).toBe(kind);
  });

  it("covers every flow", () => {
    expect(new Set(cases.map(([flow]) => flow))).toEqual(new Set(FLOW_NAMES));
  });
});

describe("pauseReasonFor and finalClientStatus", () => {
  it("a user pause keeps the given reason (default user); every other flow pauses for inactivity", () => {
    expect(pauseReasonFor("pause", "credit_limit")).toBe("credit_limit");
    expect(pauseReasonFor("pause", null)).toBe("user");
    expect(pauseReasonFor("pause", undefined)).toBe("user");
    expect(pauseReasonFor("idle-snapshot", "user")).toBe("inactivity");
    expect(pauseReasonFor("idle-snapshot", "orphaned")).toBe("orphaned");
    expect(pauseReasonFor("idle-snapshot", "sandbox_lost")).toBe("sandbox_lost");
    expect(pauseReasonFor("migrate", null)).toBe("inactivity");
  });

  it("a sandbox found gone pauses on an older snapshot, whatever was asked for: sandbox_lost (issue 25 §7)", () => {
    for (const [flow, reason] of [["pause", "user"], ["pause", "credit_limit"], ["idle-snapshot", "inactivity"], ["migrate", null]] as const) {
      expect(pauseReasonFor(flow, reason, "lost"), `${flow} ${reason}`).toBe("sandbox_lost");
    }
    expect(pauseReasonFor("pause", "user", "memory")).toBe("user");
  });

  it("maps stored statuses to what clients see at the end of a flow", () => {
    expect(SESSION_STATUSES.map(finalClientStatus)).toEqual(["creating", "running", "paused", "stopped", "error"]);
  });
});
