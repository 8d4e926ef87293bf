/**
 * The real-time layer in the stack: the WebSocket API (routes, stage, who may push and to what),
 * the send-init invocation, and the streaming relay on Fargate (image asset, task, service,
 * scaling, task role). Synthesized once without bundling, with `docker` replaced by a stub that
 * records any call: the relay image must be an asset that only cdk-assets builds, at deploy time.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack, Validations } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import type { ControlPlaneStack } from "../../infra/control-plane-stack";
import { stateMachineArn } from "../../infra/lifecycle-flows";
import { HELD_STREAMS_METRIC, HELD_STREAMS_TARGET, RELAY_HEALTH_PORT, RELAY_MAX_SESSIONS, RELAY_MAX_TASKS, RELAY_MIN_TASKS, RELAY_SERVICE_NAME, RELAY_WORKERS } from "../../infra/relay-service";
import { createWebSocketApi, createWebSocketStage, WS_STAGE_NAME } from "../../infra/websocket-api";
import { FLOW_STEPS } from "../../functions/flows/steps";
import { HTTP_ROUTES as DECLARED_ROUTES, servingRoute } from "../../functions/http/routes";

/** Each route by its id, with the needs of the function serving it (a route group's union). */
const HTTP_ROUTES = DECLARED_ROUTES.map((r) => ({ ...servingRoute(r), id: r.id }));
import { WS_ROUTES } from "../../functions/ws/routes";
import { actionsOf, asArray, getAtt, resourcesFor, stackQueries, synthWithoutBundling, type Resources, type Statement } from "./stack-queries";

interface ValidationReport {
  pluginReports: { pluginName: string; conclusion: string; violations: unknown[]; suppressedViolations: { ruleName: string }[] }[];
}
interface ContainerDefinition {
  Environment: { Name: string; Value: unknown }[];
  HealthCheck: { Command: string[]; Interval: number; Retries: number };
  StopTimeout: number;
  ReadonlyRootFilesystem: boolean;
  Image: unknown;
  LogConfiguration: { LogDriver: string; Options: Record<string, unknown> };
}

let stack: ControlPlaneStack;
let template: Template;
let resources: Resources;
let outdir: string;
let q: ReturnType<typeof stackQueries>;
let report: ValidationReport;
let stubDir: string;
let dockerCalls: string;

beforeAll(() => {
  stubDir = mkdtempSync(path.join(tmpdir(), "docker-stub-"));
  dockerCalls = path.join(stubDir, "calls");
  const dockerStub = path.join(stubDir, "docker");
  writeFileSync(dockerStub, `#!/bin/sh\necho "$@" >> '${dockerCalls}'\nexit 1\n`);
  chmodSync(dockerStub, 0o755);
  const previous = process.env.CDK_DOCKER;
  process.env.CDK_DOCKER = dockerStub;
  try {
    const synthesized = synthWithoutBundling();
    synthesized.app.synth();
    ({ stack, template, resources, dir: outdir } = synthesized);
  } finally {
    if (previous === undefined) delete process.env.CDK_DOCKER;
    else process.env.CDK_DOCKER = previous;
  }
  q = stackQueries({ stack, resources });
  report = JSON.parse(readFileSync(path.join(outdir, "validation-report.json"), "utf8")) as ValidationReport;
});
afterAll(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
  if (stubDir) rmSync(stubDir, { recursive: true, force: true });
});

const wsApiRef = () => ({ Ref: q.logicalIdOf(stack.webSocketApi) });
const resolve = (value: unknown): unknown => stack.resolve(value);
const wsEndpoint = (scheme: "wss" | "https") =>
  ({ "Fn::Join": ["", [`${scheme}://`, wsApiRef(), ".execute-api.", { Ref: "AWS::Region" }, ".", { Ref: "AWS::URLSuffix" }, `/${WS_STAGE_NAME}`]] });
const connectionsArn = () =>
  ({ "Fn::Join": ["", ["arn:", { Ref: "AWS::Partition" }, ":execute-api:", { Ref: "AWS::Region" }, ":", { Ref: "AWS::AccountId" }, ":", wsApiRef(), `/${WS_STAGE_NAME}/POST/@connections/*`]] });

const deleteConnectionsArn = () =>
  ({ "Fn::Join": ["", ["arn:", { Ref: "AWS::Partition" }, ":execute-api:", { Ref: "AWS::Region" }, ":", { Ref: "AWS::AccountId" }, ":", wsApiRef(), `/${WS_STAGE_NAME}/DELETE/@connections/*`]] });
const PUSHERS = [
  ...WS_ROUTES.map((r) => r.id),
  "SendInit",
  ...FLOW_STEPS.filter((s) => s.push).map((s) => s.id),
  // The agent's env request pushes `env.requested` (issue 25 §4).
  ...HTTP_ROUTES.filter((r) => r.pushesToClients).map((r) => r.id),
];
const FLOW_STARTING_WS_ROUTES = ["$connect", "$default"];

function relayContainer(): ContainerDefinition {
  const task = resources[q.logicalIdOf(stack.relay.taskDefinition)];
  const containers = task?.Properties.ContainerDefinitions as ContainerDefinition[];
  expect(containers).toHaveLength(1);
  return containers[0] as ContainerDefinition;
}
const relayEnv = (): Record<string, unknown> => Object.fromEntries(relayContainer().Environment.map((e) => [e.Name, e.Value]));
const relayStatements = (): Statement[] => q.statementsOfRole(q.logicalIdOf(stack.relay.taskRole));
/** The generated sandbox access key secret's logical id. */
const sandboxAccessKeyId = (): string =>
  Object.entries(resources).find(([id, r]) => r.Type === "AWS::SecretsManager::Secret" && id.startsWith("SandboxAccessKey"))?.[0] ?? "missing";

describe("WebSocket API", () => {
  it("has exactly the WS_ROUTES route keys, each a Lambda proxy integration of that route's function", () => {
    const routes = Object.values(template.findResources("AWS::ApiGatewayV2::Route", { Properties: { ApiId: wsApiRef() } })) as Resources[string][];
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(WS_ROUTES.map((r) => r.routeKey).sort());
    for (const route of WS_ROUTES) {
      const resource = routes.find((r) => r.Properties.RouteKey === route.routeKey);
      const integrationId = ((resource?.Properties.Target as { "Fn::Join": [string, [string, { Ref: string }]] })["Fn::Join"][1][1]).Ref;
      const integration = resources[integrationId];
      expect(integration?.Properties).toMatchObject({ ApiId: wsApiRef(), IntegrationType: "AWS_PROXY" });
      const uri = JSON.stringify(integration?.Properties.IntegrationUri);
      expect(uri, route.routeKey).toContain(JSON.stringify(getAtt(q.logicalIdOf(stack.functions[route.id]))));
      // API Gateway may invoke it (the permission the integration adds).
      template.hasResourceProperties("AWS::Lambda::Permission", {
        Action: "lambda:InvokeFunction",
        Principal: "apigateway.amazonaws.com",
        FunctionName: getAtt(q.logicalIdOf(stack.functions[route.id])),
      });
    }
  });

  it("has a throttled, auto-deployed `live` stage created after its routes", () => {
    const stageId = q.logicalIdOf(stack.webSocketStage);
    expect(resources[stageId]?.Properties).toMatchObject({
      ApiId: wsApiRef(),
      StageName: WS_STAGE_NAME,
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: expect.any(Number), ThrottlingBurstLimit: expect.any(Number) },
    });
    const routeIds = Object.keys(template.findResources("AWS::ApiGatewayV2::Route", { Properties: { ApiId: wsApiRef() } }));
    expect(resources[stageId]?.DependsOn).toEqual(expect.arrayContaining(routeIds));
    // Access logs are opt-in (they need the account's API Gateway logging role) and acknowledged.
    expect(resources[stageId]?.Properties.AccessLogSettings).toBeUndefined();
  });

  it("writes JSON access logs when they are turned on", () => {
    const local = new Stack();
    const endpoint = createWebSocketApi(local, "Api");
    createWebSocketStage(local, endpoint, { throttle: { rateLimit: 1, burstLimit: 2 }, accessLogs: true, routes: [] });
    const stage = Template.fromStack(local).findResources("AWS::ApiGatewayV2::Stage");
    const settings = (Object.values(stage)[0] as { Properties: { AccessLogSettings: { DestinationArn: unknown; Format: string } } }).Properties.AccessLogSettings;
    expect(settings.DestinationArn).toEqual(expect.objectContaining({ "Fn::GetAtt": [expect.stringMatching(/^WebSocketAccessLogs/), "Arn"] }));
    expect(JSON.parse(settings.Format)).toMatchObject({ requestId: "$context.requestId", connectionId: "$context.connectionId", routeKey: "$context.routeKey" });
  });

  it("is reported to clients as WS_URL by every function, built from the API id alone (no cycle through routes or stage)", () => {
    for (const id of Object.keys(stack.functions)) expect(q.envOf(id).WS_URL, id).toEqual(wsEndpoint("wss"));
    expect(relayEnv().WS_URL).toEqual(wsEndpoint("wss"));
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.WebSocketUrl?.Value).toEqual(wsEndpoint("wss"));
  });
});

describe("send-init", () => {
  it("$connect may invoke SendInit (by name from its environment) and no other function", () => {
    const connect = WS_ROUTES.find((r) => r.routeKey === "$connect");
    const statements = q.statementsOfFunction(connect?.id ?? "");
    expect(resourcesFor(statements, "lambda:InvokeFunction")).toEqual([getAtt(q.logicalIdOf(stack.functions.SendInit))]);
    expect(actionsOf(statements).filter((a) => a.startsWith("lambda:"))).toEqual(["lambda:InvokeFunction"]);
    expect(q.envOf(connect?.id ?? "").SEND_INIT_FUNCTION_NAME).toEqual({ Ref: q.logicalIdOf(stack.functions.SendInit) });
  });

  it("no other function or role can invoke it", () => {
    const sendInitArn = JSON.stringify(getAtt(q.logicalIdOf(stack.functions.SendInit)));
    const connectRole = q.roleOfFunction(WS_ROUTES.find((r) => r.routeKey === "$connect")?.id ?? "");
    const invokers = Object.values(resources)
      .filter((r) => r.Type === "AWS::IAM::Policy")
      .filter((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement.some((s) => asArray(s.Action).includes("lambda:InvokeFunction") && JSON.stringify(s.Resource).includes(sendInitArn)))
      .map((r) => JSON.stringify(r.Properties.Roles));
    expect(invokers).toEqual([JSON.stringify([{ Ref: connectRole }])]);
    for (const id of Object.keys(stack.functions).filter((f) => f !== WS_ROUTES.find((r) => r.routeKey === "$connect")?.id)) {
      expect(q.envOf(id).SEND_INIT_FUNCTION_NAME, id).toBeUndefined();
    }
  });
});

describe("pushing to clients", () => {
  it("the WebSocket functions, send-init and the push steps may post to this API's live stage connections only", () => {
    for (const id of PUSHERS) {
      const statements = q.statementsOfFunction(id);
      // Issue 14 item 5: only $default may also close connections (a revoked or expired token's).
      const closes = WS_ROUTES.find((r) => r.id === id)?.closesConnections ?? false;
      expect(resourcesFor(statements, "execute-api:ManageConnections"), id).toEqual(closes ? [connectionsArn(), deleteConnectionsArn()] : [connectionsArn()]);
      expect([...new Set(actionsOf(statements).filter((a) => a.startsWith("execute-api:")))], id).toEqual(["execute-api:ManageConnections"]);
      expect(q.envOf(id).WS_MANAGEMENT_ENDPOINT, id).toEqual(wsEndpoint("https"));
    }
    expect(resourcesFor(relayStatements(), "execute-api:ManageConnections")).toEqual([connectionsArn()]);
    expect(relayEnv().WS_MANAGEMENT_ENDPOINT).toEqual(wsEndpoint("https"));
  });

  it("only $default may close connections (DeleteConnection)", () => {
    expect(WS_ROUTES.filter((r) => r.closesConnections).map((r) => r.routeKey)).toEqual(["$default"]);
  });

  it("no other function may", () => {
    for (const id of Object.keys(stack.functions).filter((f) => !PUSHERS.includes(f))) {
      expect(actionsOf(q.statementsOfFunction(id)).filter((a) => a.startsWith("execute-api:")), id).toEqual([]);
      expect(q.envOf(id).WS_MANAGEMENT_ENDPOINT, id).toBeUndefined();
    }
  });
});

describe("WebSocket functions", () => {
  it("get what building the flow dependencies reads at cold start, no provider credentials, and the sandbox key only to reach the agent", () => {
    const stepEnv = q.envOf(FLOW_STEPS[0]?.id ?? "");
    const key = sandboxAccessKeyId();
    expect(WS_ROUTES.filter((r) => r.agentAccess).map((r) => r.routeKey)).toEqual(["$default"]);
    for (const id of [...WS_ROUTES.map((r) => r.id), "SendInit"]) {
      const env = q.envOf(id);
      for (const name of ["TABLE_NAME", "SCHEDULE_GROUP_NAME", "SCHEDULE_TARGET_ARN", "SCHEDULE_ROLE_ARN"]) expect(env[name], `${id} ${name}`).toEqual(stepEnv[name]);
      expect(env.PROVIDER_SECRET_ARN, id).toBeUndefined();
      // $default delivers prompts and cancels turns, send-init lists the agent's pending permission
      // questions for a late client (issue 25 §3): they derive the agent's password from the session's key.
      const agentAccess = id === "SendInit" || (WS_ROUTES.find((r) => r.id === id)?.agentAccess ?? false);
      expect(resourcesFor(q.statementsOfFunction(id), "secretsmanager:GetSecretValue"), id).toEqual(agentAccess ? [{ Ref: key }] : []);
      expect(env.SANDBOX_ACCESS_KEY_SECRET_ARN, id).toEqual(agentAccess ? { Ref: key } : undefined);
      // Building the scheduler adapter needs the settings, not the permissions: only the routes
      // that arm schedules ($disconnect: the idle check) get them (flows.test.ts).
      const arms = WS_ROUTES.find((r) => r.id === id)?.armsSchedules ?? false;
      const scheduling = actionsOf(q.statementsOfFunction(id)).filter((a) => a.startsWith("scheduler:") || a === "iam:PassRole");
      if (arms) expect(scheduling, id).toEqual(expect.arrayContaining(["scheduler:CreateSchedule", "iam:PassRole"]));
      else expect(scheduling, id).toEqual([]);
    }
  });

  it("$connect and $default start ensure-runtime and nothing else; $disconnect and send-init start nothing", () => {
    const ensureRuntime = resolve(stateMachineArn(stack, "ensure-runtime"));
    for (const route of WS_ROUTES) {
      const starts = resourcesFor(q.statementsOfFunction(route.id), "states:StartExecution");
      const arnVars = Object.keys(q.envOf(route.id)).filter((k) => k.startsWith("STATE_MACHINE_ARN_"));
      if (FLOW_STARTING_WS_ROUTES.includes(route.routeKey)) {
        expect(starts, route.routeKey).toEqual([ensureRuntime]);
        expect(arnVars, route.routeKey).toEqual(["STATE_MACHINE_ARN_ENSURE_RUNTIME"]);
        expect(q.envOf(route.id).STATE_MACHINE_ARN_ENSURE_RUNTIME).toEqual(ensureRuntime);
      } else {
        expect(starts, route.routeKey).toEqual([]);
        expect(arnVars, route.routeKey).toEqual([]);
      }
    }
    expect(resourcesFor(q.statementsOfFunction("SendInit"), "states:StartExecution")).toEqual([]);
  });
});

describe("streaming relay", () => {
  it("runs on ARM64 Fargate with 1 vCPU and 2 GB, sized for 10,000 streams a task (issue 15)", () => {
    expect(RELAY_MAX_SESSIONS).toBe(10_000);
    expect(resources[q.logicalIdOf(stack.relay.taskDefinition)]?.Properties).toMatchObject({
      RequiresCompatibilities: ["FARGATE"],
      NetworkMode: "awsvpc",
      Cpu: "1024",
      Memory: "2048",
      RuntimePlatform: { CpuArchitecture: "ARM64", OperatingSystemFamily: "LINUX" },
    });
  });

  it("checks health with node (no curl), drains for 120 s, logs to a retained log group", () => {
    const container = relayContainer();
    expect(container.HealthCheck.Command[0]).toBe("CMD");
    expect(container.HealthCheck.Command.slice(1, 3)).toEqual(["node", "-e"]);
    expect(container.HealthCheck.Command[3]).toContain(`fetch('http://127.0.0.1:${RELAY_HEALTH_PORT}')`);
    expect(container.StopTimeout).toBe(120);
    expect(container.ReadonlyRootFilesystem).toBe(true);
    expect(container.LogConfiguration.LogDriver).toBe("awslogs");
    const logGroupId = (container.LogConfiguration.Options["awslogs-group"] as { Ref: string }).Ref;
    expect(resources[logGroupId]?.Properties.RetentionInDays).toBeGreaterThan(0);
  });

  it("is an image asset built from infra/relay/Dockerfile for linux/arm64, and synth never ran Docker", () => {
    const manifest = JSON.parse(readFileSync(path.join(outdir, `${stack.artifactId}.assets.json`), "utf8")) as {
      dockerImages: Record<string, { source: { directory: string; dockerFile: string; platform: string }; destinations: Record<string, { imageTag: string }> }>;
    };
    const images = Object.values(manifest.dockerImages);
    expect(images).toHaveLength(1);
    expect(images[0]?.source).toMatchObject({ dockerFile: "infra/relay/Dockerfile", platform: "linux/arm64" });
    const tag = Object.values(images[0]?.destinations ?? {})[0]?.imageTag ?? "";
    expect(JSON.stringify(relayContainer().Image)).toContain(`:${tag}`);
    // The build context is trimmed by .dockerignore to what the bundle needs.
    const context = path.join(outdir, images[0]?.source.directory ?? "");
    expect(existsSync(path.join(context, "functions", "relay", "main.ts"))).toBe(true);
    expect(existsSync(path.join(context, "infra", "relay", "Dockerfile"))).toBe(true);
    expect(existsSync(path.join(context, "node_modules"))).toBe(false);
    expect(existsSync(path.join(context, "test"))).toBe(false);
    expect(existsSync(dockerCalls), "docker was called during synth").toBe(false);
  });

  it("gets the configuration its service reads (schedule settings included: it arms idle checks), and nothing it does not use", () => {
    const env = relayEnv();
    const stepEnv = q.envOf(FLOW_STEPS[0]?.id ?? "");
    expect(env).toMatchObject({
      TABLE_NAME: { Ref: q.logicalIdOf(stack.table) },
      STATE_MACHINE_ARN_ENSURE_RUNTIME: resolve(stateMachineArn(stack, "ensure-runtime")),
      RELAY_HEALTH_PORT: String(RELAY_HEALTH_PORT),
      RELAY_MAX_SESSIONS: String(RELAY_MAX_SESSIONS),
      RELAY_WORKERS: String(RELAY_WORKERS),
      POWERTOOLS_SERVICE_NAME: RELAY_SERVICE_NAME,
      POWERTOOLS_METRICS_NAMESPACE: "SandboxControlPlane",
    });
    expect(env.PROVIDER_SECRET_ARN).toBeUndefined();
    // It reaches every session's agent, whose password derives from the session's sandbox key.
    expect(env.SANDBOX_ACCESS_KEY_SECRET_ARN).toEqual({ Ref: sandboxAccessKeyId() });
    expect(Object.keys(env).filter((k) => k.startsWith("SCHEDULE_")).sort()).toEqual(["SCHEDULE_DEAD_LETTER_ARN", "SCHEDULE_GROUP_NAME", "SCHEDULE_ROLE_ARN", "SCHEDULE_TARGET_ARN"]);
    for (const name of ["SCHEDULE_GROUP_NAME", "SCHEDULE_TARGET_ARN", "SCHEDULE_ROLE_ARN", "SCHEDULE_DEAD_LETTER_ARN"]) expect(env[name], name).toEqual(stepEnv[name]);
    // ensure-runtime: waking sessions for prompts; idle-snapshot: a failed stream's sandbox liveness check (issue 25 §5).
    expect(env.STATE_MACHINE_ARN_IDLE_SNAPSHOT).toEqual(resolve(stateMachineArn(stack, "idle-snapshot")));
    expect(Object.keys(env).filter((k) => k.startsWith("STATE_MACHINE_ARN_")).sort()).toEqual(["STATE_MACHINE_ARN_ENSURE_RUNTIME", "STATE_MACHINE_ARN_IDLE_SNAPSHOT"]);
  });

  it("runs in public subnets of two AZs without NAT, with a public IP and nothing allowed in", () => {
    template.resourceCountIs("AWS::EC2::NatGateway", 0);
    const subnets = Object.values(template.findResources("AWS::EC2::Subnet")) as Resources[string][];
    expect(subnets).toHaveLength(2);
    for (const subnet of subnets) expect(subnet.Properties.MapPublicIpOnLaunch).toBe(true);
    const service = resources[q.logicalIdOf(stack.relay.service)];
    const network = (service?.Properties.NetworkConfiguration as { AwsvpcConfiguration: { AssignPublicIp: string; SecurityGroups: { "Fn::GetAtt": [string, string] }[] } }).AwsvpcConfiguration;
    expect(network.AssignPublicIp).toBe("ENABLED");
    const group = resources[network.SecurityGroups[0]?.["Fn::GetAtt"][0] ?? ""];
    expect(group?.Properties.SecurityGroupIngress).toBeUndefined();
    template.resourceCountIs("AWS::EC2::SecurityGroupIngress", 0);
    expect(group?.Properties.SecurityGroupEgress).toEqual([expect.objectContaining({ IpProtocol: "tcp", FromPort: 443, ToPort: 443 })]);
    template.hasResourceProperties("AWS::EC2::FlowLog", { ResourceType: "VPC", TrafficType: "ALL", LogDestinationType: "cloud-watch-logs" });
    template.hasResourceProperties("AWS::ECS::Cluster", { ClusterSettings: [{ Name: "containerInsights", Value: "enabled" }] });
  });

  it("keeps at least two tasks, rolls back failed deployments, and never resets the scaled task count", () => {
    const service = resources[q.logicalIdOf(stack.relay.service)];
    expect(service?.Properties).toMatchObject({
      LaunchType: "FARGATE",
      DeploymentConfiguration: { DeploymentCircuitBreaker: { Enable: true, Rollback: true }, MinimumHealthyPercent: 100 },
    });
    expect(service?.Properties.DesiredCount).toBeUndefined();
    template.hasResourceProperties("AWS::ApplicationAutoScaling::ScalableTarget", {
      ScalableDimension: "ecs:service:DesiredCount",
      MinCapacity: RELAY_MIN_TASKS,
      MaxCapacity: RELAY_MAX_TASKS,
    });
    expect(RELAY_MIN_TASKS).toBe(2);
  });

  it("scales on CPU and on the streams each task holds, below the per-task cap", () => {
    template.hasResourceProperties("AWS::ApplicationAutoScaling::ScalingPolicy", {
      PolicyType: "TargetTrackingScaling",
      TargetTrackingScalingPolicyConfiguration: Match.objectLike({ PredefinedMetricSpecification: { PredefinedMetricType: "ECSServiceAverageCPUUtilization" }, TargetValue: 60 }),
    });
    template.hasResourceProperties("AWS::ApplicationAutoScaling::ScalingPolicy", {
      PolicyType: "TargetTrackingScaling",
      TargetTrackingScalingPolicyConfiguration: Match.objectLike({
        CustomizedMetricSpecification: {
          Namespace: "SandboxControlPlane",
          MetricName: HELD_STREAMS_METRIC,
          Dimensions: [{ Name: "service", Value: RELAY_SERVICE_NAME }],
          Statistic: "Average",
        },
        TargetValue: HELD_STREAMS_TARGET,
      }),
    });
    expect(HELD_STREAMS_TARGET).toBeLessThan(RELAY_MAX_SESSIONS);
  });

  it("task role: this table only (no dynamodb:*), push, ensure-runtime and idle-snapshot, idle-check schedules, its own metrics, the nudge queue; nothing else", () => {
    const statements = relayStatements();
    const table = q.logicalIdOf(stack.table);
    const ownTable = new Set([JSON.stringify(getAtt(table)), JSON.stringify({ "Fn::Join": ["", [getAtt(table), "/index/*"]] })]);
    const dynamo = statements.filter((s) => asArray(s.Action).some((a) => a.startsWith("dynamodb:")));
    expect(dynamo.length).toBeGreaterThan(0);
    for (const s of dynamo) {
      for (const r of asArray(s.Resource)) expect(ownTable.has(JSON.stringify(r)), JSON.stringify(r)).toBe(true);
    }
    const actions = actionsOf(statements);
    expect(actions.filter((a) => a.endsWith(":*") || a === "*")).toEqual([]);
    expect(actions).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"]));
    expect(resourcesFor(statements, "states:StartExecution")).toEqual([resolve(stateMachineArn(stack, "ensure-runtime")), resolve(stateMachineArn(stack, "idle-snapshot"))]);
    expect(statements.filter((s) => asArray(s.Action).includes("cloudwatch:PutMetricData"))).toEqual([
      expect.objectContaining({ Resource: "*", Condition: { StringEquals: { "cloudwatch:namespace": "SandboxControlPlane" } } }),
    ]);
    // Arming idle checks: the lifecycle group's schedules, and the automations group's (a run ended
    // by its turn deletes its timeout schedule, issue 18); the scheduler role passed to Scheduler only.
    const groupSchedules = resolve(stack.formatArn({ service: "scheduler", resource: "schedule", resourceName: `${stack.stackName}-lifecycle/*` }));
    for (const action of ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"]) {
      const resources = resourcesFor(statements, action);
      expect(resources[0], action).toEqual(groupSchedules);
      expect(resources.slice(1).map((r) => JSON.stringify(r)), action).toEqual(resources.length > 1 ? [expect.stringContaining(`${stack.stackName}-automations/*`)] : []);
    }
    // The lifecycle schedules' role, and the automations' scheduler role (a run's timeout schedule).
    expect(statements.filter((s) => asArray(s.Action).includes("iam:PassRole"))).toEqual([
      expect.objectContaining({ Resource: relayEnv().SCHEDULE_ROLE_ARN, Condition: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } } }),
      expect.objectContaining({ Resource: relayEnv().AUTOMATIONS_SCHEDULER_ROLE_ARN, Condition: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } } }),
    ]);
    expect(new Set(actions.filter((a) => a.startsWith("iam:")))).toEqual(new Set(["iam:PassRole"]));
    // The sandbox access key (agent passwords) and the Slack secret (its bot token posts Slack sessions' answers, issue 17); not the provider credentials.
    const slackSecret = resolve(stack.slack.secret.secretArn);
    expect(resourcesFor(statements, "secretsmanager:GetSecretValue")).toEqual([{ Ref: sandboxAccessKeyId() }, slackSecret]);
    const services = new Set(actions.map((a) => a.split(":")[0]));
    // sqs: receiving the relay nudges (issue 15; test/infra/relay-nudge-queue.test.ts pins the actions and the queue).
    // kms: Decrypt only, under the secrets key with the org/name context (an automation's sealed webhook secret signs its run's notification).
    expect(statements.filter((s) => actionsOf([s]).some((a) => a.startsWith("kms:")))).toEqual([
      expect.objectContaining({ Action: "kms:Decrypt", Condition: { "ForAllValues:StringEquals": { "kms:EncryptionContextKeys": ["orgId", "name"] }, Null: { "kms:EncryptionContext:orgId": "false", "kms:EncryptionContext:name": "false" } } }),
    ]);
    expect([...services].sort()).toEqual(["cloudwatch", "dynamodb", "execute-api", "iam", "kms", "scheduler", "secretsmanager", "sqs", "states"]);
    expect(resources[q.logicalIdOf(stack.relay.taskRole)]?.Properties.AssumeRolePolicyDocument).toMatchObject({
      Statement: [{ Principal: { Service: "ecs-tasks.amazonaws.com" }, Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } } }],
    });
  });

  it("is a stack output (service and cluster names)", () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.RelayServiceName?.Value).toEqual(getAtt(q.logicalIdOf(stack.relay.service), "Name"));
    expect(outputs.RelayClusterName?.Value).toEqual({ Ref: q.logicalIdOf(stack.relay.cluster) });
  });
});

describe("cdk-nag AwsSolutions", () => {
  it("reports zero unacknowledged violations; each real-time acknowledgement names a finding that occurs", () => {
    const nag = report.pluginReports.find((p) => p.pluginName === "AwsSolutions");
    expect(nag?.violations).toEqual([]);
    expect(nag?.conclusion).toBe("success");
    const suppressed = new Set((nag?.suppressedViolations ?? []).map((s) => s.ruleName));
    const realtime = [stack.webSocketApi, stack.webSocketStage, stack.relay.taskRole, stack.relay.taskDefinition, stack.functions.SendInit?.role];
    const acks = realtime
      .flatMap((c) => c?.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY) ?? [])
      .flatMap((m) => Object.keys(m.data as Record<string, string>).map((id) => id.replace(/^AwsSolutions::/, "")));
    expect(acks.length).toBeGreaterThan(0);
    for (const id of acks) expect(suppressed.has(id), `${id} acknowledged but never reported`).toBe(true);
  });
});

