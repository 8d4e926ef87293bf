/**
 * Section "slack" (issue 17): the Slack functions' bundles (size, cold import, as the CDK stack
 * builds them), and the ack's latency over the local runtime (signed Events API deliveries, each
 * verified, recorded with a conditional write in dynalite and enqueued; p50/p99 warm, and the
 * first request cold). Targets: ack p99 <= 300 ms warm on the local runtime, cold import <= 100 ms.
 */
import { mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { startLocalRuntime } from "../../infra/local/runtime";
import { slackSignature } from "../../functions/slack/signature";
import { lambdaBuildOptions } from "./esbuild-options";
import { importOnce } from "./provider-packaging";
import { fileSizes, heading, kib, median, ms, note, percentile, table, topContributors } from "./report";

const ENTRIES = [
  { id: "SlackAck", entry: "functions/slack/ack-entry.ts" },
  { id: "SlackWorker", entry: "functions/slack/worker-entry.ts" },
  { id: "SlackWorkspace", entry: "functions/slack/workspace-entry.ts" },
];
const COLD_RUNS = 5;
const ACK_REQUESTS = 400;
const SECRET = "bench-signing-secret";

export async function benchSlack(repoRoot: string, tmpDir: string): Promise<void> {
  heading("Slack (issue 17): function bundles and ack latency");
  const dir = path.join(tmpDir, "slack");
  mkdirSync(dir, { recursive: true });
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"), "dir");
  const rows: (string | number)[][] = [];
  const notes: string[] = [];
  for (const fn of ENTRIES) {
    const outfile = path.join(dir, fn.id, "index.mjs");
    const result = await build(lambdaBuildOptions(repoRoot, fn.entry, outfile));
    const js = fileSizes(outfile);
    const times: number[] = [];
    for (let i = 0; i < COLD_RUNS; i++) times.push((await importOnce(outfile, path.dirname(outfile))).ms);
    rows.push([fn.id, kib(js.raw), kib(js.gzip), ms(median(times))]);
    notes.push(`${fn.id}: ${topContributors(result.metafile)}`);
  }
  table(["function", "index.mjs", "gzip", `cold import (median of ${COLD_RUNS})`], rows);
  for (const n of notes) note(n);
  note("earlier (first version, config.ts's zod in the ack): SlackAck 122.9 KiB, 37.6 KiB gzip, cold import 76 ms on a quiet run.");

  const runtime = await startLocalRuntime({ port: 0, env: { SLACK_SIGNING_SECRET: SECRET, SLACK_API_URL: "http://127.0.0.1:9/api/", RELAY_SCAN_INTERVAL_SECONDS: "3600" } });
  try {
    const bind = await fetch(`${runtime.url}/v1/slack/workspace`, { method: "PUT", headers: { authorization: `Bearer ${runtime.devApiToken}`, "content-type": "application/json" }, body: JSON.stringify({ teamId: "TBENCH" }) });
    if (bind.status !== 200) throw new Error(`bind: ${bind.status}`);
    const send = async (i: number): Promise<number> => {
      // A thread message in no session's thread: the full ack path (verify, record, enqueue); the worker reads one item and drops it.
      const body = JSON.stringify({ type: "event_callback", team_id: "TBENCH", event_id: `EvBench${i}`, event: { type: "message", channel: "CBENCH", user: "UBENCH", text: "hi", ts: `1.${i}`, thread_ts: "0.1" } });
      const ts = String(Math.floor(Date.now() / 1000));
      const started = performance.now();
      const res = await fetch(`${runtime.url}/slack/events`, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": ts, "x-slack-signature": slackSignature(SECRET, ts, body) }, body });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`ack answered ${res.status}`);
      return performance.now() - started;
    };
    const first = await send(0);
    const warm: number[] = [];
    for (let i = 1; i <= ACK_REQUESTS; i++) warm.push(await send(i));
    await runtime.slack.settled();
    table(
      ["ack (local runtime, over HTTP)", "first request", "p50", "p99", "max", "target p99 <= 300 ms"],
      [[`${ACK_REQUESTS} signed event deliveries`, ms(first), ms(median(warm)), ms(percentile(warm, 99)), ms(Math.max(...warm)), percentile(warm, 99) <= 300 ? "yes" : "NO"]],
    );
    note("each request: HMAC verify, one conditional PutItem (dynalite), one in-process enqueue; the worker runs after the answer.");
  } finally {
    await runtime.close();
  }
}
