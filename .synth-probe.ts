import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { buildApp } from "/work/main/infra/app";
const outdir = mkdtempSync(path.join(tmpdir(), "probe-"));
const { app } = buildApp(new App({ outdir }));
try { app.synth(); } catch (e) { console.error(String(e).slice(0, 3000)); }
const r = JSON.parse(readFileSync(path.join(outdir, "validation-report.json"), "utf8"));
for (const p of r.pluginReports) { console.log(p.pluginName, p.conclusion); for (const v of p.violations) console.log(JSON.stringify(v).slice(0, 600)); }
console.log(outdir);
