/**
 * The automations nested stack (infra/automations-stack.ts), read from its own template: the
 * schedule group, the scheduler role (invokes automation-fired only, assumed by Scheduler in this
 * account only), the two functions' least-privilege grants (schedules of this group only,
 * `iam:PassRole` of the scheduler role to Scheduler only, the ensure-runtime and stop flows), the
 * eight `/v1/automations` routes on one function, and the root stack growing by one resource.
 * cdk-nag runs on the whole app (control-plane-stack.test.ts).
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Template } from "aws-cdk-lib/assertions";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { AUTOMATION_ROUTES } from "../../functions/automations/automation-routes";
import { actionsOf, asArray, stackQueries, synthWithoutBundling, type Resources, type Statement, type Synthesized } from "./stack-queries";

let synth: Synthesized;
let nested: Template;
let resources: Resources;

beforeAll(() => {
  synth = synthWithoutBundling();
  nested = Template.fromStack(synth.stack.automations);
  resources = nested.toJSON().Resources as Resources;
});
afterAll(() => rmSync(synth.dir, { recursive: true, force: true }));

const logicalId = (fn: NodejsFunction) => synth.stack.automations.getLogicalId(fn.node.defaultChild as never);
const statementsOf = (fn: NodejsFunction): Statement[] => {
  const role = (resources[logicalId(fn)]?.Properties.Role as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0];
  return Object.values(resources)
    .filter((r) => r.Type === "AWS::IAM::Policy" && (r.Properties.Roles as unknown[]).some((ref) => JSON.stringify(ref) === JSON.stringify({ Ref: role })))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
};
const envOf = (fn: NodejsFunction) => (resources[logicalId(fn)]?.Properties.Environment as { Variables: Record<string, unknown> }).Variables;

describe("the automations nested stack", () => {
  it("is one resource in the root stack, which holds none of its functions, routes or schedule group", () => {
    const root = Object.values(synth.resources);
    expect(Object.keys(synth.resources).filter((id) => synth.resources[id]?.Type === "AWS::CloudFormation::Stack" && id.startsWith("Automations"))).toHaveLength(1);
    expect(root.map((r) => String(r.Properties.RouteKey ?? "")).filter((k) => k.includes("automations"))).toEqual([]);
    expect(root.filter((r) => r.Type === "AWS::Scheduler::ScheduleGroup" && JSON.stringify(r.Properties.Name).includes("automations"))).toEqual([]);
    // Slack, Ops, Automations, Console and ApiDocs are nested stacks: the root stays under CloudFormation's 500.
    expect(root.length).toBeLessThanOrEqual(492);
  });

  it("creates the <stack>-automations schedule group and a scheduler role that only invokes automation-fired", () => {
    nested.hasResourceProperties("AWS::Scheduler::ScheduleGroup", { Name: "SandboxControlPlane-automations" });
    const roleId = synth.stack.automations.getLogicalId(synth.stack.automations.schedulerRole.node.defaultChild as never);
    expect(JSON.stringify(resources[roleId]?.Properties.AssumeRolePolicyDocument)).toContain("scheduler.amazonaws.com");
    expect(JSON.stringify(resources[roleId]?.Properties.AssumeRolePolicyDocument)).toContain("aws:SourceAccount");
    expect(JSON.stringify(resources[roleId]?.Properties.AssumeRolePolicyDocument)).toContain(":schedule-group/SandboxControlPlane-automations");
    const policies = Object.values(resources).filter((r) => r.Type === "AWS::IAM::Policy" && JSON.stringify(r.Properties.Roles).includes(roleId));
    const statements = policies.flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    expect(actionsOf(statements)).toEqual(["lambda:InvokeFunction"]);
    expect(JSON.stringify(statements[0]?.Resource)).toContain("SandboxControlPlane-automation-fired");
    nested.hasResourceProperties("AWS::Lambda::Function", { FunctionName: "SandboxControlPlane-automation-fired" });
  });

  it("puts the eight /v1/automations routes on one function", () => {
    const routes = Object.values(resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Route");
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(AUTOMATION_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    expect(Object.values(resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Integration")).toHaveLength(1);
    nested.resourceCountIs("AWS::Lambda::Function", 2);
  });

  it("both functions manage this group's schedules only, pass the scheduler role to Scheduler only, and start exactly ensure-runtime and stop", () => {
    for (const fn of [synth.stack.automations.fired, synth.stack.automations.routes]) {
      const statements = statementsOf(fn);
      const scheduling = statements.filter((s) => actionsOf([s]).includes("scheduler:CreateSchedule"));
      expect(scheduling).toHaveLength(1);
      expect(JSON.stringify(scheduling[0]?.Resource)).toContain("schedule/SandboxControlPlane-automations/*");
      const pass = statements.filter((s) => actionsOf([s]).includes("iam:PassRole"));
      expect(pass).toHaveLength(1);
      expect(pass[0]?.Condition).toEqual({ StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } });
      const started = statements.filter((s) => actionsOf([s]).includes("states:StartExecution")).flatMap((s) => asArray(s.Resource)).map((r) => JSON.stringify(r));
      expect(started).toHaveLength(2);
      for (const flow of ["ensure-runtime", "stop"]) expect(started.some((r) => r.includes(`:stateMachine:SandboxControlPlane-${flow}"`))).toBe(true);
      const env = envOf(fn);
      for (const name of ["AUTOMATIONS_SCHEDULE_GROUP", "AUTOMATION_FIRED_ARN", "AUTOMATIONS_SCHEDULER_ROLE_ARN", "TABLE_NAME", "STATE_MACHINE_ARN_ENSURE_RUNTIME", "STATE_MACHINE_ARN_STOP", "SECRETS_KMS_KEY_ARN"]) expect(env, name).toHaveProperty(name);
    }
  });

  it("both functions read the Slack secret (run notifications to notify.slackChannel from timed-out runs and failed starts), and nothing a sandbox or the relay needs", () => {
    for (const fn of [synth.stack.automations.fired, synth.stack.automations.routes]) {
      const env = envOf(fn);
      expect(env, fn.node.id).toHaveProperty("SLACK_SECRET_ARN");
      // Least privilege: the session routes they call in process start flows; they reach no sandbox or agent.
      for (const name of ["PROVIDER_SECRET_ARN", "SANDBOX_ACCESS_KEY_SECRET_ARN", "RELAY_NUDGE_QUEUE_URL"]) expect(env, `${fn.node.id} ${name}`).not.toHaveProperty(name);
      const statements = statementsOf(fn);
      const reads = statements.filter((s) => actionsOf([s]).includes("secretsmanager:GetSecretValue"));
      // One secret: the Slack app's (a parameter from the Slack nested stack, as its ARN in the environment).
      expect(reads.map((s) => JSON.stringify(s.Resource)), fn.node.id).toEqual([JSON.stringify(env.SLACK_SECRET_ARN)]);
      expect(actionsOf(statements).filter((a) => a.startsWith("sqs:")), fn.node.id).toEqual([]);
    }
  });

  it("the webhook secrets: the routes seal and open them, automation-fired opens them, under the secrets key with the org/name context only", () => {
    const kms = (fn: NodejsFunction) => statementsOf(fn).filter((s) => actionsOf([s]).some((a) => a.startsWith("kms:")));
    expect(kms(synth.stack.automations.routes).flatMap((s) => actionsOf([s])).sort()).toEqual(["kms:Decrypt", "kms:Encrypt"]);
    expect(kms(synth.stack.automations.fired).flatMap((s) => actionsOf([s]))).toEqual(["kms:Decrypt"]);
    for (const s of [...kms(synth.stack.automations.routes), ...kms(synth.stack.automations.fired)]) {
      expect(s.Condition).toEqual({ "ForAllValues:StringEquals": { "kms:EncryptionContextKeys": ["orgId", "name"] }, Null: { "kms:EncryptionContext:orgId": "false", "kms:EncryptionContext:name": "false" } });
    }
  });

  it("RecordFailure ends a failed session's run: the scheduling settings and grant, the Slack secret, decrypt under the secrets key", () => {
    const q = stackQueries(synth);
    const env = q.envOf("RecordFailureStep");
    for (const name of ["AUTOMATIONS_SCHEDULE_GROUP", "AUTOMATION_FIRED_ARN", "AUTOMATIONS_SCHEDULER_ROLE_ARN", "SLACK_SECRET_ARN", "SECRETS_KMS_KEY_ARN"]) expect(env, name).toHaveProperty(name);
    const statements = q.statementsOfFunction("RecordFailureStep");
    const scheduling = statements.filter((s) => actionsOf([s]).includes("scheduler:DeleteSchedule"));
    expect(scheduling.map((s) => JSON.stringify(s.Resource))).toEqual([expect.stringContaining("schedule/SandboxControlPlane-automations/*")]);
    expect(statements.filter((s) => actionsOf([s]).includes("iam:PassRole")).map((s) => s.Condition)).toEqual([{ StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } }]);
    expect(actionsOf(statements).filter((a) => a.startsWith("kms:"))).toEqual(["kms:Decrypt"]);
    expect(actionsOf(statements)).toContain("secretsmanager:GetSecretValue");
  });
});
