/**
 * Module boundaries (issue 13 §3), checked over the source itself: configuration is read in one
 * module, stores are built in one composition root, shared code does not live in Lambda entry
 * modules, the domain does not reach into the sandbox CLI, and the sandbox image's tree
 * (sandbox/) depends on nothing outside it.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "../..");

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(ROOT, dir))) {
    const rel = path.posix.join(dir, entry);
    if (statSync(path.join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.ts$/.test(entry) && !entry.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

const read = (rel: string) => readFileSync(path.join(ROOT, rel), "utf8");

/** The source without comments (string contents are left alone; `//` only counts at a line start or after whitespace). */
function code(rel: string): string {
  return read(rel)
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/(^|\s)\/\/.*$/gm, "$1");
}

/** Repository-relative targets of the file's relative imports (static and dynamic). */
function imports(rel: string): string[] {
  const text = code(rel);
  const specs = [...text.matchAll(/(?:import|export)\s[^;]*?from\s+["']([^"']+)["']/g), ...text.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1] ?? "");
  return specs
    .filter((s) => s.startsWith("."))
    .map((s) => {
      const base = path.posix.normalize(path.posix.join(path.posix.dirname(rel), s));
      for (const candidate of [`${base}.ts`, `${base}/index.ts`, base]) if (existsSync(path.join(ROOT, candidate))) return candidate;
      return base;
    });
}

const functions = sourceFiles("functions");
const sandbox = sourceFiles("sandbox");
const infra = sourceFiles("infra");

describe("module boundaries", () => {
  it("no module but functions/config/config.ts (and its environment.ts) reads process.env (functions/ and the local runtime)", () => {
    const readers = [...functions, "infra/local/runtime.ts"].filter((f) => f !== "functions/config/config.ts" && f !== "functions/config/environment.ts" && /\bprocess\.env\b/.test(code(f)));
    expect(readers).toEqual([]);
  });

  it("the local runtime builds the configuration it needs instead of mutating a parsed one", () => {
    expect(code("infra/local/runtime.ts")).not.toMatch(/\(config as\b/);
  });

  it("stores are built only by the composition root (functions/composition), in functions/ and infra/", () => {
    const builders = [...functions, ...infra].filter((f) => !f.startsWith("functions/composition/") && !f.startsWith("functions/store/") && /new Dynamo[A-Za-z]*(Store|Queue|Log|Registry)\(/.test(code(f)));
    expect(builders).toEqual([]);
  });

  it("nothing imports a Lambda entry module except the route and step tables (shared code lives elsewhere)", () => {
    const entries = new Set(functions.filter((f) => /^export const handler\s*=/m.test(code(f))));
    expect(entries.size).toBeGreaterThan(10);
    // The tables the stack and the local runtime read (never in a Lambda bundle) name every entry.
    const localRouteTables = new Set(["functions/http/routes.ts", "functions/ws/routes.ts", "functions/flows/steps/index.ts"]);
    const offenders = functions.filter((f) => !localRouteTables.has(f)).flatMap((f) => imports(f).filter((t) => entries.has(t)).map((t) => `${f} -> ${t}`));
    expect(offenders).toEqual([]);
  });

  it("the domain imports nothing from the sandbox CLI", () => {
    const offenders = functions.filter((f) => f.startsWith("functions/domain/")).flatMap((f) => imports(f).filter((t) => t.startsWith("sandbox/cli/")).map((t) => `${f} -> ${t}`));
    expect(offenders).toEqual([]);
  });

  it("sandbox/shared, sandbox/cli and sandbox/sidecar import nothing from functions/ or infra/", () => {
    // (sandbox/boot still imports domain types and git-freshness from functions/domain; its image
    // bundle inlines them, see sandbox/image/build-context.ts.)
    const selfContained = sandbox.filter((f) => /^sandbox\/(shared|cli|sidecar)\//.test(f));
    expect(selfContained).toContain("sandbox/shared/env-file-schema.ts");
    const offenders = selfContained.flatMap((f) => imports(f).filter((t) => !t.startsWith("sandbox/")).map((t) => `${f} -> ${t}`));
    expect(offenders).toEqual([]);
  });

  it("one process-group implementation: sandbox/shared/process-group.ts", () => {
    const copies = [...functions, ...sandbox, ...infra].filter((f) => path.posix.basename(f) === "process-group.ts");
    expect(copies).toEqual(["sandbox/shared/process-group.ts"]);
  });

  it("functions/flows/ holds Step Functions steps and their plumbing, not the services HTTP, WebSocket and the relay share", () => {
    const shared = ["prompt-delivery.ts", "submit-prompt.ts", "broadcast.ts"];
    expect(functions.filter((f) => f.startsWith("functions/flows/") && shared.includes(path.posix.basename(f)))).toEqual([]);
    for (const f of shared) expect(functions).toContain(`functions/services/${f}`);
    const fromFlows = ["functions/relay/relay.ts", "functions/ws/handlers/message.ts", "functions/http/handlers/create-prompt.ts"].flatMap((f) =>
      imports(f).filter((t) => t.startsWith("functions/flows/") && shared.includes(path.posix.basename(t))),
    );
    expect(fromFlows).toEqual([]);
  });
});
