/**
 * Section "ops" (issue 19): the operations nested stack's dashboards against CloudWatch's limits
 * (widgets, metrics, body bytes), each rendered to an HTML page offline; what the dashboards,
 * alarms and custom metrics cost a month at list prices; and the cost of measuring every
 * provider call (the wrapper's overhead per call on an in-memory provider). Figures only.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { measuredProvider } from "../../functions/composition/measured-provider";
import { METRIC_DEFINITIONS } from "../../functions/observability/metric-registry";
import { RecordingMetricsSink } from "../../functions/ports/metrics-sink";
import { buildApp } from "../../infra/app";
import { dashboardsOf, metricCount, renderDashboardHtml } from "../../infra/ops-dashboard-render";
import { InstantSandboxProvider } from "../support/instant-provider";
import { heading, kib, note, table } from "./report";

/** CloudWatch list prices (us-east-1): dashboard-month, standard alarm metric-month, composite alarm-month, custom metric-month (first 10,000). */
const USD_PER_DASHBOARD = 3;
const USD_PER_ALARM_METRIC = 0.1;
const USD_PER_COMPOSITE = 0.5;
const USD_PER_CUSTOM_METRIC = 0.3;

export async function benchOps(tmpDir: string): Promise<void> {
  heading("ops: dashboards, alarms and provider-call metrics (issue 19)");
  const outdir = path.join(tmpDir, "ops-cdk");
  const { stack } = buildApp(new App({ outdir, context: { "aws:cdk:bundling-stacks": [] } }));
  const ops = Template.fromStack(stack.ops).toJSON() as { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> };
  const pages = path.join(tmpDir, "dashboards");
  mkdirSync(pages, { recursive: true });
  const rows: (string | number)[][] = [];
  for (const [name, { body, size }] of Object.entries(dashboardsOf(ops))) {
    const html = renderDashboardHtml(name, body);
    writeFileSync(path.join(pages, `${name}.html`), html);
    rows.push([name, body.widgets.length, Math.max(...body.widgets.map(metricCount)), body.widgets.reduce((n, w) => n + metricCount(w), 0), kib(size), kib(Buffer.byteLength(html))]);
  }
  table(["dashboard", "widgets (<=500)", "max metrics/widget (<=500)", "metric rows (<=2,500)", "body", "HTML page"], rows);

  const alarms = Object.values(ops.Resources).filter((r) => r.Type === "AWS::CloudWatch::Alarm");
  const alarmMetrics = alarms.reduce((n, a) => n + (Array.isArray(a.Properties.Metrics) ? (a.Properties.Metrics as { MetricStat?: unknown }[]).filter((m) => m.MetricStat).length : 1), 0);
  const composites = Object.values(ops.Resources).filter((r) => r.Type === "AWS::CloudWatch::CompositeAlarm").length;
  const dashboards = Object.values(ops.Resources).filter((r) => r.Type === "AWS::CloudWatch::Dashboard").length;
  // Custom metric series the code can emit, with the dimension values the stack knows of (routes and orgs vary: lower bound).
  const series = METRIC_DEFINITIONS.length;
  table(
    ["item", "count", "USD / month"],
    [
      ["dashboards", dashboards, `$${(dashboards * USD_PER_DASHBOARD).toFixed(2)}`],
      ["alarm metrics (ops stack)", alarmMetrics, `$${(alarmMetrics * USD_PER_ALARM_METRIC).toFixed(2)}`],
      ["composite alarms", composites, `$${(composites * USD_PER_COMPOSITE).toFixed(2)}`],
      ["registered metrics (each dimension value is its own series)", series, `>= $${(series * USD_PER_CUSTOM_METRIC).toFixed(2)}`],
    ],
  );
  note("HTML pages rendered in the bench's temporary directory (removed after); `npm run ops:render -- <Health|Lifecycle|Cost|Consumers> <file>` keeps one");

  // The provider wrapper: time per createSandbox+terminate pair, bare vs measured (in-memory provider, so only overhead shows).
  const N = 20_000;
  const time = async (p: { createSandbox: InstantSandboxProvider["createSandbox"]; terminate: InstantSandboxProvider["terminate"] }) => {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const { sandboxId } = await p.createSandbox({ sessionId: `ses_${i}`, repos: [], envVars: {} });
      await p.terminate(`ses_${i}`, sandboxId);
    }
    return ((performance.now() - t0) * 1000) / (2 * N);
  };
  const bare = await time(new InstantSandboxProvider());
  const sink = new RecordingMetricsSink();
  const measured = await time(measuredProvider(new InstantSandboxProvider(), sink));
  table(["provider call", "µs / call"], [["bare (in-memory provider)", bare.toFixed(2)], ["measured (ProviderCallDuration + registry check)", measured.toFixed(2)], ["overhead", (measured - bare).toFixed(2)]]);
  note(`${sink.recorded.length} data points recorded; a real provider call is a network round trip (tens to thousands of ms)`);
}
