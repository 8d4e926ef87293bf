/**
 * Section 5c: the relay's backstop scan at 10,000 running sessions (issue 15). What one relay
 * reads per hour from the running sessions' index: before, a full pass every scan period (60 s);
 * now one page of 1,000 per period, going on from its cursor (functions/relay/relay.ts
 * `backstopNow`), so a full pass takes 10 periods. Measured on dynalite's consumed capacity for
 * the real `listClaimable` Query (GSI2, projection ALL, so billed on the whole session items).
 * Alone:
 *   POWERTOOLS_LOG_LEVEL=SILENT BENCH_ONLY="relay backstop" npx tsx test/bench/main.ts
 */
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession } from "../support/builders";
import { startTestTable } from "../support/dynalite";
import { countDynamoRequests, USD_PER_RRU, type DynamoRequest } from "./dynamo-usage";
import { heading, note, table } from "./report";

const RUNNING = 10_000;
const PAGE = 1_000;
const PERIOD_SECONDS = 60;
const HOURS_PER_MONTH = 730;

async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    }),
  );
}

export async function benchRelayBackstop(): Promise<void> {
  heading(`5c. Relay backstop scan at ${RUNNING.toLocaleString("en-US")} running sessions (dynalite, the real listClaimable Query)`);
  const t = await startTestTable();
  try {
    const sessions = new DynamoSessionStore(t.doc, t.tableName);
    const leases = new DynamoRelayLeaseStore(t.doc, t.tableName);
    const started = performance.now();
    await pool(
      Array.from({ length: RUNNING }, (_, n) => n),
      32,
      async (n) => {
        const at = new Date().toISOString();
        await sessions.createSession(
          buildSession({ status: "running", sandboxId: `sb-bench-${n}`, openCodeUrl: `https://sb-bench-${n}.example.invalid`, codingAgentSessionId: `ses_bench${n}`, lastActivityAt: at }),
        );
      },
    );
    note(`${RUNNING.toLocaleString("en-US")} running sessions written in ${((performance.now() - started) / 1000).toFixed(1)} s (set-up, not measured)`);
    const requests: DynamoRequest[] = [];
    countDynamoRequests(t.doc, (r) => requests.push(r));
    const live = new Map<string, number>();
    const now = new Date();

    // Before: every period read every page.
    let mark = requests.length;
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await leases.listClaimable(now, { limit: PAGE, cursor, live });
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    const full = requests.slice(mark);
    const fullRru = full.reduce((a, r) => a + r.rru, 0);

    // Now: one page per period.
    mark = requests.length;
    await leases.listClaimable(now, { limit: PAGE, cursor: null, live });
    const one = requests.slice(mark);
    const pageRru = one.reduce((a, r) => a + r.rru, 0);

    const periodsPerHour = 3600 / PERIOD_SECONDS;
    const rows: [string, number, number, number, string][] = [
      ["before: a full pass every period", pages, fullRru, fullRru * periodsPerHour, `$${(fullRru * periodsPerHour * HOURS_PER_MONTH * USD_PER_RRU).toFixed(2)}`],
      ["now: one page per period (full pass in 10 periods)", 1, pageRru, pageRru * periodsPerHour, `$${(pageRru * periodsPerHour * HOURS_PER_MONTH * USD_PER_RRU).toFixed(2)}`],
    ];
    table(
      ["backstop, per relay", "Query pages / period", "RRU / period", "RRU / hour", "$ / month"],
      rows.map(([label, p, rru, hour, month]) => [label, p, rru.toFixed(1), Math.round(hour).toLocaleString("en-US"), month]),
    );
    note(`Scan period ${PERIOD_SECONDS} s (RELAY_SCAN_INTERVAL_SECONDS); per relay task: every task runs its own backstop. $0.25 per million RRU.`);
    note("A full scan still runs at start, when a peer relay dies (its sessions are taken over at once) and after a lost heartbeat.");
    note("The backstop covers only a nudge that could not be handled: nudges are durable SQS messages (section 4), no longer polled items.");
  } finally {
    await t.close();
  }
}
