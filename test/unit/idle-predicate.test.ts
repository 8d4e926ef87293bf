import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CLIENT_TYPES, SESSION_STATUSES } from "../../functions/domain/session";
import { evaluateIdle, idleGraceSeconds, idleModeOf, IDLE_MODES, type IdleFacts } from "../../functions/idle/idle-predicate";

const config = { IDLE_SNAPSHOT_DELAY_SECONDS: 300, AUTOMATION_IDLE_GRACE_SECONDS: 30 };
const T0 = Date.parse("2026-01-01T00:00:00.000Z");

function facts(overrides: Partial<Omit<IdleFacts, "session">> & { session?: Partial<IdleFacts["session"]>; ageSeconds?: number } = {}): IdleFacts {
  const { session, ageSeconds = 301, ...rest } = overrides;
  return {
    session: {
      status: "running",
      sandboxId: "sb-1",
      clientType: "web",
      lastActivityAt: new Date(T0).toISOString(),
      agentBusy: false,
      lastKnownAgentIdleAt: new Date(T0).toISOString(),
      ...session,
    },
    clients: 0,
    proxies: 0,
    relayWatching: true,
    pendingPrompts: 0,
    now: new Date(T0 + ageSeconds * 1000),
    ...rest,
  };
}

describe("evaluateIdle: the six trigger conditions (seed 002 'Trigger')", () => {
  it("idle when every condition holds", () => {
    expect(evaluateIdle(facts(), "inactivity", config)).toEqual({ idle: true, reason: null, graceExpiresAt: new Date(T0 + 300_000), recheckAt: null });
  });

  it.each([
    ["1: a WebSocket client is connected", facts({ clients: 1 }), "clients_connected"],
    ["2: a proxy connection is open (verification 6)", facts({ proxies: 1 }), "proxy_connected"],
    ["3: the agent is busy", facts({ session: { agentBusy: true } }), "agent_busy"],
    ["4: no relay watches and the agent was never seen idle", facts({ relayWatching: false, session: { lastKnownAgentIdleAt: null } }), "agent_state_unknown"],
    ["5: no sandbox (constraint 13)", facts({ session: { sandboxId: null } }), "no_sandbox"],
    ["5: not running", facts({ session: { status: "paused" } }), "not_running"],
    ["6: the grace has not elapsed (constraint 2)", facts({ ageSeconds: 299 }), "in_grace"],
    ["a prompt is queued or in flight", facts({ pendingPrompts: 1 }), "prompts_pending"],
  ] as const)("not idle when condition %s", (_name, input, reason) => {
    const verdict = evaluateIdle(input, "inactivity", config);
    expect(verdict.idle).toBe(false);
    expect(verdict.reason).toBe(reason);
  });

  it("constraint 10 (verification 11): SSE down but the agent known idle still counts as idle", () => {
    expect(evaluateIdle(facts({ relayWatching: false }), "inactivity", config).idle).toBe(true);
  });

  it("only a grace wait asks for a recheck, at the grace expiry; other blockers wait for their event", () => {
    expect(evaluateIdle(facts({ ageSeconds: 10 }), "inactivity", config).recheckAt).toEqual(new Date(T0 + 300_000));
    expect(evaluateIdle(facts({ clients: 2 }), "inactivity", config).recheckAt).toBeNull();
    expect(evaluateIdle(facts({ session: { agentBusy: true } }), "inactivity", config).recheckAt).toBeNull();
  });

  it("grace by client type: web and CLI wait IDLE_SNAPSHOT_DELAY_SECONDS, automation and Slack AUTOMATION_IDLE_GRACE_SECONDS", () => {
    expect(CLIENT_TYPES.map((t) => idleGraceSeconds(t, config))).toEqual([300, 300, 30, 30]);
    expect(evaluateIdle(facts({ ageSeconds: 31, session: { clientType: "automation" } }), "inactivity", config).idle).toBe(true);
    expect(evaluateIdle(facts({ ageSeconds: 31, session: { clientType: "slack" } }), "inactivity", config).idle).toBe(true);
    expect(evaluateIdle(facts({ ageSeconds: 31, session: { clientType: "web" } }), "inactivity", config).reason).toBe("in_grace");
  });
});

describe("evaluateIdle: modes", () => {
  it("orphaned: the agent state is left to the flow's probe, people and grace still count", () => {
    const unknown = facts({ relayWatching: false, session: { agentBusy: true, lastKnownAgentIdleAt: null }, pendingPrompts: 2 });
    expect(evaluateIdle(unknown, "orphaned", config).idle).toBe(true);
    expect(evaluateIdle({ ...unknown, clients: 1 }, "orphaned", config).reason).toBe("clients_connected");
    expect(evaluateIdle({ ...unknown, proxies: 1 }, "orphaned", config).reason).toBe("proxy_connected");
    expect(evaluateIdle(facts({ ageSeconds: 5, relayWatching: false }), "orphaned", config).reason).toBe("in_grace");
  });

  it("sandbox_lost: only a running session with a sandbox is needed", () => {
    expect(evaluateIdle(facts({ clients: 3, proxies: 1, ageSeconds: 0, session: { agentBusy: true } }), "sandbox_lost", config).idle).toBe(true);
    expect(evaluateIdle(facts({ session: { sandboxId: null } }), "sandbox_lost", config).reason).toBe("no_sandbox");
  });

  it("idleModeOf: the three modes by name, anything else is inactivity", () => {
    expect(IDLE_MODES.map(idleModeOf)).toEqual([...IDLE_MODES]);
    expect([null, undefined, "user", ""].map(idleModeOf)).toEqual(["inactivity", "inactivity", "inactivity", "inactivity"]);
  });
});

describe("evaluateIdle: laws", () => {
  const arbitraryFacts = fc.record({
    status: fc.constantFrom(...SESSION_STATUSES),
    sandbox: fc.boolean(),
    clientType: fc.constantFrom(...CLIENT_TYPES),
    agentBusy: fc.boolean(),
    knownIdle: fc.boolean(),
    clients: fc.nat(3),
    proxies: fc.nat(3),
    relayWatching: fc.boolean(),
    pendingPrompts: fc.nat(3),
    ageSeconds: fc.integer({ min: -10, max: 1000 }),
  });
  type Drawn = typeof arbitraryFacts extends fc.Arbitrary<infer R> ? R : never;
  const build = (f: Drawn) =>
    facts({
      session: { status: f.status, sandboxId: f.sandbox ? "sb" : null, clientType: f.clientType, agentBusy: f.agentBusy, lastKnownAgentIdleAt: f.knownIdle ? new Date(T0).toISOString() : null },
      clients: f.clients,
      proxies: f.proxies,
      relayWatching: f.relayWatching,
      pendingPrompts: f.pendingPrompts,
      ageSeconds: f.ageSeconds,
    });

  it("never idle with a client, a proxy, a busy agent, pending prompts or without a running sandbox (inactivity)", () => {
    fc.assert(
      fc.property(arbitraryFacts, (f) => {
        const v = evaluateIdle(build(f), "inactivity", config);
        if (v.idle) {
          expect(f.clients + f.proxies + f.pendingPrompts).toBe(0);
          expect(f.agentBusy).toBe(false);
          expect(f.status === "running" && f.sandbox).toBe(true);
          expect(f.ageSeconds).toBeGreaterThanOrEqual(idleGraceSeconds(f.clientType, config));
        }
      }),
    );
  });

  it("more activity never makes a session idle (monotone in lastActivityAt)", () => {
    fc.assert(
      fc.property(arbitraryFacts, fc.nat(600), (f, later) => {
        const before = evaluateIdle(build(f), "inactivity", config);
        const after = evaluateIdle(build({ ...f, ageSeconds: f.ageSeconds - later }), "inactivity", config);
        if (after.idle) expect(before.idle).toBe(true);
      }),
    );
  });
});
