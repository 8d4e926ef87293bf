/**
 * The control plane as one env-agnostic stack: the single table; the HTTP API with one Lambda
 * function per route or route group (from the shared route table); the lifecycle flows (one state machine per
 * ASL file, one function per flow step from the shared step table); the lifecycle schedule group
 * and its target; the orphan sweeper on a rate schedule; the provider credentials secret; the
 * KMS key of org secrets (granted by each route's and step's `secretAccess`); the
 * WebSocket API with one function per route (from the shared WebSocket route table) and the
 * send-init function; the streaming relay on Fargate; alarms on the idle-snapshot metrics. Every
 * function has its own role, log group, least-privilege grants and an Errors alarm
 * (handler-function.ts).
 */
import { ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack, Validations, type StackProps } from "aws-cdk-lib";
import { HttpApi, HttpMethod, HttpStage, LogGroupLogDestination, type CfnStage, type WebSocketApi, type WebSocketRoute, type WebSocketStage } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration, WebSocketLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import { Alarm, ComparisonOperator, Metric, Stats, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption } from "aws-cdk-lib/aws-dynamodb";
import { CfnServiceLinkedRole, PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import { CfnSchedule, ScheduleGroup } from "aws-cdk-lib/aws-scheduler";
import { Secret } from "aws-cdk-lib/aws-secretsmanager";
import { Topic } from "aws-cdk-lib/aws-sns";
import { EmailSubscription } from "aws-cdk-lib/aws-sns-subscriptions";
import type { StateMachine } from "aws-cdk-lib/aws-stepfunctions";
import type { Construct, IConstruct } from "constructs";
import { FLOW_STEPS, stepArnVariable } from "../functions/flows/steps";
import { HTTP_ROUTES, servingRoute, type HttpRouteDefinition, type SecretAccess } from "../functions/http/routes";
import type { FlowName } from "../functions/ports/flow-runner";
import { METRIC_NAMES } from "../functions/ports/metrics-sink";
import { TABLE_DEFINITION } from "../functions/store/table-layout";
import { SEND_INIT_ENTRY, WS_ROUTES } from "../functions/ws/routes";
import { createHandlerFunction } from "./handler-function";
import { BUILD_KEY_HOLDERS, BUILD_STEPS } from "../functions/builds/build-steps";
import { allowStartingBuilds, createSnapshotBuilder } from "./snapshot-builder";
import { acknowledgeExecutionWildcards, allowStartingFlows, createFlowStateMachine, deployableFlows, flowConstructId, flowStartGrant } from "./lifecycle-flows";
import { createRelayService, RELAY_MIN_TASKS, type RelayService } from "./relay-service";
import { SlackStack } from "./slack-stack";
import { ConsoleStack } from "./console-stack";
import { ApiDocsStack } from "./api-docs-stack";
import { OpsStack, scheduleDeadLetterQueueName } from "./ops-stack";
import { addRunbookLine } from "./ops-runbook";
import { AutomationsStack } from "./automations-stack";
import { createRelayNudgeQueue, grantNudging, grantReceivingNudges } from "./relay-nudge-queue";
import { DEFAULT_STAGE_THROTTLE, HTTP_ROUTE_THROTTLES, RESERVED_CONCURRENCY, WS_ROUTE_THROTTLES, type Throttle } from "./api-throttles";
import { acknowledgePushWildcard, allowClosingConnections, allowPush, createWebSocketApi, createWebSocketStage, pushGrant } from "./websocket-api";

/** CloudWatch namespace of every metric the control plane publishes (POWERTOOLS_METRICS_NAMESPACE). */
export const METRICS_NAMESPACE = "SandboxControlPlane";
/** The stack's name unless `-c stackName=` gives another (a second stack in the same account and region). */
export const DEFAULT_STACK_NAME = "SandboxControlPlane";

/**
 * The metrics namespace of a stack: the default stack keeps METRICS_NAMESPACE; any other stack
 * gets its own, so two stacks in one account never feed each other's alarms or relay scaling.
 */
export function metricsNamespaceOf(stackName: string): string {
  return stackName === DEFAULT_STACK_NAME ? METRICS_NAMESPACE : `${METRICS_NAMESPACE}/${stackName}`;
}
/** The Lambda functions' POWERTOOLS_SERVICE_NAME: the `service` dimension Powertools puts on their metrics. */
export const FUNCTIONS_SERVICE_NAME = "sandbox-control-plane";
/**
 * schedule-fired's Lambda timeout: it reads the session and starts a flow or re-arms the check.
 * An idle check delivered early (up to IDLE_CHECK_MAX_EARLY_SECONDS, 70 s by default) no longer
 * waits in the function: idle-snapshot's first state, a Step Functions Wait, does (issue 15).
 */
export const SCHEDULE_FIRED_TIMEOUT_SECONDS = 30;
/** API Gateway HTTP APIs give up on an integration after 30 s: every route's Lambda answers before that. */
export const HTTP_INTEGRATION_TIMEOUT_SECONDS = 30;
/** Lambda timeout of an HTTP route that does not call the agent (table reads and writes, a flow start). */
export const HTTP_ROUTE_TIMEOUT_SECONDS = 10;
/**
 * Lambda timeout of an HTTP route that calls the agent (`agentAccess`: POST .../prompts). Prompt
 * delivery makes up to two sequential agent requests (isBusy, then promptAsync; each bounded by
 * AGENT_REQUEST_TIMEOUT_MS) after its table reads, and the first call of a container reads the
 * sandbox key secret: 10 s (the agent's own deadline) would let the Lambda die before the handler
 * answers. Below the HTTP API's integration timeout (test/infra/limits.test.ts).
 */
export const AGENT_ROUTE_TIMEOUT_SECONDS = 28;
/** The metering pass's rate (METERING_INTERVAL_SECONDS' default, 60 s: EventBridge Scheduler's finest rate). */
export const METERING_RATE_MINUTES = 1;

/** Default period of the orphan sweeper (SWEEPER_INTERVAL_SECONDS' default, seed 002 §11). */
export const DEFAULT_SWEEPER_INTERVAL_SECONDS = 600;

/**
 * The sweeper's rate in whole minutes (EventBridge Scheduler's finest rate unit), at least one.
 * A period over a day is refused: the orphan alarm's period is the same, and CloudWatch caps it.
 */
export function sweeperRateMinutes(intervalSeconds: number): number {
  if (!Number.isFinite(intervalSeconds) || intervalSeconds <= 0 || intervalSeconds > 86_400) {
    throw new Error(`sweeperIntervalSeconds must be a number of seconds in (0, 86400], got ${intervalSeconds}`);
  }
  return Math.max(1, Math.round(intervalSeconds / 60));
}

interface RouteSettings {
  ThrottlingRateLimit: number;
  ThrottlingBurstLimit: number;
}

/** A route's throttle as stage route settings, never looser than the stage's own. */
function routeSettings(route: Throttle, stage: Throttle): RouteSettings {
  return { ThrottlingRateLimit: Math.min(route.rateLimit, stage.rateLimit), ThrottlingBurstLimit: Math.min(route.burstLimit, stage.burstLimit) };
}

export interface ControlPlaneStackProps extends StackProps {
  /** Protect the table from deletion (and retain it when the stack is deleted). Default true. */
  deletionProtection?: boolean;
  /** Sandbox provider sessions use by default in AWS (the local provider cannot run in Lambda). */
  defaultSandboxProvider?: "modal" | "e2b";
  /**
   * API-wide throttling (requests per second, burst), HTTP and WebSocket alike; the expensive
   * routes get tighter per-route throttles (infra/api-throttles.ts), never looser than this.
   */
  throttle?: { rateLimit: number; burstLimit: number };
  /**
   * Reserved concurrency on the functions that start sandboxes or sweep (infra/api-throttles.ts).
   * Default true; false for an account whose Lambda concurrency limit cannot spare it.
   */
  reservedConcurrency?: boolean;
  /**
   * WebSocket stage access logs. Default false: they need the account's API Gateway CloudWatch
   * Logs role (set once per account and region, outside this stack), or the stage fails to deploy.
   */
  webSocketAccessLogs?: boolean;
  /**
   * Complete ARN of an existing provider credentials secret (JSON object of provider variables).
   * Default: the stack creates `<stack>/sandbox-providers` with a placeholder to fill in.
   */
  providerSecretArn?: string;
  /**
   * Orphan sweeper period (SWEEPER_INTERVAL_SECONDS), rounded to whole minutes (at least one).
   * Default 600. The OrphanSessionsFound alarm evaluates over the same period.
   */
  sweeperIntervalSeconds?: number;
  /** seed 003 §6.7: `git pull --ff-only` when a sandbox restores from a snapshot. Default off. */
  gitPullOnRestore?: { enabled: boolean; cadenceSeconds: number };
  /** Subscribes this address to the alarm topic (every alarm of the stack notifies the topic). */
  alarmEmail?: string;
  /**
   * Creates the Application Auto Scaling service-linked role for ECS (the relay's scaling needs
   * it). Default false: an account that ever scaled an ECS service has it already, and creating it
   * twice fails the deploy.
   */
  createAutoScalingServiceLinkedRole?: boolean;
  /** Per-second sandbox prices (USD) by provider for the Cost dashboard's dollars avoided (infra/ops-stack.ts defaults). */
  providerPricesPerSecond?: Record<string, number>;
  /** Time to running p95 (ms) above which the TimeToRunningP95 alarm fires (default 90,000). */
  timeToRunningP95Ms?: number;
}

export class ControlPlaneStack extends Stack {
  readonly table: Table;
  readonly httpApi: HttpApi;
  readonly webSocketApi: WebSocketApi;
  readonly webSocketStage: WebSocketStage;
  readonly relay: RelayService;
  /** By HTTP route id, step id, `ScheduleFired`, `Sweeper`, WebSocket route id and `SendInit`. */
  readonly functions: Record<string, NodejsFunction> = {};
  /** One per flow with an ASL file. */
  readonly stateMachines: Partial<Record<FlowName, StateMachine>> = {};
  /** The sweeper's rate schedule (EventBridge Scheduler). */
  readonly sweeperSchedule: CfnSchedule;
  /** The snapshot builder (statemachines/builds/snapshot-builder.asl.json). */
  readonly snapshotBuilder: StateMachine;
  /** The scheduled prebuild rebuild's rate schedule. */
  readonly prebuildRebuildSchedule: CfnSchedule;
  /** The metering pass's rate schedule (usage, limits and credits). */
  readonly meteringSchedule: CfnSchedule;
  /** Wraps the data keys of org secrets (envelope encryption of their values in the table). */
  readonly secretsKey: Key;
  /** Alarms on the idle-snapshot metrics the functions publish (EMF). */
  readonly idleAlarms: { circuitBreakerTrips: Alarm; orphanSessions: Alarm };
  /** Every alarm of the stack notifies this topic (subscribe to it, or pass `alarmEmail`). */
  readonly alarmTopic: Topic;
  /** Slack (API.md "Slack"): its own nested stack (infra/slack-stack.ts). */
  readonly slack: SlackStack;
  /** Dashboards and the operations alarms (issue 19): its own nested stack (infra/ops-stack.ts). */
  readonly ops: OpsStack;
  readonly automations: AutomationsStack;
  /** The web console's static site (S3 + CloudFront): its own nested stack (infra/console-stack.ts). */
  readonly console: ConsoleStack;
  /** `GET /v1/openapi.json` (issue 20), in a nested stack of its own. */
  readonly apiDocs: ApiDocsStack;

  constructor(scope: Construct, id: string, props: ControlPlaneStackProps = {}) {
    super(scope, id, props);
    const deletionProtection = props.deletionProtection ?? true;
    const defaultProvider = props.defaultSandboxProvider ?? "modal";
    const sweeperMinutes = sweeperRateMinutes(props.sweeperIntervalSeconds ?? DEFAULT_SWEEPER_INTERVAL_SECONDS);
    const stageThrottle = props.throttle ?? DEFAULT_STAGE_THROTTLE;
    const reserved = (id: string): number | undefined => ((props.reservedConcurrency ?? true) ? RESERVED_CONCURRENCY[id] : undefined);

    this.table = new Table(this, "SessionTable", {
      partitionKey: { name: TABLE_DEFINITION.partitionKey, type: AttributeType.STRING },
      sortKey: { name: TABLE_DEFINITION.sortKey, type: AttributeType.STRING },
      // Connection and proxy items expire (issue 14 §3); readers also check `expiresAt`, since deletion lags.
      timeToLiveAttribute: TABLE_DEFINITION.timeToLiveAttribute,
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection,
      encryption: TableEncryption.AWS_MANAGED,
      removalPolicy: deletionProtection ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    for (const gsi of TABLE_DEFINITION.globalSecondaryIndexes) {
      this.table.addGlobalSecondaryIndex({
        indexName: gsi.indexName,
        partitionKey: { name: gsi.partitionKey, type: AttributeType.STRING },
        ...(gsi.sortKey ? { sortKey: { name: gsi.sortKey, type: AttributeType.STRING } } : {}),
        ...(gsi.projection ? { projectionType: ProjectionType.INCLUDE, nonKeyAttributes: [...gsi.projection] } : {}),
      });
    }

    this.httpApi = new HttpApi(this, "HttpApi", {
      apiName: `${this.stackName}-http`,
      description: "Sandbox control plane HTTP API (v1)",
      createDefaultStage: false,
    });
    const accessLogs = new LogGroup(this, "HttpApiAccessLogs", { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
    const stage = new HttpStage(this, "DefaultStage", {
      httpApi: this.httpApi,
      stageName: "$default",
      autoDeploy: true,
      throttle: stageThrottle,
      accessLogSettings: { destination: new LogGroupLogDestination(accessLogs) },
    });

    // Created first: every function reports its URL (WS_URL), built from the API id alone.
    const webSocket = createWebSocketApi(this, "WebSocketApi");
    this.webSocketApi = webSocket.api;

    const metricsNamespace = metricsNamespaceOf(this.stackName);
    const environment: Record<string, string> = {
      TABLE_NAME: this.table.tableName,
      DEFAULT_SANDBOX_PROVIDER: defaultProvider,
      SANDBOX_PROVIDERS: "modal,e2b",
      WS_URL: webSocket.url,
      POWERTOOLS_SERVICE_NAME: FUNCTIONS_SERVICE_NAME,
      POWERTOOLS_METRICS_NAMESPACE: metricsNamespace,
      POWERTOOLS_LOG_LEVEL: "INFO",
      NODE_OPTIONS: "--enable-source-maps",
    };

    // Provider credentials (MODAL_TOKEN_*, E2B_API_KEY, ANTHROPIC_API_KEY, ...) as one JSON
    // secret, read at cold start by whatever talks to a sandbox. Created with a generated
    // placeholder, so no credential is ever in the template; operators put the real JSON in.
    const providerSecret = props.providerSecretArn
      ? Secret.fromSecretCompleteArn(this, "ProviderSecret", props.providerSecretArn)
      : new Secret(this, "ProviderSecret", {
          secretName: `${this.stackName}/sandbox-providers`,
          // Kept with the table: the operator's credentials are not the stack's to delete.
          removalPolicy: RemovalPolicy.RETAIN,
          description: "Sandbox provider credentials as a JSON object (MODAL_TOKEN_ID, MODAL_TOKEN_SECRET, E2B_API_KEY, ANTHROPIC_API_KEY, ...)",
          generateSecretString: { secretStringTemplate: "{}", generateStringKey: "placeholder" },
        });
    const allowProviderSecret = (fn: NodejsFunction): void => {
      fn.addEnvironment("PROVIDER_SECRET_ARN", providerSecret.secretArn);
      providerSecret.grantRead(fn);
    };
    if (providerSecret instanceof Secret) {
      Validations.of(providerSecret).acknowledge({
        id: "AwsSolutions::AwsSolutions-SMG4",
        reason: "Third-party provider tokens (Modal, E2B, Anthropic) are issued and rotated at the provider; there is no rotation Lambda that could mint them.",
      });
    }

    // The master sandbox access key (sandbox/shared/access-token.ts): each session's sandbox key
    // (its SIDECAR_TOKEN) is derived from it, sidecar access tokens are signed with those, and
    // each sandbox's OpenCode password is derived from them. Generated here, never in the
    // template; read by what creates sandboxes, signs sidecar access or calls the agent (whose
    // tunnel answers 401 without the password): the sandbox steps, the agent and sidecar routes,
    // the WebSocket routes that deliver prompts, and the relay.
    const sandboxAccessKey = new Secret(this, "SandboxAccessKey", {
      secretName: `${this.stackName}/sandbox-access-key`,
      // Retained like the table: every session's sandbox key derives from it, so a table kept
      // (or restored from a backup) without it could never reach its sandboxes again.
      removalPolicy: RemovalPolicy.RETAIN,
      description: "Master key the sandbox keys (SIDECAR_TOKEN) and sidecar access tokens derive from",
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
    });
    Validations.of(sandboxAccessKey).acknowledge({
      id: "AwsSolutions::AwsSolutions-SMG4",
      reason: "Sandbox keys are derived from this key and live inside running sandboxes: rotating it would lock every running sidecar out until its session is re-created. Rotate by replacing the secret during a maintenance window.",
    });
    // Flows and the prompt path tell the relays about a session at once (issue 15): one SQS queue
    // the relays long-poll (infra/relay-nudge-queue.ts).
    const relayNudges = createRelayNudgeQueue(this);
    const allowNudging = (fn: NodejsFunction): void => grantNudging(relayNudges, fn, (name, value) => fn.addEnvironment(name, value));
    const allowSandboxKeys = (fn: NodejsFunction): void => {
      fn.addEnvironment("SANDBOX_ACCESS_KEY_SECRET_ARN", sandboxAccessKey.secretArn);
      sandboxAccessKey.grantRead(fn);
    };

    // Org secrets (API.md "Secrets"; functions/store/dynamo-org-secrets.ts): values live in the
    // table, AES-256-GCM under a data key per secret that this customer-managed key wraps, with
    // the secret's org and name as encryption context. Retained whatever happens to the stack:
    // without it no stored value (nor any table backup's) can ever be decrypted again.
    this.secretsKey = new Key(this, "SecretsKey", {
      description: "Wraps the data keys of org secrets stored in the session table (envelope encryption)",
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    const secretsKeyArn = this.secretsKey.keyArn;
    // By the route's (or step's) declared use: storing values may only Encrypt, revealing them only
    // Decrypt, metadata needs no KMS at all. Both only with the org and name as encryption
    // context, as KmsSecretKeyWrapper always sends them.
    const secretsStatement = (access: "encrypt" | "decrypt"): PolicyStatement =>
      new PolicyStatement({
        actions: [access === "encrypt" ? "kms:Encrypt" : "kms:Decrypt"],
        resources: [secretsKeyArn],
        conditions: {
          "ForAllValues:StringEquals": { "kms:EncryptionContextKeys": ["orgId", "name"] },
          Null: { "kms:EncryptionContext:orgId": "false", "kms:EncryptionContext:name": "false" },
        },
      });
    const allowSecrets = (fn: NodejsFunction, access: SecretAccess): void => {
      if (access === "metadata") return;
      fn.addEnvironment("SECRETS_KMS_KEY_ARN", secretsKeyArn);
      fn.addToRolePolicy(secretsStatement(access));
    };

    // Lifecycle schedules (sandbox expiry, idle checks): one group, one role Scheduler assumes to
    // invoke the schedule targets (schedule-fired, the sweeper) and nothing else. The target has a
    // fixed name so its ARN is known to the functions that arm schedules, itself included (see
    // SCHEDULE_TARGET_ARN).
    const scheduleGroupName = `${this.stackName}-lifecycle`;
    const scheduleGroup = new ScheduleGroup(this, "LifecycleSchedules", { scheduleGroupName, removalPolicy: RemovalPolicy.DESTROY });
    const schedulerRole = new Role(this, "SchedulerRole", {
      assumedBy: new ServicePrincipal("scheduler.amazonaws.com", { conditions: { StringEquals: { "aws:SourceAccount": this.account } } }),
      description: "Assumed by EventBridge Scheduler to invoke the schedule-fired and sweeper functions",
    });
    const scheduleFiredName = `${this.stackName}-schedule-fired`;
    const scheduleTargetArn = this.formatArn({ service: "lambda", resource: "function", resourceName: scheduleFiredName, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
    // What arming schedules takes (the scheduler adapter, lifecycleSchedulerFromEnv): the settings,
    // the schedule actions on this group's schedules only, and passing the scheduler role to
    // Scheduler and nobody else.
    // Invocations that fail every retry go to a dead-letter queue in the ops nested stack (issue 19),
    // named here so no root resource refers to the nested stack (which refers to the root's).
    const scheduleDeadLetterArn = this.formatArn({ service: "sqs", resource: scheduleDeadLetterQueueName(this.stackName), arnFormat: ArnFormat.NO_RESOURCE_NAME });
    schedulerRole.addToPrincipalPolicy(new PolicyStatement({ actions: ["sqs:SendMessage"], resources: [scheduleDeadLetterArn] }));
    const scheduleEnvironment: Record<string, string> = {
      SCHEDULE_GROUP_NAME: scheduleGroup.scheduleGroupName,
      SCHEDULE_TARGET_ARN: scheduleTargetArn,
      SCHEDULE_ROLE_ARN: schedulerRole.roleArn,
      SCHEDULE_DEAD_LETTER_ARN: scheduleDeadLetterArn,
    };
    const schedulingStatements = (): PolicyStatement[] => [
      new PolicyStatement({
        actions: ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule"],
        resources: [this.formatArn({ service: "scheduler", resource: "schedule", resourceName: `${scheduleGroupName}/*` })],
      }),
      new PolicyStatement({
        actions: ["iam:PassRole"],
        resources: [schedulerRole.roleArn],
        conditions: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } },
      }),
    ];
    const acknowledgeScheduleWildcard = (role: IConstruct): void => {
      Validations.of(role).acknowledge({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/${scheduleGroupName}/*]`,
        reason: "Schedules are named per session at run time; the grant is limited to this stack's lifecycle schedule group.",
      });
    };
    const allowScheduling = (fn: NodejsFunction): void => {
      fn.node.addDependency(scheduleGroup);
      for (const [name, value] of Object.entries(scheduleEnvironment)) fn.addEnvironment(name, value);
      for (const statement of schedulingStatements()) fn.addToRolePolicy(statement);
      acknowledgeScheduleWildcard(fn.role ?? fn);
    };
    // Every flow Lambda builds its dependencies (scheduler adapter included) from these at cold
    // start (functions/flows/lambda-entry.ts); only the functions given allowScheduling may use them.
    const flowEnvironment: Record<string, string> = {
      ...environment,
      ...scheduleEnvironment,
      // Sandboxes' sidecars call back here for their credentials (POST /v1/sandbox/...).
      CONTROL_PLANE_URL: stage.url,
      ...(props.gitPullOnRestore === undefined ? {} : { SANDBOX_GIT_PULL_ON_RESTORE: String(props.gitPullOnRestore.enabled), SANDBOX_GIT_PULL_CADENCE_SECONDS: String(props.gitPullOnRestore.cadenceSeconds) }),
    };

    const httpRouteSettings: Record<string, RouteSettings> = {};
    // One function per route, or per route group (routes.ts `group`: a family served by one
    // entry), with the union of its routes' grants (`servingRoute`). `functions` is by route id.
    const routeFunctions = new Map<string, NodejsFunction>();
    const functionFor = (route: HttpRouteDefinition): NodejsFunction => {
      const served = servingRoute(route);
      const existing = routeFunctions.get(served.id);
      if (existing) return existing;
      const fn = createHandlerFunction(this, {
        id: served.id,
        entry: served.entry,
        purpose: served.group ? `the ${served.id} HTTP handlers (${HTTP_ROUTES.filter((r) => r.group === served.group).map((r) => r.id).join(", ")})` : `the ${served.id} HTTP handler`,
        alarmDescription: `${served.id} handler threw (5xx) in the last 5 minutes`,
        environment,
        memorySize: 512,
        timeout: Duration.seconds(served.agentAccess ? AGENT_ROUTE_TIMEOUT_SECONDS : HTTP_ROUTE_TIMEOUT_SECONDS),
        table: this.table,
        tableAccess: served.tableAccess,
        reservedConcurrency: reserved(served.id),
      });
      allowStartingFlows(fn, served.startsFlows ?? [], `route ${served.id}`);
      if (served.agentAccess || served.sandboxAccess || served.providerAccess) allowProviderSecret(fn);
      if (served.agentAccess || served.sandboxAccess || served.verifiesSandboxes) allowSandboxKeys(fn);
      // Prompt delivery nudges a relay to claim a running session nobody watches.
      if (served.agentAccess) allowNudging(fn);
      // The idle check when a proxy connection closes (functions/http/handlers/proxy-connections.ts).
      if (served.armsSchedules) allowScheduling(fn);
      if (served.secretAccess) allowSecrets(fn, served.secretAccess);
      if (served.pushesToClients) allowPush(fn, webSocket);
      if (served.startsBuilds) allowStartingBuilds(fn);
      routeFunctions.set(served.id, fn);
      return fn;
    };
    for (const route of HTTP_ROUTES) {
      const fn = functionFor(route);
      const [httpRoute] = this.httpApi.addRoutes({
        path: route.path,
        methods: [HttpMethod[route.method]],
        integration: new HttpLambdaIntegration(`${route.id}Integration`, fn),
      });
      const throttle = HTTP_ROUTE_THROTTLES[route.id];
      if (throttle && httpRoute) {
        httpRouteSettings[`${route.method} ${route.path}`] = routeSettings(throttle, stageThrottle);
        // Route settings name routes that must exist when the stage deploys.
        stage.node.addDependency(httpRoute);
      }
      this.functions[route.id] = fn;
    }
    (stage.node.defaultChild as CfnStage).routeSettings = httpRouteSettings;

    const stepFunctions = new Map<string, NodejsFunction>();
    for (const step of FLOW_STEPS) {
      const fn = createHandlerFunction(this, {
        id: step.id,
        entry: step.entry,
        purpose: `the ${step.id} flow step`,
        alarmDescription: `${step.id} threw in the last 5 minutes (the flow retries or records the failure)`,
        environment: flowEnvironment,
        // Provider SDKs and snapshot transfers are memory- and CPU-bound; the rest is I/O.
        memorySize: step.sandboxAccess ? 1024 : 512,
        timeout: Duration.seconds(step.timeoutSeconds),
        table: this.table,
        tableAccess: "readwrite",
      });
      if (step.sandboxAccess) allowProviderSecret(fn);
      if (step.sandboxAccess) allowSandboxKeys(fn);
      if (step.push) allowPush(fn, webSocket);
      // Provision reveals the model keys and git credentials a session names.
      if (step.secretAccess) allowSecrets(fn, step.secretAccess);
      if (step.orchestrates) {
        // Prompt wake-up (ensure-runtime) and the idle snapshot circuit breaker (stop).
        allowStartingFlows(fn, ["ensure-runtime", "stop"], `step ${step.id}`);
        allowScheduling(fn);
        // Finish (also run by Commit) nudges the relays after every committed flow.
        allowNudging(fn);
      }
      stepFunctions.set(stepArnVariable(step), fn);
      this.functions[step.id] = fn;
    }

    // The snapshot builder (functions/builds/, statemachines/builds/): one function per step, like
    // the flow steps; the sandbox steps get the provider credentials, and provision the sandbox
    // access key too (it derives the build sandbox's key: functions/builds/build-sandbox.ts).
    const buildStepFunctions = new Map<string, NodejsFunction>();
    for (const step of BUILD_STEPS) {
      const fn = createHandlerFunction(this, {
        id: step.id,
        entry: step.entry,
        purpose: `the ${step.id} snapshot builder step`,
        alarmDescription: `${step.id} threw in the last 5 minutes (the build retries or is recorded as failed)`,
        environment: flowEnvironment,
        memorySize: step.sandboxAccess ? 1024 : 512,
        timeout: Duration.seconds(step.timeoutSeconds),
        table: this.table,
        tableAccess: "readwrite",
      });
      if (step.sandboxAccess) allowProviderSecret(fn);
      if (BUILD_KEY_HOLDERS.includes(step.id)) allowSandboxKeys(fn);
      buildStepFunctions.set(stepArnVariable(step), fn);
      this.functions[step.id] = fn;
    }
    this.snapshotBuilder = createSnapshotBuilder(this, buildStepFunctions);

    const scheduleFired = createHandlerFunction(this, {
      id: "ScheduleFired",
      entry: "functions/schedules/schedule-fired.ts",
      purpose: "the lifecycle schedule target (EventBridge Scheduler)",
      alarmDescription: "schedule-fired threw in the last 5 minutes (Scheduler retries, then drops the firing)",
      environment: flowEnvironment,
      memorySize: 512,
      // The work only: an early idle-check delivery waits in the idle-snapshot flow's Wait state, not here.
      timeout: Duration.seconds(SCHEDULE_FIRED_TIMEOUT_SECONDS),
      table: this.table,
      tableAccess: "read",
      functionName: scheduleFiredName,
    });
    // Expiry -> migrate; idle check -> idle-snapshot, or the check re-armed for a moved grace.
    allowStartingFlows(scheduleFired, ["migrate", "idle-snapshot"], "schedule-fired");
    allowScheduling(scheduleFired);
    this.functions.ScheduleFired = scheduleFired;
    // The unqualified ARN only: schedules target the function, never a version or alias.
    schedulerRole.addToPrincipalPolicy(new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [scheduleFired.functionArn] }));

    // The orphan sweeper (functions/sweeper/): the backstop behind the event-driven idle checks.
    // It lists and terminates sandboxes (provider credentials, like the sandbox steps), starts
    // idle-snapshot and re-arms idle checks. A rate schedule in a group of its own: the lifecycle
    // group's schedules are written and deleted at run time by every function that arms them.
    const sweeper = createHandlerFunction(this, {
      id: "Sweeper",
      entry: "functions/sweeper/sweeper-fired.ts",
      purpose: "the orphan sweeper (EventBridge Scheduler rate schedule)",
      alarmDescription: "the orphan sweeper threw in the last 5 minutes (the next sweep runs on schedule)",
      environment: { ...flowEnvironment, SWEEPER_INTERVAL_SECONDS: String(sweeperMinutes * 60) },
      // Provider SDKs, like the sandbox steps.
      memorySize: 1024,
      // Every running session and every listed sandbox, one provider call after another.
      timeout: Duration.seconds(300),
      table: this.table,
      tableAccess: "readwrite",
      reservedConcurrency: reserved("Sweeper"),
    });
    allowProviderSecret(sweeper);
    allowStartingFlows(sweeper, ["idle-snapshot"], "the sweeper");
    allowScheduling(sweeper);
    this.functions.Sweeper = sweeper;
    schedulerRole.addToPrincipalPolicy(new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [sweeper.functionArn] }));
    const maintenanceGroup = new ScheduleGroup(this, "MaintenanceSchedules", { scheduleGroupName: `${this.stackName}-maintenance`, removalPolicy: RemovalPolicy.DESTROY });
    this.sweeperSchedule = new CfnSchedule(this, "SweeperSchedule", {
      groupName: maintenanceGroup.scheduleGroupName,
      description: "Runs the orphan sweeper every SWEEPER_INTERVAL_SECONDS",
      scheduleExpression: `rate(${sweeperMinutes} ${sweeperMinutes === 1 ? "minute" : "minutes"})`,
      flexibleTimeWindow: { mode: "OFF" },
      state: "ENABLED",
      target: {
        arn: sweeper.functionArn,
        roleArn: schedulerRole.roleArn,
        deadLetterConfig: { arn: scheduleDeadLetterArn },
        // A firing older than the next one is worth nothing: the next sweep does the same work.
        retryPolicy: { maximumRetryAttempts: 2, maximumEventAgeInSeconds: Math.max(60, sweeperMinutes * 60) },
      },
    });
    // The role and its policy (the invoke grant above) exist before the first firing; the group
    // exists before the schedule is created in it and is deleted only after it (the group name is
    // a plain string here, so without this CloudFormation would order them at random).
    this.sweeperSchedule.node.addDependency(schedulerRole);
    this.sweeperSchedule.node.addDependency(maintenanceGroup);

    // The scheduled prebuild rebuild: hourly, each prebuild rebuilt once its latest build is
    // PREBUILD_REBUILD_INTERVAL_SECONDS old (default a day).
    const prebuildRebuild = createHandlerFunction(this, {
      id: "PrebuildRebuild",
      entry: "functions/builds/entries/rebuild-fired.ts",
      purpose: "the scheduled prebuild rebuild (EventBridge Scheduler rate schedule)",
      alarmDescription: "the scheduled prebuild rebuild threw in the last 5 minutes (the next firing tries again)",
      environment,
      memorySize: 512,
      timeout: Duration.seconds(120),
      table: this.table,
      tableAccess: "readwrite",
    });
    allowStartingBuilds(prebuildRebuild);
    this.functions.PrebuildRebuild = prebuildRebuild;
    schedulerRole.addToPrincipalPolicy(new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [prebuildRebuild.functionArn] }));
    this.prebuildRebuildSchedule = new CfnSchedule(this, "PrebuildRebuildSchedule", {
      groupName: maintenanceGroup.scheduleGroupName,
      description: "Rebuilds prebuilds whose latest build is PREBUILD_REBUILD_INTERVAL_SECONDS old",
      scheduleExpression: "rate(1 hour)",
      flexibleTimeWindow: { mode: "OFF" },
      state: "ENABLED",
      target: { arn: prebuildRebuild.functionArn, roleArn: schedulerRole.roleArn, deadLetterConfig: { arn: scheduleDeadLetterArn }, retryPolicy: { maximumRetryAttempts: 2, maximumEventAgeInSeconds: 3600 } },
    });
    this.prebuildRebuildSchedule.node.addDependency(schedulerRole);
    this.prebuildRebuildSchedule.node.addDependency(maintenanceGroup);

    // The metering pass (functions/usage/, API.md "Usage, limits and credits"): every running
    // session's usage written, and the running sessions of an org whose credits are spent paused
    // (`pause` flow, reason credit_limit). Table and the pause state machine only: no provider
    // credentials, no schedules of its own.
    const metering = createHandlerFunction(this, {
      id: "Metering",
      entry: "functions/usage/metering-fired.ts",
      purpose: "the metering pass (EventBridge Scheduler rate schedule)",
      alarmDescription: "the metering pass threw in the last 5 minutes (the next pass meters the same intervals up to its own time)",
      environment: { ...flowEnvironment, METERING_INTERVAL_SECONDS: String(METERING_RATE_MINUTES * 60) },
      memorySize: 512,
      // One conditional write per running session, one limits read per org.
      timeout: Duration.seconds(120),
      table: this.table,
      tableAccess: "readwrite",
      reservedConcurrency: reserved("Metering"),
    });
    allowStartingFlows(metering, ["pause"], "the metering pass");
    this.functions.Metering = metering;
    schedulerRole.addToPrincipalPolicy(new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [metering.functionArn] }));
    this.meteringSchedule = new CfnSchedule(this, "MeteringSchedule", {
      groupName: maintenanceGroup.scheduleGroupName,
      description: "Runs the metering pass every METERING_INTERVAL_SECONDS",
      scheduleExpression: `rate(${METERING_RATE_MINUTES} minute)`,
      flexibleTimeWindow: { mode: "OFF" },
      state: "ENABLED",
      // A late or repeated firing is harmless (the usage writes are idempotent); an old one is worth nothing.
      target: { arn: metering.functionArn, roleArn: schedulerRole.roleArn, deadLetterConfig: { arn: scheduleDeadLetterArn }, retryPolicy: { maximumRetryAttempts: 2, maximumEventAgeInSeconds: 60 } },
    });
    this.meteringSchedule.node.addDependency(schedulerRole);
    this.meteringSchedule.node.addDependency(maintenanceGroup);

    // WebSocket handlers build the flow dependencies (functions/ws/lambda-entry.ts), so they get
    // the flow environment, and none needs provider credentials. All of them may push: $default
    // replies and send-init sends `init`; $connect and $disconnect build the same push adapter,
    // which without its endpoint would drop every message without a word.
    const sendInit = createHandlerFunction(this, {
      id: "SendInit",
      entry: SEND_INIT_ENTRY,
      purpose: "the send-init function (invoked asynchronously by $connect)",
      alarmDescription: "send-init threw in the last 5 minutes (Lambda retries the event twice; the client has no init until then)",
      environment: flowEnvironment,
      memorySize: 512,
      // Transcript pages plus up to ten push attempts 200 ms apart.
      timeout: Duration.seconds(30),
      table: this.table,
      tableAccess: "readwrite",
    });
    allowPush(sendInit, webSocket);
    // A late client gets the permission questions the agent waits on (issue 25 §3): it asks the agent.
    allowSandboxKeys(sendInit);
    // A client joining mid-turn: its relay is nudged to catch it up with the turn (issue 25, relay/fan-out.ts).
    allowNudging(sendInit);
    this.functions.SendInit = sendInit;

    const wsRoutes: WebSocketRoute[] = [];
    for (const route of WS_ROUTES) {
      const fn = createHandlerFunction(this, {
        id: route.id,
        entry: route.entry,
        purpose: `the WebSocket ${route.routeKey} handler`,
        alarmDescription: `${route.id} (${route.routeKey}) threw in the last 5 minutes`,
        environment: flowEnvironment,
        memorySize: 512,
        // API Gateway's WebSocket integration limit: a route never outlives the request it answers.
        timeout: Duration.seconds(29),
        table: this.table,
        tableAccess: "readwrite",
      });
      allowStartingFlows(fn, route.startsFlows, `WebSocket route ${route.routeKey}`);
      // The idle check when the last client leaves ($disconnect).
      if (route.armsSchedules) allowScheduling(fn);
      // Prompts delivered and turns cancelled from a frame ($default) go to the agent.
      if (route.agentAccess) allowSandboxKeys(fn);
      if (route.agentAccess) allowNudging(fn);
      allowPush(fn, webSocket);
      if (route.closesConnections) allowClosingConnections(fn, webSocket);
      if (route.routeKey === "$connect") {
        fn.addEnvironment("SEND_INIT_FUNCTION_NAME", sendInit.functionName);
        // The unqualified ARN only (what an invocation by name resolves to).
        fn.addToRolePolicy(new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [sendInit.functionArn] }));
      }
      wsRoutes.push(this.webSocketApi.addRoute(route.routeKey, { integration: new WebSocketLambdaIntegration(`${route.id}Integration`, fn) }));
      this.functions[route.id] = fn;
    }
    this.webSocketStage = createWebSocketStage(this, webSocket, {
      throttle: stageThrottle,
      accessLogs: props.webSocketAccessLogs ?? false,
      routes: wsRoutes,
    });
    (this.webSocketStage.node.defaultChild as CfnStage).routeSettings = Object.fromEntries(
      Object.entries(WS_ROUTE_THROTTLES).map(([routeKey, throttle]) => [routeKey, routeSettings(throttle, stageThrottle)]),
    );

    // The relay (functions/relay/service.ts) pushes every translated agent message to clients and
    // completes turns, which delivers the next prompt and may wake a paused session
    // (services/prompt-delivery.ts). It arms the idle check when the agent goes (or is found) idle
    // (lifecycleSchedulerFromEnv), so it gets the schedule settings and the same scheduling grant
    // as the functions that arm schedules; it builds no other flow dependencies.
    this.relay = createRelayService(this, { table: this.table, environment, metricsNamespace });
    grantReceivingNudges(relayNudges, this.relay.taskRole, (name, value) => this.relay.container.addEnvironment(name, value));
    for (const [name, value] of Object.entries(scheduleEnvironment)) this.relay.container.addEnvironment(name, value);
    for (const statement of schedulingStatements()) this.relay.taskDefinition.addToTaskRolePolicy(statement);
    acknowledgeScheduleWildcard(this.relay.taskRole);
    this.relay.service.node.addDependency(scheduleGroup);
    const relayPush = pushGrant(webSocket);
    // ensure-runtime: waking a session for its prompts; idle-snapshot (`sandbox_lost`): a stream
    // that failed hands the sandbox liveness check to the flow (functions/relay/stream-loss.ts).
    const relayStartsFlows = ["ensure-runtime", "idle-snapshot"] as const;
    const relayFlows = flowStartGrant(this, relayStartsFlows, "the relay");
    for (const [name, value] of Object.entries({ ...relayPush.environment, ...relayFlows.environment })) this.relay.container.addEnvironment(name, value);
    for (const statement of [relayPush.statement, ...relayFlows.statements]) this.relay.taskDefinition.addToTaskRolePolicy(statement);
    acknowledgeExecutionWildcards(this.relay.taskRole, relayStartsFlows);
    acknowledgePushWildcard(this.relay.taskRole, webSocket);
    // The relay streams from every session's agent and delivers prompts: it derives their passwords.
    this.relay.container.addEnvironment("SANDBOX_ACCESS_KEY_SECRET_ARN", sandboxAccessKey.secretArn);
    sandboxAccessKey.grantRead(this.relay.taskRole);

    // Idle snapshotting's alarms, on the EMF metrics the functions publish (functions/ports/
    // metrics-sink.ts) in the stack's namespace with Powertools' `service` dimension and nothing else.
    const idleMetric = (metricName: string, period: Duration): Metric =>
      new Metric({ namespace: metricsNamespace, metricName, dimensionsMap: { service: FUNCTIONS_SERVICE_NAME }, statistic: Stats.SUM, period });
    const metricAlarm = (id: string, metric: Metric, alarmDescription: string): Alarm =>
      new Alarm(this, id, {
        metric,
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription,
      });
    this.idleAlarms = {
      circuitBreakerTrips: metricAlarm(
        "IdleSnapshotCircuitBreakerAlarm",
        idleMetric(METRIC_NAMES.circuitBreakerTrips, Duration.minutes(5)),
        "Idle snapshot circuit breaker stopped a session (repeated idle snapshot failures) in the last 5 minutes",
      ),
      orphanSessions: metricAlarm(
        "OrphanSessionsAlarm",
        idleMetric(METRIC_NAMES.orphansFound, Duration.minutes(sweeperMinutes)),
        "The orphan sweeper found running sessions nobody watched past their grace: the event-driven idle path lost them",
      ),
    };

    for (const flow of deployableFlows()) {
      const machine = createFlowStateMachine(this, { flow, stepFunctions });
      this.stateMachines[flow] = machine;
      Validations.of(machine.role).acknowledge({
        id: "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
        reason: "Log delivery (logs:CreateLogDelivery, logs:*LogDelivery*, logs:PutResourcePolicy, logs:DescribeResourcePolicies, logs:DescribeLogGroups) and X-Ray (xray:PutTraceSegments, xray:PutTelemetryRecords, xray:GetSampling*) support no resource-level permissions.",
      });
      new CfnOutput(this, `${flowConstructId(flow)}StateMachineArn`, { value: machine.stateMachineArn, description: `ARN of the ${flow} flow` });
    }

    // Slack: every resource in a nested stack of its own (the root is near the 500-resource limit).
    this.slack = new SlackStack(this, "Slack", { root: this, table: this.table, httpApi: this.httpApi, environment, allowProviderSecret, allowSandboxKeys, allowNudging });
    // The OpenAPI document (issue 20): its function and route in a nested stack of their own.
    this.apiDocs = new ApiDocsStack(this, "ApiDocs", { table: this.table, httpApi: this.httpApi, environment });
    // The relay posts Slack sessions' answers and status (functions/relay/service.ts): it reads the bot token.
    this.relay.container.addEnvironment("SLACK_SECRET_ARN", this.slack.secret.secretArn);
    this.slack.secret.grantRead(this.relay.taskRole);
    // The flow steps that broadcast statuses forward them to the Slack queue (functions/slack/status-forward.ts):
    // the worker posts pauses and failures in Slack sessions' threads. Statements in the roles' default policies.
    for (const step of FLOW_STEPS.filter((s) => s.push)) {
      const fn = this.functions[step.id];
      if (!fn) throw new Error(`no function for flow step ${step.id}`);
      fn.addEnvironment("SLACK_QUEUE_URL", this.slack.queue.queueUrl);
      this.slack.queue.grantSendMessages(fn);
    }

    // Automations (issue 18): every resource in a nested stack of its own. The relay ends runs from
    // their prompt's turn (functions/relay/service.ts): the schedule settings and grant to delete a
    // run's timeout and disable a failing automation's schedule (statements in its default policy).
    this.automations = new AutomationsStack(this, "Automations", { root: this, table: this.table, httpApi: this.httpApi, environment, allowSecrets, slackSecret: this.slack.secret });
    for (const [name, value] of Object.entries(this.automations.schedulingEnvironment)) this.relay.container.addEnvironment(name, value);
    for (const statement of this.automations.schedulingStatements()) this.relay.taskDefinition.addToTaskRolePolicy(statement);
    // Its run ends sign the webhook notification: the automation's webhook secret is sealed under the secrets key.
    this.relay.container.addEnvironment("SECRETS_KMS_KEY_ARN", secretsKeyArn);
    this.relay.taskDefinition.addToTaskRolePolicy(secretsStatement("decrypt"));
    Validations.of(this.relay.taskRole).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/${this.stackName}-automations/*]`,
      reason: "Run timeouts are named per run at run time; the grant is limited to this stack's automations schedule group.",
    });
    // RecordFailure ends a run `failed` when its session cannot start (functions/flows/steps/record-failure-handler.ts):
    // the same settings and grant, and the Slack bot token for `notify.slackChannel` (statements in its default policy);
    // it opens the sealed webhook secret (`secretAccess: "decrypt"` in FLOW_STEPS).
    const recordFailure = this.functions.RecordFailureStep;
    if (!recordFailure) throw new Error("no function for flow step RecordFailureStep");
    for (const [name, value] of Object.entries({ ...this.automations.schedulingEnvironment, SLACK_SECRET_ARN: this.slack.secret.secretArn })) recordFailure.addEnvironment(name, value);
    for (const statement of this.automations.schedulingStatements()) recordFailure.addToRolePolicy(statement);
    this.slack.secret.grantRead(recordFailure);
    Validations.of(recordFailure.role ?? recordFailure).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/${this.stackName}-automations/*]`,
      reason: "Run timeouts are named per run at run time; the grant is limited to this stack's automations schedule group.",
    });

    // Every alarm notifies one topic: an operator subscribes to it (or passes `-c alarmEmail=`).
    this.alarmTopic = new Topic(this, "AlarmTopic", { displayName: `${this.stackName} alarms`, enforceSSL: true });
    Validations.of(this.alarmTopic).acknowledge({
      id: "AwsSolutions::AwsSolutions-SNS2",
      reason: "Alarm notifications carry alarm names and states only, no data; CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key, and a customer managed key would cost more than the topic.",
    });
    if (props.alarmEmail) this.alarmTopic.addSubscription(new EmailSubscription(props.alarmEmail));
    // Dashboards and the operations alarms: every resource in a nested stack of its own.
    this.ops = new OpsStack(this, "Ops", {
      root: this,
      metricsNamespace,
      // The root's functions and the nested stacks' (automations, the OpenAPI document); the Slack pair comes below.
      functions: { ...this.functions, AutomationFired: this.automations.fired, AutomationRoutes: this.automations.routes, ApiDocs: this.apiDocs.openApi },
      stateMachines: Object.fromEntries(Object.entries(this.stateMachines).filter((e): e is [string, StateMachine] => e[1] !== undefined)),
      table: this.table,
      httpApi: this.httpApi,
      webSocketApi: this.webSocketApi,
      relay: { service: this.relay.service, cluster: this.relay.cluster, minTasks: RELAY_MIN_TASKS },
      slack: { ack: this.slack.ack, worker: this.slack.worker, queue: this.slack.queue, deadLetterQueue: this.slack.deadLetterQueue, deadLetterAlarm: this.slack.deadLetterAlarm },
      scheduleGroups: [scheduleGroupName, maintenanceGroup.scheduleGroupName, this.automations.scheduleGroupName],
      rootAlarms: [this.idleAlarms.circuitBreakerTrips, this.idleAlarms.orphanSessions],
      alarmTopic: this.alarmTopic,
      ...(props.providerPricesPerSecond ? { providerPricesPerSecond: props.providerPricesPerSecond } : {}),
      ...(props.timeToRunningP95Ms ? { timeToRunningP95Ms: props.timeToRunningP95Ms } : {}),
    });
    // The maintenance schedules name the dead-letter queue the ops stack creates.
    for (const schedule of [this.sweeperSchedule, this.prebuildRebuildSchedule, this.meteringSchedule]) schedule.node.addDependency(this.ops);
    const alarmAction = new SnsAction(this.alarmTopic);
    for (const alarm of this.node.findAll().filter((c): c is Alarm => c instanceof Alarm)) {
      alarm.addAlarmAction(alarmAction);
      alarm.addOkAction(alarmAction);
      // Issue 19: every description says what to check first.
      addRunbookLine(alarm);
    }

    // The relay's scaling (Application Auto Scaling) needs its service-linked role for ECS, which
    // a fresh account may not have; creating it where it exists fails, hence opt-in.
    if (props.createAutoScalingServiceLinkedRole) {
      const role = new CfnServiceLinkedRole(this, "EcsAutoScalingServiceLinkedRole", {
        awsServiceName: "ecs.application-autoscaling.amazonaws.com",
        description: "Application Auto Scaling for the streaming relay's ECS service",
      });
      const target = this.relay.service.node.findAll().find((c) => c.node.id === "Target");
      (target ?? this.relay.service).node.addDependency(role);
    }

    Validations.of(this).acknowledge({
      id: "AwsSolutions::AwsSolutions-L1",
      reason: "Lambda runtime is pinned to nodejs22.x (the platform's supported Node line, matching middy 7 and the SDK's engine range); upgrades are deliberate, not automatic.",
    });
    Validations.of(this.httpApi).acknowledge({
      id: "AwsSolutions::AwsSolutions-APIG4",
      reason: "Every route except GET /v1/health authenticates the bearer API token in the handler (SHA-256 lookup in the table); /v1/health is public by contract (API.md).",
    });
    Validations.of(this.webSocketApi).acknowledge({
      id: "AwsSolutions::AwsSolutions-APIG4",
      reason: "The $connect handler authenticates the token query parameter (SHA-256 lookup in the table) and registers nothing for a refused caller; API Gateway allows an authorizer on $connect only, and $disconnect and $default act only on connections $connect registered.",
    });
    Validations.of(this.httpApi).acknowledge({
      id: "AwsSolutions::AwsSolutions-APIG1",
      reason: "Access logging is configured on the explicit $default HttpStage (HttpApiAccessLogs), which this rule does not see on the API resource.",
    });

    this.console = new ConsoleStack(this, "Console", { httpApi: this.httpApi, webSocketStage: this.webSocketStage });
    new CfnOutput(this, "ConsoleUrl", { value: `https://${this.console.distribution.distributionDomainName}`, description: "The web console (sign in with an API token)" });

    new CfnOutput(this, "HttpApiUrl", { value: stage.url, description: "Base URL of the HTTP API (append v1/...)" });
    new CfnOutput(this, "TableName", { value: this.table.tableName });
    new CfnOutput(this, "WebSocketUrl", { value: this.webSocketStage.url, description: "WebSocket URL clients connect to (?sessionId=...&token=...)" });
    new CfnOutput(this, "RelayClusterName", { value: this.relay.cluster.clusterName, description: "ECS cluster of the streaming relay" });
    new CfnOutput(this, "RelayServiceName", { value: this.relay.service.serviceName, description: "ECS service of the streaming relay" });
  }
}
