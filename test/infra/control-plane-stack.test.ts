import { readFileSync, mkdtempSync, rmSync, statSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { App, Validations, type CfnElement, type Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { buildApp } from "../../infra/app";
import { HTTP_ROUTES, servingRoute } from "../../functions/http/routes";
import { FLOW_STEPS } from "../../functions/flows/steps";
import { BUILD_STEPS } from "../../functions/builds/build-steps";
import { WS_ROUTES } from "../../functions/ws/routes";
import { deployableFlows } from "../../infra/lifecycle-flows";
import { GSI_BY_ORG, GSI_BY_RELAY, GSI_BY_STATUS, RELAY_INDEX_PROJECTION } from "../../functions/store/table-layout";
import { bundleImports, importLoads } from "../support/bundle-imports";

interface ValidationReport {
  pluginReports: {
    pluginName: string;
    conclusion: string;
    violations: unknown[];
    suppressedViolations: { ruleName: string; violatingConstructs: { reason?: string; acknowledgementReason?: string }[] }[];
  }[];
}

let outdir: string;
let template: Template;
let report: ValidationReport;
let lambdaAssetDirs: string[];
let stackRef: Stack;

beforeAll(() => {
  outdir = mkdtempSync(path.join(tmpdir(), "cdk-out-"));
  // Real esbuild bundling, no Docker (forceDockerBundling: false and esbuild installed).
  const { app, stack } = buildApp(new App({ outdir, context: { deletionProtection: "true" } }));
  app.synth();
  template = Template.fromStack(stack);
  stackRef = stack;
  report = JSON.parse(readFileSync(path.join(outdir, "validation-report.json"), "utf8")) as ValidationReport;
  // File assets are the Lambda bundles; the relay image is a Docker image asset (realtime.test.ts).
  const manifest = JSON.parse(readFileSync(path.join(outdir, `${stack.artifactId}.assets.json`), "utf8")) as { files: Record<string, { source: { path: string } }> };
  const fileAssets = new Set(Object.values(manifest.files).map((f) => f.source.path));
  // The console's nested stack brings the site build and the CDK's own deployment handlers (not ours; infra/console-stack.ts).
  const consoleAssets = new Set([...JSON.stringify(Template.fromStack(stack.console).toJSON()).matchAll(/([0-9a-f]{64})\.zip/g)].map((m) => `asset.${m[1]}`));
  lambdaAssetDirs = readdirSync(outdir, { withFileTypes: true }).filter((d) => d.isDirectory() && fileAssets.has(d.name) && !consoleAssets.has(d.name)).map((d) => d.name);
});
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

describe("table", () => {
  it("is on-demand, with point-in-time recovery, deletion protection, retained, a TTL attribute, and both GSIs", () => {
    template.hasResource("AWS::DynamoDB::Table", {
      DeletionPolicy: "Retain",
      Properties: Match.objectLike({
        BillingMode: "PAY_PER_REQUEST",
        DeletionProtectionEnabled: true,
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        // Connection and proxy items expire by it (issue 14 §3).
        TimeToLiveSpecification: { AttributeName: "ttl", Enabled: true },
        KeySchema: [
          { AttributeName: "PK", KeyType: "HASH" },
          { AttributeName: "SK", KeyType: "RANGE" },
        ],
        GlobalSecondaryIndexes: Match.arrayWith([
          Match.objectLike({ IndexName: GSI_BY_ORG, KeySchema: [{ AttributeName: "GSI1PK", KeyType: "HASH" }, { AttributeName: "GSI1SK", KeyType: "RANGE" }] }),
          Match.objectLike({ IndexName: GSI_BY_STATUS, KeySchema: [{ AttributeName: "GSI2PK", KeyType: "HASH" }, { AttributeName: "GSI2SK", KeyType: "RANGE" }] }),
          // Sparse, on the session's relay: a takeover reads the dead relay's sessions; projects the claim view only, so a turn's writes never write it.
          Match.objectLike({
            IndexName: GSI_BY_RELAY,
            KeySchema: [{ AttributeName: "relayOwner", KeyType: "HASH" }],
            Projection: { ProjectionType: "INCLUDE", NonKeyAttributes: [...RELAY_INDEX_PROJECTION] },
          }),
        ]),
      }),
    });
  });

  it("deletion protection is configurable", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "cdk-out-"));
    try {
      const { stack } = buildApp(new App({ outdir: dir, context: { deletionProtection: "false", "aws:cdk:bundling-stacks": [] } }));
      Template.fromStack(stack).hasResource("AWS::DynamoDB::Table", {
        DeletionPolicy: "Delete",
        Properties: Match.objectLike({ DeletionProtectionEnabled: false }),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("HTTP API", () => {
  it("has exactly the route table's routes, each integrated with a Lambda function", () => {
    const onHttpApi = { Properties: { ApiId: { Ref: stackRef.getLogicalId(stackRef.node.findChild("HttpApi").node.defaultChild as CfnElement) } } };
    const routes = template.findResources("AWS::ApiGatewayV2::Route", onHttpApi);
    const keys = Object.values(routes).map((r) => (r as { Properties: { RouteKey: string } }).Properties.RouteKey).sort();
    expect(keys).toEqual(HTTP_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    expect(Object.keys(template.findResources("AWS::ApiGatewayV2::Integration", onHttpApi))).toHaveLength(HTTP_ROUTES.length);
    // API.md v1.1: WebSocket connect tickets (issue 14 item 5).
    expect(keys).toContain("POST /v1/sessions/{id}/ws-ticket");
  });

  it("has a throttled, access-logged $default stage", () => {
    template.hasResourceProperties("AWS::ApiGatewayV2::Stage", {
      StageName: "$default",
      AutoDeploy: true,
      DefaultRouteSettings: Match.objectLike({ ThrottlingRateLimit: Match.anyValue(), ThrottlingBurstLimit: Match.anyValue() }),
      AccessLogSettings: Match.objectLike({ DestinationArn: Match.anyValue() }),
    });
  });
});

// One function per HTTP route, per flow step, the schedule target, the sweeper, one per WebSocket route, send-init,
// one per snapshot builder step, the scheduled prebuild rebuild and the metering pass.
/** Route groups (routes.ts `group`) share one function. */
const HTTP_FUNCTIONS = [...new Map(HTTP_ROUTES.map((r) => [servingRoute(r).id, servingRoute(r)])).values()];
const FUNCTION_COUNT = HTTP_FUNCTIONS.length + FLOW_STEPS.length + 1 + 1 + WS_ROUTES.length + 1 + BUILD_STEPS.length + 1 + 1;
// The idle snapshot circuit breaker and the orphan sessions the sweeper finds (flows.test.ts).
const METRIC_ALARM_COUNT = 2;

describe("functions", () => {
  it("run nodejs22.x on arm64 with the table name and provider configuration bound", () => {
    const fns = template.findResources("AWS::Lambda::Function");
    expect(Object.keys(fns)).toHaveLength(FUNCTION_COUNT);
    for (const fn of Object.values(fns) as { Properties: Record<string, unknown> }[]) {
      expect(fn.Properties).toMatchObject({
        Runtime: "nodejs22.x",
        Architectures: ["arm64"],
        Environment: { Variables: expect.objectContaining({ TABLE_NAME: { Ref: expect.stringMatching(/^SessionTable/) }, DEFAULT_SANDBOX_PROVIDER: "modal" }) },
      });
    }
  });

  it("are bundled by esbuild without Docker: one small ESM bundle per function", () => {
    expect(lambdaAssetDirs.length).toBeGreaterThanOrEqual(FUNCTION_COUNT);
    for (const dir of lambdaAssetDirs) {
      const file = path.join(outdir, dir, "index.mjs");
      const size = statSync(file).size;
      expect(size).toBeGreaterThan(1000);
      expect(size).toBeLessThan(3 * 1024 * 1024);
    }
  });

  it("bundle only what their entry reaches: every HTTP and WebSocket route without sandbox access is under 400 KB, with no provider SDK", () => {
    const functions = template.findResources("AWS::Lambda::Function") as Record<string, { Properties: { Code: { S3Key: string } } }>;
    const bundleOf = (id: string): string => {
      const entry = Object.entries(functions).find(([logicalId]) => logicalId.startsWith(`${id}Function`));
      if (!entry) throw new Error(`no function ${id}`);
      return readFileSync(path.join(outdir, `asset.${entry[1].Properties.Code.S3Key.replace(/\.zip$/, "")}`, "index.mjs"), "utf8");
    };
    const small = [...HTTP_FUNCTIONS.filter((r) => !r.sandboxAccess && !r.providerAccess).map((r) => r.id), ...WS_ROUTES.map((r) => r.id), "SendInit"];
    expect(small.length).toBeGreaterThan(20);
    for (const id of small) {
      const bundle = bundleOf(id);
      // Every route builds its dependencies from the one composition root (every store: about 95 KB
      // of ours, minified), so the budget grows with the stores; a provider SDK alone is ~2 MB.
      expect(Buffer.byteLength(bundle), id).toBeLessThan(400 * 1024);
      // The provider SDKs (Modal over gRPC, E2B over Connect) stay out of them.
      expect(bundle, id).not.toContain("@grpc/grpc-js");
      expect(bundle, id).not.toContain("modal.client.ModalClient");
    }
    // A route that calls a provider (tunnels) binds them, and so bundles them.
    for (const route of HTTP_FUNCTIONS.filter((r) => r.sandboxAccess)) expect(Buffer.byteLength(bundleOf(route.id)), route.id).toBeGreaterThan(400 * 1024);
  });

  it("load at cold start only what every route needs: the DynamoDB SDK by require, every other AWS SDK and OpenCode's client on first use", async () => {
    const functions = template.findResources("AWS::Lambda::Function") as Record<string, { Properties: { Code: { S3Key: string } } }>;
    const fileOf = (id: string): string => {
      const entry = Object.entries(functions).find(([logicalId]) => logicalId.startsWith(`${id}Function`));
      if (!entry) throw new Error(`no function ${id}`);
      return path.join(outdir, `asset.${entry[1].Properties.Code.S3Key.replace(/\.zip$/, "")}`, "index.mjs");
    };
    const routes = [...HTTP_FUNCTIONS.filter((r) => !r.sandboxAccess).map((r) => r.id), ...WS_ROUTES.map((r) => r.id), "SendInit"];
    const files = Object.fromEntries(routes.map((id) => [id, fileOf(id)]));
    for (const [id, file] of Object.entries(files)) {
      const imports = await bundleImports(file);
      // No `import` of the (CommonJS) SDK: Node would load it through the ES module loader
      // (functions/store/dynamodb-sdk.ts); the other clients are imported dynamically, if at all.
      expect(imports.statements.filter((p) => p.startsWith("@aws-sdk/")), id).toEqual([]);
      expect(imports.dynamic.filter((p) => p.startsWith("@aws-sdk/")), id).not.toContain("@aws-sdk/client-dynamodb");
    }
    const loads = await importLoads(files);
    for (const id of routes) {
      const { awsSdkPackages, fetchLoaded } = loads[id] ?? { awsSdkPackages: [], fetchLoaded: true };
      expect(awsSdkPackages, id).toEqual(expect.arrayContaining(["@aws-sdk/client-dynamodb", "@aws-sdk/lib-dynamodb"]));
      expect(awsSdkPackages.filter((p) => p.startsWith("@aws-sdk/client-") && p !== "@aws-sdk/client-dynamodb"), id).toEqual([]);
      // Building OpenCode's client creates fetch Headers (functions/agent/opencode-sdk.ts).
      expect(fetchLoaded, id).toBe(false);
    }
  }, 120_000);

  it("have least-privilege table grants: read routes cannot write, health cannot touch the table", () => {
    const policies = template.findResources("AWS::IAM::Policy");
    const actionsFor = (routeId: string): string[] => {
      const entry = Object.entries(policies).find(([logicalId]) => logicalId.startsWith(`${routeId}Role`));
      if (!entry) return [];
      const doc = (entry[1] as { Properties: { PolicyDocument: { Statement: { Action: string | string[] }[] } } }).Properties.PolicyDocument;
      return doc.Statement.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
    };
    const writes = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"];
    for (const route of HTTP_FUNCTIONS) {
      const actions = actionsFor(route.id);
      const dynamo = actions.filter((a) => a.startsWith("dynamodb:"));
      if (route.tableAccess === "none") expect(dynamo).toEqual([]);
      if (route.tableAccess === "read") {
        expect(dynamo).toContain("dynamodb:GetItem");
        expect(dynamo).toContain("dynamodb:Query");
        for (const w of writes) expect(dynamo).not.toContain(w);
      }
      if (route.tableAccess === "readwrite") {
        expect(dynamo).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"]));
      }
      // No statement anywhere grants dynamodb:* or *.
      expect(actions).not.toContain("dynamodb:*");
      expect(actions).not.toContain("*");
    }
  });

  it("use their own roles with no AWS managed policies", () => {
    const roles = template.findResources("AWS::IAM::Role");
    for (const role of Object.values(roles) as { Properties: { ManagedPolicyArns?: unknown[] } }[]) {
      expect(role.Properties.ManagedPolicyArns ?? []).toEqual([]);
    }
  });

  it("each has an error alarm (and each state machine two: failed, timed out; plus the idle-snapshot metric alarms)", () => {
    // The snapshot builder's machine: one alarm (failed executions).
    template.resourceCountIs("AWS::CloudWatch::Alarm", FUNCTION_COUNT + 2 * deployableFlows().length + 1 + METRIC_ALARM_COUNT);
    const errorAlarms = Object.values(template.findResources("AWS::CloudWatch::Alarm", { Properties: { MetricName: "Errors", Namespace: "AWS/Lambda" } }));
    expect(errorAlarms).toHaveLength(FUNCTION_COUNT);
  });
});

describe("cdk-nag AwsSolutions", () => {
  it("reports zero unacknowledged violations, and every acknowledgement carries a reason", () => {
    const nag = report.pluginReports.find((p) => p.pluginName === "AwsSolutions");
    expect(nag).toBeDefined();
    expect(nag?.violations).toEqual([]);
    expect(nag?.conclusion).toBe("success");
    // Acknowledgements are recorded as construct metadata; each must say why.
    const acks = stackRef.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
      .flatMap((m) => Object.entries(m.data as Record<string, string>).map(([id, reason]) => ({ id, reason })));
    expect(acks.length).toBeGreaterThan(0);
    for (const a of acks) expect(a.reason.length, `${a.id} acknowledged without a reason`).toBeGreaterThan(20);
    // Every suppressed violation is covered by one of those acknowledgements.
    const acked = new Set(acks.map((a) => a.id.replace(/^AwsSolutions::/, "")));
    for (const s of nag?.suppressedViolations ?? []) {
      expect(acked.has(s.ruleName) || acked.has(s.ruleName.replace(/\[.*$/, "")), `${s.ruleName} suppressed without an acknowledgement`).toBe(true);
    }
  });
});
