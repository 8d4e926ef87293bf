/**
 * The lifecycle flows (real ASL files, real steps) on the real E2B provider over the E2B
 * stand-in (test/support/provider-standins/e2b-standin.ts), issue 22 §1: E2B's pause and its
 * snapshots both keep memory, so a resumed or restored sandbox comes back with OpenCode, Caddy
 * and the sidecar running. Stop (the user's pause) -> resume and the expiry migration must adopt
 * those processes, never boot on top of them, and keep the session's key epoch; a snapshot E2B
 * no longer has takes the restore-failure path.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { E2BSandboxProvider } from "../../functions/providers/e2b/e2b-provider";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import { agentAuthorization, deriveAgentPassword } from "../../sandbox/shared/access-token";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { E2BStandIn } from "../support/provider-standins/e2b-standin";
import { removeStandInRoots } from "../support/provider-standins/standin-machine";
import { ScriptedAgent } from "../support/scripted-agent";

const TEMPLATE = "sandbox:standin";
let e2b: E2BStandIn;
let h: FlowHarness;

beforeEach(async () => {
  e2b = new E2BStandIn([TEMPLATE]);
  // Real time, so the expiries the flows schedule agree with the stand-in's (nothing here waits for one).
  e2b.now = Date.now();
  const provider = new E2BSandboxProvider(e2b, { template: TEMPLATE, timeoutSeconds: 3600 }, { readiness: { fetch: e2b.fetch, sleep: async () => undefined } });
  h = await startFlowHarness({ provider, agent: new ScriptedAgent(), env: { MIGRATION_TURN_WAIT_SECONDS: "0.3" } });
});
afterEach(async () => {
  await h.close();
});
afterAll(() => removeStandInRoots());

function box(sandboxId: string | null) {
  const b = e2b.boxes.get(sandboxId ?? "");
  if (!b) throw new Error(`no stand-in sandbox ${sandboxId}`);
  return b;
}

/** What the session's sandbox answers on OpenCode's `/session` with the password of its current key epoch. */
async function openCodeStatus(sessionId: string): Promise<number> {
  const s = await h.session(sessionId);
  const key = await h.deps.sandboxKeys.sandboxKey(s.id, s.sandboxKeyEpoch ?? 0);
  const host = `https://4096-${s.sandboxId}.e2b.standin/session`;
  return (await e2b.fetch(host, { headers: { authorization: agentAuthorization(deriveAgentPassword(key)) } })).status;
}

const boots = (sandboxId: string | null) => box(sandboxId).machine.commands.filter((c) => c.includes("boot.mjs start"));

describe("E2B semantics through the flows (issue 22 §1)", () => {
  it("stop -> resume: the paused sandbox resumes as itself with the processes it had, unbooted, on the same key epoch", async () => {
    const s = await h.createSession();
    const running = await h.run("ensure-runtime", s.id);
    expect(running.status).toBe("running");
    const epoch = running.sandboxKeyEpoch;
    expect(boots(running.sandboxId)).toHaveLength(1);
    const paused = await h.run("pause", s.id);
    expect(paused).toMatchObject({ status: "paused", snapshotId: running.sandboxId });
    expect(box(running.sandboxId).state).toBe("paused");

    const resumed = await h.run("ensure-runtime", s.id);
    expect(resumed).toMatchObject({ status: "running", sandboxId: running.sandboxId, sandboxKeyEpoch: epoch });
    expect(box(resumed.sandboxId).machine.processes?.generation).toBe(1);
    expect(boots(resumed.sandboxId)).toHaveLength(1);
    expect(await openCodeStatus(s.id)).toBe(200);
  });

  it("expiry migration: the snapshot's sandbox comes up with its processes running; they are adopted, not booted over, and the old sandbox is gone", async () => {
    const s = await h.createSession();
    await h.addClient(s.id);
    const running = await h.run("ensure-runtime", s.id);
    const fired = await makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    expect(fired.started).toMatch(/^migrate-/);
    await h.runner.whenIdle();
    const after = await h.session(s.id);
    expect(after.status).toBe("running");
    expect(after.sandboxId).not.toBe(running.sandboxId);
    expect(after.snapshotId).toMatch(/^e2b-snapshot:/);
    // E2B snapshots keep memory: same processes (generation 1), never a second boot, same key epoch.
    expect(box(after.sandboxId).machine.processes?.generation).toBe(1);
    expect(boots(after.sandboxId)).toEqual([]);
    expect(after.sandboxKeyEpoch).toBe(running.sandboxKeyEpoch);
    expect(await openCodeStatus(s.id)).toBe(200);
    expect(box(running.sandboxId).state).toBe("killed");
  });

  it("a restored sandbox whose processes do not answer with the session's key is stopped and booted again on its filesystem", async () => {
    const s = await h.createSession();
    await h.addClient(s.id);
    const running = await h.run("ensure-runtime", s.id);
    // The processes the snapshot will hold answer to another key (e.g. a snapshot of another sandbox).
    const processes = box(running.sandboxId).machine.processes;
    if (processes) processes.key = "some-other-sandbox-key-0123456789";
    await makeScheduleFiredHandler(h.deps)({ sessionId: s.id, purpose: "expiry", at: new Date().toISOString() });
    await h.runner.whenIdle();
    const after = await h.session(s.id);
    expect(after.status).toBe("running");
    const commands = box(after.sandboxId).machine.commands;
    expect(commands.some((c) => c.includes("[b]oot.mjs run"))).toBe(true);
    expect(boots(after.sandboxId)).toHaveLength(1);
    expect(box(after.sandboxId).machine.processes?.generation).toBe(2);
    expect(await openCodeStatus(s.id)).toBe(200);
  });

  it("a snapshot E2B no longer has (a create answering a bare 404 SandboxError) takes the restore-failure path: Session reset, snapshot cleared", async () => {
    const s = await h.createSession();
    const running = await h.run("ensure-runtime", s.id);
    await h.run("pause", s.id);
    const paused = await h.session(s.id);
    await h.deps.sessions.update(paused, { snapshotId: "e2b-snapshot:deleted-snapshot" }, new Date());
    const failed = await h.run("ensure-runtime", s.id);
    expect(failed).toMatchObject({ status: "error", snapshotId: null });
    expect(failed.errorMessage).toMatch(/^Session reset: the previous conversation was cleared/);
    expect(running.sandboxId).not.toBeNull();
  });
});
