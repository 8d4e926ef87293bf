/**
 * Section 10 (issue 16): what usage metering, limits and credits add in DynamoDB requests, over
 * the real flows, store and metering pass on dynalite (functions/usage/metering-pass.ts,
 * functions/store/dynamo-org-usage.ts): per running-session-hour (the pass every
 * METERING_INTERVAL_SECONDS), per org-day (the credit check the pass makes for each org with
 * running sessions), and per lifecycle (the close write and the admission read). Figures only.
 */
import { meterRunningSessions } from "../../functions/usage/metering-pass";
import { startFlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { countDynamoRequests, dynamoCostNotes, USD_PER_RRU, USD_PER_WRU, type DynamoRequest } from "./dynamo-usage";
import { heading, note, table } from "./report";

interface Tally {
  requests: number;
  reads: number;
  writes: number;
  rru: number;
  wru: number;
}

const empty = (): Tally => ({ requests: 0, reads: 0, writes: 0, rru: 0, wru: 0 });

function add(t: Tally, r: DynamoRequest): void {
  t.requests++;
  if (r.wru > 0 || r.op.startsWith("PutItem") || r.op.startsWith("UpdateItem") || r.op.startsWith("DeleteItem")) t.writes++;
  else t.reads++;
  t.rru += r.rru;
  t.wru += r.wru;
}

const usd = (t: Tally, times = 1): number => times * (t.rru * USD_PER_RRU + t.wru * USD_PER_WRU);

export async function benchMetering(): Promise<void> {
  heading("10. Usage metering (issue 16): DynamoDB requests per running-session-hour, per org-day, per lifecycle");
  const SESSIONS = 40;
  const ORGS = 4;
  const PASSES = 5;
  const h = await startFlowHarness({ provider: new InstantSandboxProvider({ supportsPause: false, supportsMemorySnapshot: true }), agent: new ScriptedAgent(), env: { IDLE_SNAPSHOT_DELAY_SECONDS: "3600" } });
  try {
    const intervalS = h.config.METERING_INTERVAL_SECONDS;
    // Half the orgs have a monthly budget (the pass then sums the month's usage items for them).
    for (let o = 0; o < ORGS; o += 2) await h.deps.usage.putLimits(`org-${o}`, { monthlyActiveSeconds: 10_000_000 }, h.deps.now());
    const lifecycle = { usage: empty(), all: empty() };
    let counting: "lifecycle" | "pass" | "none" = "lifecycle";
    const pass = { all: empty(), limited: empty(), unlimited: empty() };
    let current: { sk: string; pk: string } = { sk: "", pk: "" };
    // Which item each request touched (the counted request has no key: capture it first).
    const raw = h.table.doc as unknown as { send: (c: { input: Record<string, unknown> }) => Promise<unknown> };
    const inner = raw.send.bind(raw);
    raw.send = (command) => {
      const key = (command.input.Key ?? {}) as { PK?: string; SK?: string };
      const values = (command.input.ExpressionAttributeValues ?? {}) as Record<string, unknown>;
      current = { pk: String(key.PK ?? values[":pk"] ?? ""), sk: String(key.SK ?? values[":from"] ?? "") };
      return inner(command);
    };
    countDynamoRequests(h.table.doc, (r) => {
      const usageItem = current.sk.startsWith("USAGE#") || current.sk === "LIMITS";
      if (counting === "lifecycle") {
        add(lifecycle.all, r);
        if (usageItem) add(lifecycle.usage, r);
      } else if (counting === "pass") {
        add(pass.all, r);
        if (usageItem && /^ORG#org-[02]$/.test(current.pk)) add(pass.limited, r);
        if (usageItem && /^ORG#org-[13]$/.test(current.pk)) add(pass.unlimited, r);
      }
    });

    // One lifecycle with its usage writes: create -> running -> paused -> running -> stopped.
    const probe = await h.createSession({ orgId: "org-0" });
    await h.run("ensure-runtime", probe.id);
    await h.run("pause", probe.id);
    await h.run("ensure-runtime", probe.id);
    await h.run("stop", probe.id);
    counting = "none";

    for (let i = 0; i < SESSIONS; i++) {
      const s = await h.createSession({ orgId: `org-${i % ORGS}` });
      await h.run("ensure-runtime", s.id);
    }
    counting = "pass";
    for (let p = 0; p < PASSES; p++) {
      h.advance(intervalS * 1000);
      await meterRunningSessions(h.deps);
    }
    counting = "none";

    const perPass = (t: Tally, n: number): Tally => ({ requests: t.requests / n, reads: t.reads / n, writes: t.writes / n, rru: t.rru / n, wru: t.wru / n });
    const passesPerHour = 3600 / intervalS;
    const onePass = perPass(pass.all, PASSES);
    // The per-session part of a pass: the usage write (1 per session, 2 across a midnight); the rest is the running-session listing and per-org checks.
    const perSessionPass: Tally = { requests: 1, reads: 0, writes: 1, rru: 0, wru: 1 };
    const limitedOrgPass = perPass(pass.limited, PASSES * (ORGS / 2));
    const unlimitedOrgPass = perPass(pass.unlimited, PASSES * (ORGS / 2));
    // What the unlimited orgs' checks leave out: their usage writes are counted under sessions.
    const limitedCheck: Tally = { ...limitedOrgPass, requests: limitedOrgPass.requests - SESSIONS / ORGS, writes: limitedOrgPass.writes - SESSIONS / ORGS, wru: limitedOrgPass.wru - SESSIONS / ORGS };
    const unlimitedCheck: Tally = { ...unlimitedOrgPass, requests: unlimitedOrgPass.requests - SESSIONS / ORGS, writes: unlimitedOrgPass.writes - SESSIONS / ORGS, wru: unlimitedOrgPass.wru - SESSIONS / ORGS };
    const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2));
    table(
      ["what", "requests", "reads", "writes", "RRU", "WRU", "USD"],
      [
        [`one pass over ${SESSIONS} running sessions in ${ORGS} orgs (all of it)`, fmt(onePass.requests), fmt(onePass.reads), fmt(onePass.writes), fmt(onePass.rru), fmt(onePass.wru), usd(onePass).toExponential(2)],
        [`per running-session-hour (1 usage write per pass, ${passesPerHour} passes)`, fmt(perSessionPass.requests * passesPerHour), "0", fmt(passesPerHour), "0", fmt(passesPerHour), usd(perSessionPass, passesPerHour).toFixed(6)],
        [`per org-day, org with a monthly budget (limits read + month Query per pass)`, fmt(limitedCheck.requests * passesPerHour * 24), fmt(limitedCheck.reads * passesPerHour * 24), "0", fmt(limitedCheck.rru * passesPerHour * 24), "0", usd(limitedCheck, passesPerHour * 24).toFixed(6)],
        [`per org-day, unlimited org (limits read per pass)`, fmt(unlimitedCheck.requests * passesPerHour * 24), fmt(unlimitedCheck.reads * passesPerHour * 24), "0", fmt(unlimitedCheck.rru * passesPerHour * 24), "0", usd(unlimitedCheck, passesPerHour * 24).toFixed(6)],
        [`per lifecycle (run, pause, resume, stop): usage and limits items only`, fmt(lifecycle.usage.requests), fmt(lifecycle.usage.reads), fmt(lifecycle.usage.writes), fmt(lifecycle.usage.rru), fmt(lifecycle.usage.wru), usd(lifecycle.usage).toExponential(2)],
        [`per lifecycle (run, pause, resume, stop): every request`, fmt(lifecycle.all.requests), fmt(lifecycle.all.reads), fmt(lifecycle.all.writes), fmt(lifecycle.all.rru), fmt(lifecycle.all.wru), usd(lifecycle.all).toExponential(2)],
      ],
    );
    note(`New in issue 16 (no earlier figures). METERING_INTERVAL_SECONDS = ${intervalS}. A pass costs the running-session listing (GSI2 Query, paged by 100) plus one`);
    note("conditional UpdateItem per running session (two across a UTC midnight) plus, per org with running sessions, one GetItem of its limits and, with a");
    note("monthly budget, one Query over the month's usage items (one item per running interval per day): O(running sessions / interval), as the issue asks.");
    note("Per lifecycle: one close write per running interval ended, one limits GetItem per ensure-runtime admission (plus one take of a running place when");
    note("the org has maxRunningSessions). The session listing is shared by every running session of the pass and left out of the per-session-hour row.");
    for (const line of dynamoCostNotes()) note(line);
  } finally {
    await h.close();
  }
}
