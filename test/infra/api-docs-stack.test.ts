/**
 * The API document's nested stack (infra/api-docs-stack.ts): one function with no table or
 * secret grants, its one route (`GET /v1/openapi.json`) on the root's HTTP API, and the root
 * stack growing by one resource (the nested stack) only.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Template } from "aws-cdk-lib/assertions";
import { actionsOf, synthWithoutBundling, type Resources, type Statement, type Synthesized } from "./stack-queries";

let synth: Synthesized;
let resources: Resources;

beforeAll(() => {
  synth = synthWithoutBundling();
  resources = Template.fromStack(synth.stack.apiDocs).toJSON().Resources as Resources;
});
afterAll(() => rmSync(synth.dir, { recursive: true, force: true }));

describe("the ApiDocs nested stack", () => {
  it("is one resource in the root stack, whose routes do not include the document's", () => {
    expect(Object.entries(synth.resources).filter(([id, r]) => r.Type === "AWS::CloudFormation::Stack" && id.startsWith("ApiDocs"))).toHaveLength(1);
    const rootRoutes = Object.values(synth.resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Route").map((r) => String(r.Properties.RouteKey));
    expect(rootRoutes).not.toContain("GET /v1/openapi.json");
  });

  it("serves GET /v1/openapi.json from one function on the root's HTTP API, with no table, KMS or secret grants", () => {
    const routes = Object.values(resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Route");
    expect(routes.map((r) => r.Properties.RouteKey)).toEqual(["GET /v1/openapi.json"]);
    expect(JSON.stringify(routes[0]?.Properties.ApiId)).toContain("referenceto");
    expect(routes[0]?.Properties.AuthorizationType ?? "NONE").toBe("NONE");
    expect(Object.values(resources).filter((r) => r.Type === "AWS::Lambda::Function")).toHaveLength(1);
    const statements = Object.values(resources)
      .filter((r) => r.Type === "AWS::IAM::Policy")
      .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    const actions = actionsOf(statements);
    expect(actions.filter((a) => /^(dynamodb|kms|secretsmanager|states):/.test(a))).toEqual([]);
  });
});
