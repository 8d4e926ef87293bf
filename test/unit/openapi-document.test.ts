/**
 * The OpenAPI 3.1 document (`GET /v1/openapi.json`, functions/contract/openapi.ts): generated
 * from the handlers' own zod schemas, holding exactly the routes the route tables serve, and
 * valid by Redocly's recommended ruleset (`redocly lint`, the real CLI).
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { openApiDocument, undocumentedRoutes } from "../../functions/contract/openapi";
import { servedRoutes } from "../../functions/api-docs/served-routes";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { CONTRACT_OPERATIONS } from "../../functions/contract/http";
import { AUTOMATION_ROUTES } from "../../functions/automations/route-table";
import { SLACK_ACK_ROUTES, SLACK_WORKSPACE_ROUTES } from "../../functions/slack/routes";
import { API_DOC_ROUTES } from "../../functions/api-docs/routes";
import { MAX_REPOS } from "../../functions/http/request-fields";

const ROOT = path.resolve(__dirname, "../..");
const dir = mkdtempSync(path.join(tmpdir(), "openapi-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Doc = { openapi: string; paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Record<string, unknown> }> }; parameters?: { name: string; in: string }[]; security?: unknown[] }>> };
const doc = openApiDocument(servedRoutes()) as unknown as Doc;
const METHODS = new Set(["get", "put", "post", "patch", "delete"]);

describe("OpenAPI document", () => {
  it("holds exactly the served routes: the route table's, Slack's and its own", () => {
    const inDoc = Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).filter((m) => METHODS.has(m)).map((m) => `${m.toUpperCase()} ${p}`));
    const served = servedRoutes().map((r) => `${r.method} ${r.path}`);
    expect(inDoc.sort()).toEqual([...new Set(served)].sort());
    for (const r of HTTP_ROUTES) expect(inDoc, r.id).toContain(`${r.method} ${r.path}`);
    expect(inDoc).toContain("GET /v1/openapi.json");
    expect(undocumentedRoutes(servedRoutes())).toEqual([]);
  });

  it("describes each route once, under the route table's id", () => {
    const keys = CONTRACT_OPERATIONS.map((o) => `${o.method} ${o.path}`);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
    const tables: readonly { id: string; method: string; path: string }[] = [...HTTP_ROUTES, ...SLACK_ACK_ROUTES, ...SLACK_WORKSPACE_ROUTES, ...AUTOMATION_ROUTES, ...API_DOC_ROUTES];
    const idOf = new Map(tables.map((r) => [`${r.method} ${r.path}`, r.id]));
    const mismatched = CONTRACT_OPERATIONS.filter((o) => idOf.has(`${o.method} ${o.path}`) && idOf.get(`${o.method} ${o.path}`) !== o.operationId).map((o) => `${o.method} ${o.path}: ${o.operationId} != ${idOf.get(`${o.method} ${o.path}`)}`);
    expect(mismatched).toEqual([]);
    const runNow = doc.paths["/v1/automations/{id}/runs"]?.post as { operationId?: string } | undefined;
    expect(runNow?.operationId).toBe("RunAutomation");
    const create = doc.paths["/v1/automations"]?.post?.requestBody?.content["application/json"]?.schema as { properties?: Record<string, unknown> };
    expect(Object.keys(create.properties ?? {})).toEqual(expect.arrayContaining(["name", "schedule"]));
  });

  it("names a served route the contract does not describe", () => {
    expect(undocumentedRoutes([...servedRoutes(), { method: "GET", path: "/v1/nothing" }])).toEqual(["GET /v1/nothing"]);
  });

  it("is OpenAPI 3.1 with the handlers' own request schemas, parameters and auth", () => {
    expect(doc.openapi).toBe("3.1.0");
    const create = doc.paths["/v1/sessions"]?.post;
    const body = create?.requestBody?.content["application/json"]?.schema as { properties: Record<string, { maxItems?: number }>; additionalProperties?: unknown };
    expect(Object.keys(body.properties)).toEqual(expect.arrayContaining(["clientType", "sessionType", "title", "repos", "prebuildId", "provider", "initialPrompt"]));
    expect(body.properties.repos?.maxItems).toBe(MAX_REPOS);
    expect(body.additionalProperties).toBe(false);
    expect(create?.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths["/v1/health"]?.get?.security).toEqual([]);
    const prompt = doc.paths["/v1/sessions/{id}/prompts"]?.post;
    expect(prompt?.parameters?.map((p) => `${p.in}:${p.name}`)).toEqual(expect.arrayContaining(["path:id", "header:idempotency-key"]));
    expect(doc.paths["/v1/sessions"]?.get?.parameters?.map((p) => p.name)).toEqual(expect.arrayContaining(["status", "limit", "cursor"]));
  });

  it("passes redocly lint (recommended rules)", async () => {
    const file = path.join(dir, "openapi.json");
    writeFileSync(file, JSON.stringify(doc));
    const bin = path.join(ROOT, "node_modules/.bin/redocly");
    const result = await promisify(execFile)(bin, ["lint", file, "--format=stylish"], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
      timeout: 120_000,
    }).catch((err: { stdout?: string; stderr?: string; code?: number }) => ({ stdout: err.stdout ?? "", stderr: err.stderr ?? "", failed: err.code ?? 1 }));
    const output = `${result.stdout}\n${result.stderr}`;
    expect("failed" in result ? output : "ok").toBe("ok");
    expect(output).toMatch(/valid/i);
    expect(output).not.toMatch(/You have \d+ warning/i);
  }, 120_000);
});
