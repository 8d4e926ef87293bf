/**
 * Reading the synthesized dashboards offline (issue 19): a dashboard's body out of its template
 * (CloudFormation tokens replaced by placeholders), the metrics its widgets name (metric arrays
 * and SEARCH expressions), the metrics alarms name, and an HTML page that lays out one
 * dashboard's widgets on CloudWatch's 24-column grid (`npm run ops:render`, scripts/render-dashboard.ts).
 */

export interface DashboardBody {
  widgets: Widget[];
  [key: string]: unknown;
}

export interface Widget {
  type: string;
  x?: number;
  y?: number;
  width?: number;
  height?: number;
  properties?: Record<string, unknown>;
}

/** One metric a widget or alarm names: namespace, name and dimension names (values left out). */
export interface MetricRef {
  namespace: string;
  name: string;
  dimensions: Record<string, string>;
  where: string;
}

/** A template value as a string, CloudFormation functions replaced by `{{...}}` placeholders. */
export function flatten(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number") return String(value);
  if (value && typeof value === "object") {
    const v = value as Record<string, unknown>;
    const join = v["Fn::Join"] as [string, unknown[]] | undefined;
    if (join) return join[1].map(flatten).join(join[0]);
    if ("Ref" in v) return `{{${String(v.Ref)}}}`;
    if ("Fn::GetAtt" in v) return `{{${(v["Fn::GetAtt"] as string[]).join(".")}}}`;
    return `{{${Object.keys(v)[0] ?? "token"}}}`;
  }
  return String(value);
}

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown> }>;

/** Every dashboard of a template by its name (DashboardName flattened) with its parsed body. */
export function dashboardsOf(template: { Resources?: Resources }): Record<string, { body: DashboardBody; size: number }> {
  const out: Record<string, { body: DashboardBody; size: number }> = {};
  for (const [id, r] of Object.entries(template.Resources ?? {})) {
    if (r.Type !== "AWS::CloudWatch::Dashboard") continue;
    const text = flatten(r.Properties?.DashboardBody);
    const name = flatten(r.Properties?.DashboardName ?? id);
    out[name] = { body: JSON.parse(text) as DashboardBody, size: Buffer.byteLength(text) };
  }
  return out;
}

const SEARCH = /SEARCH\(\s*'\{([^}]*)\}([^']*)'/g;

/** The metrics a SEARCH expression can return: its schema's namespace and dimension names, and its MetricName term. */
export function searchRefs(expression: string, where: string): MetricRef[] {
  const out: MetricRef[] = [];
  for (const m of expression.matchAll(SEARCH)) {
    const [namespace = "", ...dims] = (m[1] ?? "").split(",").map((s) => s.trim().replace(/^"|"$/g, ""));
    const name = /MetricName="([^"]+)"/.exec(m[2] ?? "")?.[1];
    if (!name) throw new Error(`${where}: a SEARCH without a MetricName term: ${expression}`);
    const service = /\bservice="([^"]+)"/.exec(m[2] ?? "")?.[1];
    out.push({ namespace, name, dimensions: Object.fromEntries(dims.map((d) => [d, d === "service" && service ? service : "*"])), where });
  }
  return out;
}

/** Metrics one widget names (a graph's `metrics` array: `[ns, name, dim, value, ..., {options}]`, `"."` repeats the row above). */
export function widgetRefs(widget: Widget, where: string): MetricRef[] {
  const rows = (widget.properties?.metrics as unknown[][] | undefined) ?? [];
  const out: MetricRef[] = [];
  let previous: unknown[] = [];
  for (const row of rows) {
    const options = row.length > 0 && typeof row[row.length - 1] === "object" ? (row[row.length - 1] as Record<string, unknown>) : {};
    const fields = typeof row[row.length - 1] === "object" ? row.slice(0, -1) : row;
    if (typeof options.expression === "string") out.push(...searchRefs(options.expression, where));
    if (fields.length < 2) continue;
    const resolved = fields.map((f, i) => (f === "." ? previous[i] : f));
    previous = resolved;
    const dimensions: Record<string, string> = {};
    for (let i = 2; i + 1 < resolved.length; i += 2) dimensions[String(resolved[i])] = String(resolved[i + 1]);
    out.push({ namespace: String(resolved[0]), name: String(resolved[1]), dimensions, where });
  }
  return out;
}

export function dashboardRefs(name: string, body: DashboardBody): MetricRef[] {
  return body.widgets.flatMap((w, i) => widgetRefs(w, `${name} widget ${i} (${String(w.properties?.title ?? w.type)})`));
}

/** Metrics the template's alarms name (single-metric alarms and metric-math alarms). */
export function alarmRefs(template: { Resources?: Resources }): MetricRef[] {
  const out: MetricRef[] = [];
  const dims = (d: unknown) => Object.fromEntries(((d as { Name: string; Value: unknown }[] | undefined) ?? []).map((x) => [x.Name, flatten(x.Value)]));
  for (const [id, r] of Object.entries(template.Resources ?? {})) {
    if (r.Type !== "AWS::CloudWatch::Alarm") continue;
    const p = r.Properties ?? {};
    if (typeof p.MetricName === "string") out.push({ namespace: flatten(p.Namespace), name: p.MetricName, dimensions: dims(p.Dimensions), where: `alarm ${id}` });
    for (const m of (p.Metrics as { MetricStat?: { Metric: { Namespace: unknown; MetricName: string; Dimensions?: unknown } } }[] | undefined) ?? []) {
      if (m.MetricStat) out.push({ namespace: flatten(m.MetricStat.Metric.Namespace), name: m.MetricStat.Metric.MetricName, dimensions: dims(m.MetricStat.Metric.Dimensions), where: `alarm ${id}` });
    }
  }
  return out;
}

/** Metrics a widget and all widgets of a dashboard count against CloudWatch's limits (metric rows and expressions). */
export function metricCount(widget: Widget): number {
  return ((widget.properties?.metrics as unknown[] | undefined) ?? []).length;
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * One dashboard as a static HTML page: each widget a box at its grid place (24 columns, rows of
 * 6 units as CloudWatch lays them out), titled, listing the series it plots. No data: the layout.
 */
export function renderDashboardHtml(name: string, body: DashboardBody): string {
  const unit = 40;
  const boxes = body.widgets.map((w, i) => {
    const x = w.x ?? 0;
    const y = w.y ?? 0;
    const width = w.width ?? 6;
    const height = w.height ?? 6;
    const title = String(w.properties?.title ?? (w.type === "text" ? "" : w.type));
    const series = widgetRefs(w, "").map((r) => `${r.name}${Object.keys(r.dimensions).length ? ` {${Object.keys(r.dimensions).join(", ")}}` : ""}`);
    const markdown = w.type === "text" ? String(w.properties?.markdown ?? "") : "";
    const list = series.length ? `<ul>${[...new Set(series)].map((s) => `<li>${escape(s)}</li>`).join("")}</ul>` : "";
    return `<section class="widget ${escape(w.type)}" data-index="${i}" data-type="${escape(w.type)}" style="left:${x * unit}px;top:${y * unit}px;width:${width * unit - 8}px;height:${height * unit - 8}px"><h2>${escape(title)}</h2>${markdown ? `<pre>${escape(markdown)}</pre>` : ""}${list}</section>`;
  });
  const rows = Math.max(0, ...body.widgets.map((w) => (w.y ?? 0) + (w.height ?? 6)));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(name)}</title>
<style>body{font:13px system-ui,sans-serif;margin:16px;background:#f4f4f4}#grid{position:relative;width:${24 * unit}px;height:${rows * unit}px}
.widget{position:absolute;box-sizing:border-box;background:#fff;border:1px solid #ccc;padding:6px;overflow:hidden}.widget h2{font-size:13px;margin:0 0 4px}
.widget ul{margin:0;padding-left:16px;color:#555}.widget pre{white-space:pre-wrap;margin:0}.text{background:#eef}</style></head>
<body><h1>${escape(name)}</h1><p>${body.widgets.length} widgets</p><div id="grid">
${boxes.join("\n")}
</div></body></html>
`;
}
