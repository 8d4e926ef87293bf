/**
 * Operations (issue 19): the dashboards and alarms name only metrics the code emits, and every
 * metric the code can emit (the registry, functions/observability/metric-registry.ts) is on a
 * dashboard or in an alarm; the dashboards stay under CloudWatch's limits; every alarm notifies;
 * the operations alarms carry runbook lines; the offline render lays out one dashboard.
 */
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { METRIC_DEFINITIONS, type MetricDefinition } from "../../functions/observability/metric-registry";
import { METRICS_NAMESPACE } from "../../infra/control-plane-stack";
import { alarmRefs, dashboardRefs, dashboardsOf, metricCount, renderDashboardHtml, type DashboardBody, type MetricRef } from "../../infra/ops-dashboard-render";
import { OPS_DASHBOARDS } from "../../infra/ops-stack";
import { stackQueries, synthWithoutBundling, type Synthesized } from "./stack-queries";

/** CloudWatch's documented dashboard limits: 500 widgets per dashboard, 500 metrics per graph, 2,500 per dashboard. */
const MAX_WIDGETS = 500;
const MAX_METRICS_PER_WIDGET = 500;
const MAX_METRICS_PER_DASHBOARD = 2_500;
/** PutDashboard's body and CloudFormation's template (from S3) are capped at 1 MB. */
const MAX_BYTES = 1_000_000;

type Json = { Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

let synth: Synthesized;
let templates: Record<string, Json>;
let dashboards: Record<string, { body: DashboardBody; size: number }>;

beforeAll(() => {
  synth = synthWithoutBundling();
  templates = {
    root: synth.template.toJSON() as Json,
    slack: Template.fromStack(synth.stack.slack).toJSON() as Json,
    automations: Template.fromStack(synth.stack.automations).toJSON() as Json,
    apiDocs: Template.fromStack(synth.stack.apiDocs).toJSON() as Json,
    console: Template.fromStack(synth.stack.console).toJSON() as Json,
    ops: Template.fromStack(synth.stack.ops).toJSON() as Json,
  };
  dashboards = dashboardsOf(templates.ops ?? {});
}, 300_000);
afterAll(() => rmSync(synth.dir, { recursive: true, force: true }));

const key = (name: string, dims: readonly string[]) => `${name} {${[...dims].sort().join(",")}}`;
const declaredSets = (def: MetricDefinition) => def.dimensionSets.map((set) => key(def.name, ["service", ...set]));

/** Our namespace's references that the registry does not declare (name, service or dimension set). */
function undeclared(refs: MetricRef[], namespace = METRICS_NAMESPACE): string[] {
  return refs
    .filter((r) => r.namespace === namespace)
    .filter((r) => {
      const def = METRIC_DEFINITIONS.find((d) => d.name === r.name);
      if (!def) return true;
      if (r.dimensions.service !== def.service) return true;
      return !declaredSets(def).includes(key(r.name, Object.keys(r.dimensions)));
    })
    .map((r) => `${r.where}: ${key(r.name, Object.keys(r.dimensions))} service=${r.dimensions.service ?? "-"}`);
}

/** Registered (metric, dimension set) pairs that no reference shows. */
function unshown(refs: MetricRef[], namespace = METRICS_NAMESPACE): string[] {
  const shown = new Set(refs.filter((r) => r.namespace === namespace).map((r) => key(r.name, Object.keys(r.dimensions))));
  return METRIC_DEFINITIONS.flatMap(declaredSets).filter((k) => !shown.has(k));
}

const titles = (body: DashboardBody) => body.widgets.map((w) => String(w.properties?.title ?? ""));
/** The metric rows of the one widget titled `title` (`"."` repeats the row above, resolved). */
function rowsOf(body: DashboardBody, title: string): unknown[][] {
  const found = body.widgets.filter((w) => w.properties?.title === title);
  expect(found, `${title} in ${titles(body).join(" | ")}`).toHaveLength(1);
  let previous: unknown[] = [];
  return ((found[0]?.properties?.metrics as unknown[][] | undefined) ?? []).map((row) => {
    const resolved = row.map((f, i) => (f === "." ? previous[i] : f));
    previous = resolved;
    return resolved;
  });
}

/** A metric row's value of one dimension. */
function dimensionOf(row: unknown[], name: string): unknown {
  const fields = typeof row.at(-1) === "object" ? row.slice(0, -1) : row;
  for (let i = 2; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

const allRefs = () => [...Object.entries(dashboards).flatMap(([name, d]) => dashboardRefs(name, d.body)), ...Object.values(templates).flatMap(alarmRefs)];

describe("operations: dashboards and alarms", () => {
  it("builds the four dashboards in the ops nested stack, and the root grows by that nested stack only", () => {
    expect(Object.keys(dashboards).sort()).toEqual(OPS_DASHBOARDS.map((d) => `SandboxControlPlane-${d}`).sort());
    expect(Object.values(synth.resources).filter((r) => r.Type === "AWS::CloudWatch::Dashboard")).toEqual([]);
    // 488 before issue 19; the ops nested stack is the one resource added.
    expect(Object.keys(synth.resources).length).toBeLessThanOrEqual(492);
  });

  it("every widget and alarm names only metrics the code emits (registry names, services and dimension sets)", () => {
    const refs = allRefs();
    expect(refs.filter((r) => r.namespace === METRICS_NAMESPACE).length).toBeGreaterThan(30);
    expect(undeclared(refs)).toEqual([]);
  });

  it("every metric the code can emit, with each of its dimension sets, is on a dashboard or in an alarm", () => {
    expect(unshown(allRefs())).toEqual([]);
  });

  it("Health graphs throttles and concurrency of every function (the automations and OpenAPI ones too), DynamoDB throttles, and the automations schedule group", () => {
    const health = dashboards["SandboxControlPlane-Health"]?.body;
    if (!health) throw new Error("no Health dashboard");
    const stack = synth.stack;
    const ours = new Set([...Object.values(stack.functions), stack.automations.fired, stack.automations.routes, stack.apiDocs.openApi, stack.slack.ack, stack.slack.worker]);
    const throttles = rowsOf(health, "Lambda throttles (Sum) by function");
    expect(throttles).toHaveLength(ours.size);
    expect(new Set(throttles.map((r) => `${r[0]} ${r[1]}`))).toEqual(new Set(["AWS/Lambda Throttles"]));
    const concurrency = rowsOf(health, "Lambda concurrent executions (Maximum) by function");
    expect(concurrency).toHaveLength(ours.size);
    expect(concurrency.every((r) => r[1] === "ConcurrentExecutions" && (r.at(-1) as { stat?: string }).stat === "Maximum")).toBe(true);
    // The nested stacks' functions arrive as references to their stacks' outputs.
    const named = JSON.stringify(concurrency);
    for (const nested of ["Automations", "ApiDocs", "Slack"]) expect(named).toMatch(new RegExp(`reference.*${nested}`));
    const ddb = rowsOf(health, "DynamoDB throttles: read/write throttle events, throttled requests by operation");
    expect(ddb.map((r) => r[1])).toEqual(expect.arrayContaining(["ReadThrottleEvents", "WriteThrottleEvents", "ThrottledRequests"]));
    expect(ddb.filter((r) => r[1] === "ThrottledRequests").map((r) => dimensionOf(r, "Operation"))).toEqual(expect.arrayContaining(["GetItem", "Query", "TransactWriteItems"]));
    const scheduler = rowsOf(health, "Scheduler: target errors, dropped and throttled invocations");
    expect(new Set(scheduler.map((r) => dimensionOf(r, "ScheduleGroup")))).toEqual(new Set(["SandboxControlPlane-lifecycle", "SandboxControlPlane-maintenance", "SandboxControlPlane-automations"]));
  });

  it("Lifecycle graphs sessions by status; Cost graphs AWS requests per lifecycle; the Slack ack latency graph draws the 3 s deadline", () => {
    const lifecycle = dashboards["SandboxControlPlane-Lifecycle"]?.body;
    const cost = dashboards["SandboxControlPlane-Cost"]?.body;
    const consumers = dashboards["SandboxControlPlane-Consumers"]?.body;
    if (!lifecycle || !cost || !consumers) throw new Error("missing dashboards");
    expect(JSON.stringify(rowsOf(lifecycle, "Sessions by status (metering pass: starting, running, paused, error)"))).toContain('MetricName=\\"SessionsByStatus\\"');
    const perLifecycle = rowsOf(cost, "AWS requests per lifecycle (ensure-runtime started); Step Functions transitions not included: no per-state-machine metric");
    const expressions = perLifecycle.map((r) => (r.at(-1) as { expression?: string; label?: string; id?: string })).filter((o) => o.expression);
    expect(expressions.map((o) => o.label)).toEqual(["DynamoDB requests", "Lambda invocations", "Scheduler invocation attempts", "all of them"]);
    for (const o of expressions) expect(o.expression).toMatch(/^IF\(lifecycles > 0, SUM\(FILL\(\[[a-z_A-Z0-9,]+\], 0\)\) \/ lifecycles\)$/);
    const sources = perLifecycle.filter((r) => typeof r[0] === "string" && r[0] !== ".").map((r) => `${r[0]} ${r[1]}`);
    expect(new Set(sources)).toEqual(new Set(["AWS/States ExecutionsStarted", "AWS/DynamoDB SuccessfulRequestLatency", "AWS/Lambda Invocations", "AWS/Scheduler InvocationAttemptCount"]));
    expect(perLifecycle.filter((r) => r[1] === "SuccessfulRequestLatency").every((r) => (r.at(-1) as { stat?: string }).stat === "SampleCount")).toBe(true);
    expect(JSON.stringify(titles(cost))).toContain("DynamoDB capacity units per flow execution");
    // The construct's latency graph (titled "Latency") of the ack function: Slack's deadline on it, and on no other function's.
    const latency = consumers.widgets.filter((w) => w.properties?.title === "Latency");
    const ack = latency.filter((w) => JSON.stringify(w.properties?.metrics).includes("SlackAckFunction"));
    expect(ack).toHaveLength(1);
    expect(ack[0]?.properties?.annotations).toEqual({ horizontal: [{ value: 3000, label: "Slack's 3 s deadline", yAxis: "left" }] });
    expect(latency.filter((w) => w.properties?.annotations !== undefined)).toHaveLength(1);
  });

  it("the checks fail on drift: a widget naming an unknown metric or dimension set, a registered metric shown nowhere", () => {
    const body: DashboardBody = {
      widgets: [
        { type: "metric", properties: { title: "t", metrics: [[METRICS_NAMESPACE, "NoSuchMetric", "service", "sandbox-control-plane"]] } },
        { type: "metric", properties: { title: "t", metrics: [[METRICS_NAMESPACE, "TimeToRunning", "service", "sandbox-control-plane", "Provider", "modal"]] } },
        { type: "metric", properties: { title: "t", metrics: [[{ expression: `SEARCH('{${METRICS_NAMESPACE},service,mode} MetricName="IdleSnapshotLag" service="sandbox-control-plane"', 'p99', 300)` }]] } },
      ],
    };
    const refs = dashboardRefs("fake", body);
    expect(undeclared(refs)).toEqual([
      "fake widget 0 (t): NoSuchMetric {service} service=sandbox-control-plane",
      "fake widget 1 (t): TimeToRunning {Provider,service} service=sandbox-control-plane",
      "fake widget 2 (t): IdleSnapshotLag {mode,service} service=sandbox-control-plane",
    ]);
    expect(unshown(refs)).toContain("HeldStreams {service}");
  });

  it("no emitting call site names a metric with a string literal (they name it from the registry)", () => {
    const root = path.resolve(__dirname, "../..");
    const files = (dir: string): string[] =>
      readdirSync(path.join(root, dir)).flatMap((e) => {
        const rel = path.join(dir, e);
        return statSync(path.join(root, rel)).isDirectory() ? files(rel) : rel.endsWith(".ts") ? [rel] : [];
      });
    const offenders = files("functions").filter((f) => /\.(addMetric|put)\(\s*["'`][A-Z]|MetricName:\s*["'`]/.test(readFileSync(path.join(root, f), "utf8")));
    expect(offenders).toEqual([]);
  });

  it("each dashboard stays under CloudWatch's limits, and the ops template under CloudFormation's", () => {
    for (const [name, { body, size }] of Object.entries(dashboards)) {
      expect(body.widgets.length, name).toBeLessThanOrEqual(MAX_WIDGETS);
      expect(Math.max(...body.widgets.map(metricCount)), name).toBeLessThanOrEqual(MAX_METRICS_PER_WIDGET);
      expect(body.widgets.reduce((n, w) => n + metricCount(w), 0), name).toBeLessThanOrEqual(MAX_METRICS_PER_DASHBOARD);
      expect(size, name).toBeLessThan(MAX_BYTES);
    }
    expect(Buffer.byteLength(JSON.stringify(templates.ops))).toBeLessThan(MAX_BYTES);
  });

  it("every alarm of every template notifies the alarm topic and says what to check first, the composite included", () => {
    const topic = synth.stack.getLogicalId(synth.stack.alarmTopic.node.defaultChild as never);
    const alarms = Object.entries(templates).flatMap(([t, json]) =>
      Object.entries(json.Resources ?? {})
        .filter(([, r]) => r.Type === "AWS::CloudWatch::Alarm" || r.Type === "AWS::CloudWatch::CompositeAlarm")
        .map(([id, r]) => ({ id: `${t}/${id}`, actions: JSON.stringify(r.Properties?.AlarmActions ?? []), description: String(r.Properties?.AlarmDescription ?? "") })),
    );
    expect(alarms.length).toBeGreaterThan(40);
    // The nested stacks' alarms are read too (the console's stack has none today).
    for (const nested of ["slack", "automations", "apiDocs", "ops"]) expect(alarms.filter((a) => a.id.startsWith(`${nested}/`)).length, nested).toBeGreaterThan(0);
    // Each description says what to check first (issue 19).
    expect(alarms.filter((a) => !/Check first[: ]/.test(a.description)).map((a) => a.id)).toEqual([]);
    const silent = alarms.filter((a) => !(a.actions.includes(topic) || /referenceto.*AlarmTopic/i.test(a.actions) || /AlarmTopic/.test(a.actions)));
    expect(silent).toEqual([]);
  });

  it("the operations alarms: API 5xx rate, relay tasks, time to running p95, idle lag p99 > 2 s, and the composite over them, each with a runbook line", () => {
    const ops = Template.fromStack(synth.stack.ops);
    ops.hasResourceProperties("AWS::CloudWatch::Alarm", { MetricName: "RunningTaskCount", Namespace: "ECS/ContainerInsights", ComparisonOperator: "LessThanThreshold", Threshold: 2 });
    ops.hasResourceProperties("AWS::CloudWatch::Alarm", { MetricName: "IdleSnapshotLag", ExtendedStatistic: "p99", Threshold: 2000, ComparisonOperator: "GreaterThanThreshold" });
    const resources = (templates.ops?.Resources ?? {}) as Record<string, { Type: string; Properties: Record<string, unknown> }>;
    const alarms = Object.values(resources).filter((r) => r.Type === "AWS::CloudWatch::Alarm" || r.Type === "AWS::CloudWatch::CompositeAlarm");
    expect(alarms).toHaveLength(6);
    for (const a of alarms) expect(String(a.Properties.AlarmDescription)).toMatch(/^Runbook: .+ Check first /);
    const composite = alarms.find((a) => a.Type === "AWS::CloudWatch::CompositeAlarm");
    const rule = JSON.stringify(composite?.Properties.AlarmRule);
    // Its five siblings, the Slack dead letters and the root's circuit breaker and orphan alarms.
    expect(rule.match(/ALARM\(/g)).toHaveLength(8);
    const math = alarms.filter((a) => Array.isArray(a.Properties.Metrics)).map((a) => JSON.stringify(a.Properties.Metrics));
    expect(math.some((m) => m.includes('"5xx"') && m.includes('"Count"'))).toBe(true);
    expect(math.some((m) => m.includes("TimeToRunning") && m.includes("MAX(["))).toBe(true);
  });

  it("lifecycle and maintenance schedules send what failed every retry to the ops stack's dead-letter queue, which Scheduler's role may write", () => {
    const queues = Object.values(templates.ops?.Resources ?? {}).filter((r) => r.Type === "AWS::SQS::Queue");
    expect(queues.map((q) => q.Properties?.QueueName)).toEqual(["SandboxControlPlane-schedule-dead-letters"]);
    const arn = { "Fn::Join": ["", ["arn:", { Ref: "AWS::Partition" }, ":sqs:", { Ref: "AWS::Region" }, ":", { Ref: "AWS::AccountId" }, ":SandboxControlPlane-schedule-dead-letters"]] };
    const schedules = Object.values(synth.resources).filter((r) => r.Type === "AWS::Scheduler::Schedule");
    expect(schedules).toHaveLength(3);
    for (const sch of schedules) expect((sch.Properties.Target as { DeadLetterConfig?: unknown }).DeadLetterConfig).toEqual({ Arn: arn });
    // The functions that arm schedules name it on every schedule they create.
    expect(stackQueries(synth).envOf("ScheduleFired").SCHEDULE_DEAD_LETTER_ARN).toEqual(arn);
    const sends = Object.values(synth.resources)
      .filter((r) => r.Type === "AWS::IAM::Policy")
      .flatMap((r) => (r.Properties.PolicyDocument as { Statement: { Action: unknown; Resource: unknown }[] }).Statement)
      .filter((st) => st.Action === "sqs:SendMessage" && JSON.stringify(st.Resource) === JSON.stringify(arn));
    expect(sends).toHaveLength(1);
  });

  it("prices idle seconds avoided at the per-second prices given by context", () => {
    const priced = synthWithoutBundling({ providerPricesPerSecond: '{"modal":0.5,"e2b":0.25}' });
    try {
      const cost = dashboardsOf(Template.fromStack(priced.stack.ops).toJSON())["SandboxControlPlane-Cost"];
      expect(JSON.stringify(cost?.body)).toContain("FILL(avoided_modal, 0) * 0.5 + FILL(avoided_e2b, 0) * 0.25");
    } finally {
      rmSync(priced.dir, { recursive: true, force: true });
    }
  }, 300_000);

  it("renders one dashboard's widget layout to HTML offline", () => {
    const lifecycle = dashboards["SandboxControlPlane-Lifecycle"];
    if (!lifecycle) throw new Error("no Lifecycle dashboard");
    const html = renderDashboardHtml("SandboxControlPlane-Lifecycle", lifecycle.body);
    const sections = [...html.matchAll(/<section class="widget [^"]*" data-index="(\d+)" data-type="([^"]+)" style="left:(\d+)px;top:(\d+)px;width:(\d+)px;height:(\d+)px"><h2>([^<]*)<\/h2>/g)];
    expect(sections).toHaveLength(lifecycle.body.widgets.length);
    expect(sections.map((s) => s[7])).toEqual(expect.arrayContaining(["Time to running p95 by provider and start kind", "Idle lag p99 (grace expiry to snapshot)", "Prompt queue wait"]));
    // On the 24-column grid: nothing overflows to the right.
    for (const s of sections) expect(Number(s[3]) + Number(s[5])).toBeLessThanOrEqual(24 * 40);
    expect(html).toContain("<li>TimeToRunning {service, Provider, StartKind}</li>");
  });
});
