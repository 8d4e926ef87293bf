/**
 * Slack's nested stack (infra/slack-stack.ts), read from its own template: the three signed
 * routes and the workspace routes on the root's HTTP API, the queue with its dead-letter queue
 * and alarm, the worker's event source, least-privilege roles, and the root stack growing by one
 * resource (the nested stack) only. cdk-nag runs on the whole app (control-plane-stack.test.ts).
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Template } from "aws-cdk-lib/assertions";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { actionsOf, asArray, synthWithoutBundling, type Resources, type Statement, type Synthesized } from "./stack-queries";

let synth: Synthesized;
let nested: Template;
let resources: Resources;

beforeAll(() => {
  synth = synthWithoutBundling();
  nested = Template.fromStack(synth.stack.slack);
  resources = nested.toJSON().Resources as Resources;
});
afterAll(() => rmSync(synth.dir, { recursive: true, force: true }));

const logicalId = (fn: NodejsFunction) => synth.stack.slack.getLogicalId(fn.node.defaultChild as never);
const statementsOf = (fn: NodejsFunction): Statement[] => {
  const role = (resources[logicalId(fn)]?.Properties.Role as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0];
  return Object.values(resources)
    .filter((r) => r.Type === "AWS::IAM::Policy" && (r.Properties.Roles as unknown[]).some((ref) => JSON.stringify(ref) === JSON.stringify({ Ref: role })))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
};
const envOf = (fn: NodejsFunction) => (resources[logicalId(fn)]?.Properties.Environment as { Variables: Record<string, unknown> }).Variables;

describe("the Slack nested stack", () => {
  it("is one resource in the root stack, which holds none of Slack's functions, queues or routes", () => {
    expect(Object.entries(synth.resources).filter(([id, r]) => r.Type === "AWS::CloudFormation::Stack" && id.startsWith("Slack"))).toHaveLength(1);
    const rootRoutes = Object.values(synth.resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Route").map((r) => String(r.Properties.RouteKey));
    expect(rootRoutes.filter((k) => k.includes("slack"))).toEqual([]);
    // The root's one queue is the relay's nudge queue (issue 15).
    expect(Object.entries(synth.resources).filter(([id, r]) => r.Type === "AWS::SQS::Queue" && /slack/i.test(id))).toEqual([]);
  });

  it("puts the three signed Slack routes on the ack function and the workspace routes on one function, on the root's HTTP API", () => {
    const routes = Object.values(resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Route");
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(["DELETE /v1/slack/workspace", "GET /v1/slack/workspace", "POST /slack/commands", "POST /slack/events", "POST /slack/interactions", "PUT /v1/slack/workspace"]);
    for (const r of routes) expect(JSON.stringify(r.Properties.ApiId)).toContain("referenceto");
    const integrations = Object.values(resources).filter((r) => r.Type === "AWS::ApiGatewayV2::Integration");
    expect(integrations).toHaveLength(2);
    nested.resourceCountIs("AWS::Lambda::Function", 3);
  });

  it("queues deliveries with a dead-letter queue after 5 receives, an alarm on it, and the worker reading with partial batch failures", () => {
    const queues = Object.entries(resources).filter(([, r]) => r.Type === "AWS::SQS::Queue");
    expect(queues).toHaveLength(2);
    const main = queues.find(([, r]) => r.Properties.RedrivePolicy !== undefined);
    const dlq = queues.find(([, r]) => r.Properties.RedrivePolicy === undefined);
    expect(main?.[1].Properties).toMatchObject({ VisibilityTimeout: 360, SqsManagedSseEnabled: true, RedrivePolicy: { maxReceiveCount: 5, deadLetterTargetArn: { "Fn::GetAtt": [dlq?.[0], "Arn"] } } });
    nested.hasResourceProperties("AWS::CloudWatch::Alarm", { Namespace: "AWS/SQS", MetricName: "ApproximateNumberOfMessagesVisible", Dimensions: [{ Name: "QueueName", Value: { "Fn::GetAtt": [dlq?.[0], "QueueName"] } }], Threshold: 1 });
    nested.hasResourceProperties("AWS::Lambda::EventSourceMapping", { EventSourceArn: { "Fn::GetAtt": [main?.[0], "Arn"] }, FunctionName: { Ref: logicalId(synth.stack.slack.worker) }, FunctionResponseTypes: ["ReportBatchItemFailures"] });
  });

  it("the ack function may only write delivery records, send to the queue and read the Slack secret", () => {
    const statements = statementsOf(synth.stack.slack.ack).filter((s) => !actionsOf([s]).some((a) => a.startsWith("xray:") || a.startsWith("logs:")));
    expect(actionsOf(statements).sort()).toEqual(["dynamodb:DeleteItem", "dynamodb:PutItem", "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"]);
    const dynamo = statements.find((s) => actionsOf([s]).includes("dynamodb:PutItem"));
    expect(dynamo?.Condition).toEqual({ "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["SLACKDELIVERY#*"] } });
    expect(Object.keys(envOf(synth.stack.slack.ack)).sort()).toEqual(["NODE_OPTIONS", "SLACK_QUEUE_URL", "SLACK_SECRET_ARN", "TABLE_NAME"]);
  });

  it("the worker starts exactly the ensure-runtime, pause and stop flows, reads the sandbox keys, provider credentials and the Slack secret, and nudges the relays", () => {
    const statements = statementsOf(synth.stack.slack.worker);
    const started = statements.filter((s) => actionsOf([s]).includes("states:StartExecution")).flatMap((s) => asArray(s.Resource)).map((r) => JSON.stringify(r));
    expect(started).toHaveLength(3);
    for (const flow of ["ensure-runtime", "pause", "stop"]) expect(started.some((r) => r.includes(`:stateMachine:SandboxControlPlane-${flow}"`))).toBe(true);
    const env = envOf(synth.stack.slack.worker);
    for (const name of ["STATE_MACHINE_ARN_ENSURE_RUNTIME", "STATE_MACHINE_ARN_PAUSE", "STATE_MACHINE_ARN_STOP", "PROVIDER_SECRET_ARN", "SANDBOX_ACCESS_KEY_SECRET_ARN", "SLACK_SECRET_ARN", "TABLE_NAME"]) expect(env, name).toHaveProperty(name);
    expect(actionsOf(statements)).toContain("secretsmanager:GetSecretValue");
    // Its prompts to running sessions nudge the relays (issue 15), as CreatePrompt's do: that queue only.
    expect(env).toHaveProperty("RELAY_NUDGE_QUEUE_URL");
    const sends = statements.filter((s) => actionsOf([s]).includes("sqs:SendMessage"));
    expect(sends).toHaveLength(1);
    expect(JSON.stringify(sends[0]?.Resource)).not.toMatch(/SlackDeliveries/);
  });

  it("creates the Slack secret with a placeholder (no value in the template), retained", () => {
    const secrets = Object.values(resources).filter((r) => r.Type === "AWS::SecretsManager::Secret");
    expect(secrets).toHaveLength(1);
    expect(secrets[0]?.Properties.GenerateSecretString).toEqual({ SecretStringTemplate: "{}", GenerateStringKey: "placeholder" });
    expect(JSON.stringify(nested.toJSON())).not.toMatch(/xoxb-|SLACK_SIGNING_SECRET"\s*:/);
  });
});

describe("the relay posts Slack progress", () => {
  it("gets the Slack secret's ARN and may read that secret (besides the sandbox access key it read before)", () => {
    const taskDefs = Object.values(synth.resources).filter((r) => r.Type === "AWS::ECS::TaskDefinition");
    const env = taskDefs.flatMap((t) => (t.Properties.ContainerDefinitions as { Environment?: { Name: string; Value: unknown }[] }[]).flatMap((c) => c.Environment ?? []));
    const arn = env.find((e) => e.Name === "SLACK_SECRET_ARN")?.Value;
    expect(JSON.stringify(arn)).toContain("Outputs.");
    const relayPolicies = Object.values(synth.resources).filter((r) => r.Type === "AWS::IAM::Policy" && JSON.stringify(r.Properties.Roles).includes("RelayTaskRole"));
    const statements = relayPolicies.flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    const reads = statements.filter((s) => actionsOf([s]).includes("secretsmanager:GetSecretValue"));
    expect(reads.map((s) => JSON.stringify(s.Resource))).toContain(JSON.stringify(arn));
    expect(reads).toHaveLength(2);
  });
});

describe("the flow steps forward their statuses to the Slack queue", () => {
  it("exactly the steps that broadcast statuses get SLACK_QUEUE_URL and sqs:SendMessage on that queue, in their existing default policies", async () => {
    const { stackQueries } = await import("./stack-queries");
    const { FLOW_STEPS } = await import("../../functions/flows/steps");
    const q = stackQueries(synth);
    const queueId = synth.stack.slack.getLogicalId(synth.stack.slack.queue.node.defaultChild as never);
    // A root value read from the nested stack (`Fn::GetAtt [<nested>, Outputs.<name>]`): that output's value in the nested template.
    const outputs = nested.toJSON().Outputs as Record<string, { Value: unknown }>;
    const nestedOutput = (value: unknown): unknown => {
      const att = (value as { "Fn::GetAtt"?: [string, string] })["Fn::GetAtt"];
      return att?.[1].startsWith("Outputs.") ? outputs[att[1].slice("Outputs.".length)]?.Value : undefined;
    };
    for (const step of FLOW_STEPS) {
      const url = q.envOf(step.id).SLACK_QUEUE_URL;
      // Sends to the Slack queue (the nudge queue is the root's: test/infra/relay-nudge-queue.test.ts).
      const sends = q.statementsOfFunction(step.id).filter((s) => actionsOf([s]).includes("sqs:SendMessage") && nestedOutput(s.Resource) !== undefined);
      if (!step.push) {
        expect(url, step.id).toBeUndefined();
        expect(sends, step.id).toEqual([]);
        continue;
      }
      // The nested stack's outputs: the queue's URL (its Ref) and ARN.
      expect(nestedOutput(url), step.id).toEqual({ Ref: queueId });
      expect(sends, step.id).toHaveLength(1);
      expect(nestedOutput(sends[0]?.Resource), step.id).toEqual({ "Fn::GetAtt": [queueId, "Arn"] });
      expect(actionsOf(sends).filter((a) => a.startsWith("sqs:")).sort(), step.id).toEqual(["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"]);
      // One default policy per role, as before: no new IAM resource in the root stack.
      const role = q.roleOfFunction(step.id);
      expect(Object.values(synth.resources).filter((r) => r.Type === "AWS::IAM::Policy" && JSON.stringify(r.Properties.Roles) === JSON.stringify([{ Ref: role }])), step.id).toHaveLength(1);
    }
    // ensure-runtime's Provision commits `running` and finishes in process (issue 15): it broadcasts too.
    expect(FLOW_STEPS.filter((s) => s.push).map((s) => s.id).sort()).toEqual(["BeginStep", "CommitStep", "FinishStep", "ProvisionStep", "RecordFailureStep"]);
  });
});
