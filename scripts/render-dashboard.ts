/**
 * Renders one of the stack's dashboards (default Lifecycle) to an HTML page, offline: synthesizes
 * the app without bundling, reads the ops nested stack's dashboard body and lays its widgets out
 * on CloudWatch's grid (infra/ops-dashboard-render.ts). `npm run ops:render -- Health out.html`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { buildApp } from "../infra/app";
import { dashboardsOf, renderDashboardHtml } from "../infra/ops-dashboard-render";
import { OPS_DASHBOARDS, type OpsDashboard } from "../infra/ops-stack";

export function renderDashboard(name: OpsDashboard): { html: string; dashboardName: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "cdk-render-"));
  try {
    const { stack } = buildApp(new App({ outdir: dir, context: { "aws:cdk:bundling-stacks": [] } }));
    const dashboards = dashboardsOf(Template.fromStack(stack.ops).toJSON());
    const dashboardName = `${stack.stackName}-${name}`;
    const found = dashboards[dashboardName];
    if (!found) throw new Error(`no dashboard ${dashboardName} (have ${Object.keys(dashboards).join(", ")})`);
    return { html: renderDashboardHtml(dashboardName, found.body), dashboardName };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith("render-dashboard.ts")) {
  const name = (process.argv[2] ?? "Lifecycle") as OpsDashboard;
  if (!OPS_DASHBOARDS.includes(name)) {
    console.error(`unknown dashboard ${name}: one of ${OPS_DASHBOARDS.join(", ")}`);
    process.exit(2);
  }
  const out = process.argv[3] ?? `dashboard-${name}.html`;
  const { html, dashboardName } = renderDashboard(name);
  writeFileSync(out, html);
  console.log(`${dashboardName} -> ${out}`);
}
