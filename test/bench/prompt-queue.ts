/**
 * Section 3b: the prompt queue's cost per turn against the session's history (issue 15's
 * "cost at scale"). One turn's queue requests, in the order the prompt route
 * (services/submit-prompt.ts, `deliverQueuedPrompts`) and the relay's idle boundary
 * (`completeTurn`) make them, on the real DynamoPromptQueue over dynalite, for a session that
 * already had 0 to 500 prompts. Before, every read of the queue read every prompt the session
 * ever had; now finished prompts live in their own key range and the queue's reads read the
 * queue. Alone:
 *   POWERTOOLS_LOG_LEVEL=SILENT BENCH_ONLY="prompt queue" npx tsx test/bench/main.ts
 */
import { newSessionId } from "../../functions/domain/ids";
import { DynamoPromptQueue } from "../../functions/store/dynamo-session-items";
import { startTestTable } from "../support/dynalite";
import { countDynamoRequests, USD_PER_RRU, USD_PER_WRU, type DynamoRequest } from "./dynamo-usage";
import { heading, note, table } from "./report";

const HISTORIES = [0, 10, 100, 500];
/** A prompt's text: a short question (the item is ~0.4 KB). */
const CONTENT = "Please add a unit test for the date parser and fix the failing case in utils/date.ts.";

/** Measured by this section on the store before (77bec47: one key range, every read of the whole history). */
const BEFORE: Record<number, { requests: number; rru: number; wru: number }> = {
  0: { requests: 7, rru: 4, wru: 3 },
  10: { requests: 7, rru: 4, wru: 3 },
  100: { requests: 7, rru: 40, wru: 3 },
  500: { requests: 7, rru: 184, wru: 3 },
};

export async function benchPromptQueue(): Promise<void> {
  heading("3b. Prompt queue: one turn's queue requests against the session's history (dynalite, the real DynamoPromptQueue)");
  const t = await startTestTable();
  try {
    const prompts = new DynamoPromptQueue(t.doc, t.tableName);
    const requests: DynamoRequest[] = [];
    let counting = false;
    countDynamoRequests(t.doc, (r) => {
      if (counting) requests.push(r);
    });
    let clock = Date.parse("2026-11-01T00:00:00.000Z");
    const now = () => new Date((clock += 10));
    const turn = async (sessionId: string): Promise<void> => {
      // The prompt route: store it, then deliver (queued, processing, the move that sends it).
      const prompt = await prompts.enqueue({ sessionId, content: CONTENT, source: "user:bench", now: now() });
      await prompts.list(sessionId, "queued");
      await prompts.list(sessionId, "processing");
      await prompts.move(prompt, "queued", "processing", now());
      // The relay at the turn's idle boundary: complete it, then deliver the next (none).
      for (const p of await prompts.list(sessionId, "processing")) await prompts.move(p, "processing", "completed", now());
      await prompts.list(sessionId, "queued");
    };
    const rows: (string | number)[][] = [];
    for (const history of HISTORIES) {
      const sessionId = newSessionId();
      for (let i = 0; i < history; i++) await turn(sessionId);
      counting = true;
      const mark = requests.length;
      await turn(sessionId);
      counting = false;
      const measured = requests.slice(mark);
      const rru = measured.reduce((a, r) => a + r.rru, 0);
      const wru = measured.reduce((a, r) => a + r.wru, 0);
      const usd = (rru * USD_PER_RRU + wru * USD_PER_WRU) * 1_000;
      const before = BEFORE[history];
      const beforeUsd = before ? (before.rru * USD_PER_RRU + before.wru * USD_PER_WRU) * 1_000 : null;
      const ops = new Map<string, number>();
      for (const r of measured) ops.set(r.op, (ops.get(r.op) ?? 0) + 1);
      rows.push([
        history.toLocaleString("en-US"),
        `${measured.length} (${[...ops].map(([op, n]) => `${op} ×${n}`).join(", ")})`,
        rru,
        wru,
        `$${usd.toFixed(4)}`,
        before ? `${before.requests} requests, ${before.rru} RRU, ${before.wru} WRU: $${(beforeUsd ?? 0).toFixed(4)}` : "-",
      ]);
    }
    table(["prompts before this one", "requests", "RRU", "WRU", "$ / 1,000 turns", "at 77bec47 (one key range)"], rows);
    note("A turn: the route stores the prompt and delivers it (queued, processing, the move), the relay completes it at the idle boundary and looks for the next.");
    note("Finishing a prompt now costs 2 more writes (its relocation: a put in the finished range, a delete from the queue's), so a session's first turns cost a little more;");
    note("the reads no longer grow with the history (before, 4 Queries a turn each read every prompt ever: a session's queue cost grew with the square of its prompts).");
    note("An idle check's (and an idle snapshot's) two queue Queries are one now. $1.25 per million WRU, $0.25 per million RRU; strongly consistent reads.");
  } finally {
    await t.close();
  }
}
