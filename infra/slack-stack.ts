/**
 * Slack (API.md "Slack"; issue 17) in a CloudFormation nested stack of its own, because the root
 * stack is close to CloudFormation's 500-resource limit: the root creates it and hands it the
 * table, the HTTP API, the functions' base environment and its grant helpers.
 *
 * - the ack function (`POST /slack/commands`, `/slack/events`, `/slack/interactions`): reads the
 *   Slack secret, writes only `SLACKDELIVERY#` items (PutItem/DeleteItem on that key prefix) and
 *   sends to the queue; nothing else;
 * - the delivery queue (SSE, TLS only) with a dead-letter queue (after 5 receives) and an alarm on
 *   anything in it; the worker reads it (SQS event source, partial batch failures);
 * - the worker: the table, starting the ensure-runtime, pause and stop flows, the sandbox keys and
 *   provider credentials the prompt path needs (it delivers prompts to running agents), the secret;
 * - the workspace routes (`PUT|GET|DELETE /v1/slack/workspace`): one function, the table;
 * - one Secrets Manager secret, `{"SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN"}`, created with a
 *   placeholder for the operator to fill in (never in the template), like the provider secret.
 */
import { Duration, Names, NestedStack, RemovalPolicy, Stack, Validations, type NestedStackProps } from "aws-cdk-lib";
import type { CfnTable } from "aws-cdk-lib/aws-dynamodb";
import { HttpMethod, HttpRoute, HttpRouteKey, type HttpApi } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import type { Table } from "aws-cdk-lib/aws-dynamodb";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { Secret, type ISecret } from "aws-cdk-lib/aws-secretsmanager";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import type { FlowName } from "../functions/ports/flow-runner";
import { SLACK_ACK_ROUTES, SLACK_WORKSPACE_ROUTES } from "../functions/slack/routes";
import { createHandlerFunction } from "./handler-function";
import { flowStartGrant, stateMachineName } from "./lifecycle-flows";

/** The flows the worker starts through the ordinary routes (resume and prompt wake, pause, stop). */
export const SLACK_WORKER_FLOWS: readonly FlowName[] = ["ensure-runtime", "pause", "stop"];
export const SLACK_WORKER_TIMEOUT_SECONDS = 60;
export const SLACK_ACK_TIMEOUT_SECONDS = 5;
/** Receives before a delivery goes to the dead-letter queue. */
export const SLACK_MAX_RECEIVES = 5;

export interface SlackStackProps extends NestedStackProps {
  /** The root stack: flow state machines are named after it. */
  root: Stack;
  table: Table;
  httpApi: HttpApi;
  /** The functions' base environment (TABLE_NAME, Powertools, WS_URL, ...). */
  environment: Record<string, string>;
  allowProviderSecret: (fn: NodejsFunction) => void;
  allowSandboxKeys: (fn: NodejsFunction) => void;
  /** The relay nudge queue (issue 15): the worker's prompts to running sessions nudge the relays, as CreatePrompt does. */
  allowNudging: (fn: NodejsFunction) => void;
  /** Complete ARN of an existing Slack secret; default: the stack creates `<stack>/slack`. */
  slackSecretArn?: string;
}

export class SlackStack extends NestedStack {
  readonly ack: NodejsFunction;
  readonly worker: NodejsFunction;
  readonly workspace: NodejsFunction;
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  readonly secret: ISecret;
  readonly deadLetterAlarm: Alarm;

  constructor(scope: Construct, id: string, props: SlackStackProps) {
    super(scope, id, { ...props, description: "Slack: ack function, delivery queue, worker, workspace routes (issue 17)" });
    const { root, table } = props;

    this.secret = props.slackSecretArn
      ? Secret.fromSecretCompleteArn(this, "SlackSecret", props.slackSecretArn)
      : new Secret(this, "SlackSecret", {
          secretName: `${root.stackName}/slack`,
          removalPolicy: RemovalPolicy.RETAIN,
          description: "The Slack app's signing secret and bot token as a JSON object (SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN)",
          generateSecretString: { secretStringTemplate: "{}", generateStringKey: "placeholder" },
        });
    if (this.secret instanceof Secret) {
      Validations.of(this.secret).acknowledge({
        id: "AwsSolutions::AwsSolutions-SMG4",
        reason: "The signing secret and bot token are issued by Slack (app settings) and rotated there; no rotation Lambda could mint them.",
      });
    }

    this.deadLetterQueue = new Queue(this, "SlackDeadLetters", { retentionPeriod: Duration.days(14), encryption: QueueEncryption.SQS_MANAGED, enforceSSL: true });
    Validations.of(this.deadLetterQueue).acknowledge({ id: "AwsSolutions::AwsSolutions-SQS3", reason: "This is the dead-letter queue of the Slack delivery queue; an alarm fires on anything in it." });
    this.queue = new Queue(this, "SlackDeliveries", {
      // Six times the worker's timeout (AWS's guidance for Lambda event sources).
      visibilityTimeout: Duration.seconds(6 * SLACK_WORKER_TIMEOUT_SECONDS),
      retentionPeriod: Duration.days(1),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: SLACK_MAX_RECEIVES },
    });
    this.deadLetterAlarm = new Alarm(this, "SlackDeadLettersVisible", {
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5) }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: "Slack deliveries failed every retry and sit in the dead-letter queue (the worker log says why)",
    });

    const base = { NODE_OPTIONS: "--enable-source-maps", SLACK_SECRET_ARN: this.secret.secretArn };
    this.ack = createHandlerFunction(this, {
      id: "SlackAck",
      entry: "functions/slack/ack-entry.ts",
      purpose: "the Slack ack function (/slack/commands, /slack/events, /slack/interactions)",
      alarmDescription: "The Slack ack function failed (Slack retries; check the queue and the secret)",
      environment: { ...base, TABLE_NAME: table.tableName, SLACK_QUEUE_URL: this.queue.queueUrl },
      memorySize: 256,
      timeout: Duration.seconds(SLACK_ACK_TIMEOUT_SECONDS),
      table,
      tableAccess: "none",
    });
    // Only the delivery records: a conditional put, and a delete when the enqueue failed.
    this.ack.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:PutItem", "dynamodb:DeleteItem"],
        resources: [table.tableArn],
        conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["SLACKDELIVERY#*"] } },
      }),
    );
    this.queue.grantSendMessages(this.ack);
    this.secret.grantRead(this.ack);

    this.worker = createHandlerFunction(this, {
      id: "SlackWorker",
      entry: "functions/slack/worker-entry.ts",
      purpose: "the Slack worker (sessions, prompts and buttons from Slack deliveries)",
      alarmDescription: "The Slack worker failed (the delivery is retried, then dead-lettered)",
      environment: { ...props.environment, ...base },
      memorySize: 512,
      timeout: Duration.seconds(SLACK_WORKER_TIMEOUT_SECONDS),
      table,
      tableAccess: "readwrite",
    });
    // The root's state machines, by the root's name (flowStartGrant names them after the stack given).
    const grant = flowStartGrant(root, SLACK_WORKER_FLOWS, "SlackWorker");
    for (const [name, value] of Object.entries(grant.environment)) this.worker.addEnvironment(name, value);
    for (const statement of grant.statements) this.worker.addToRolePolicy(statement);
    for (const flow of SLACK_WORKER_FLOWS) {
      Validations.of(this.worker.role ?? this.worker).acknowledge({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:${stateMachineName(root, flow)}:*]`,
        reason: "Executions are named per session and fence at run time; DescribeExecution is limited to the executions of this one state machine.",
      });
    }
    props.allowProviderSecret(this.worker);
    props.allowSandboxKeys(this.worker);
    props.allowNudging(this.worker);
    this.secret.grantRead(this.worker);
    this.worker.addEventSource(new SqsEventSource(this.queue, { batchSize: 5, reportBatchItemFailures: true }));

    this.workspace = createHandlerFunction(this, {
      id: "SlackWorkspace",
      entry: "functions/slack/workspace-entry.ts",
      purpose: "the Slack workspace routes (PUT, GET, DELETE /v1/slack/workspace)",
      alarmDescription: "SlackWorkspace handler threw (5xx) in the last 5 minutes",
      environment: { ...props.environment, NODE_OPTIONS: "--enable-source-maps" },
      memorySize: 512,
      timeout: Duration.seconds(10),
      table,
      tableAccess: "readwrite",
    });

    // The table's ARN reaches this stack as a parameter: createHandlerFunction's acknowledgement names the root's logical id.
    const tableArnParameter = `referenceto${Names.uniqueId(table.node.defaultChild as CfnTable)}Arn`;
    for (const fn of [this.worker, this.workspace]) {
      Validations.of(fn.role ?? fn).acknowledge({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${tableArnParameter}>/index/*]`,
        reason: "The table's own GSI ARNs (<table>/index/*), needed for the org and status listings; no other table is reachable.",
      });
    }

    const ackIntegration = new HttpLambdaIntegration("SlackAckIntegration", this.ack);
    for (const route of SLACK_ACK_ROUTES) {
      const r = new HttpRoute(this, `${route.id}Route`, { httpApi: props.httpApi, routeKey: HttpRouteKey.with(route.path, HttpMethod[route.method]), integration: ackIntegration });
      Validations.of(r).acknowledge({ id: "AwsSolutions::AwsSolutions-APIG4", reason: "Slack calls these routes: the ack function verifies Slack's v0 request signature (HMAC over the raw body, 300 s window) and stores nothing for a refused request." });
    }
    const workspaceIntegration = new HttpLambdaIntegration("SlackWorkspaceIntegration", this.workspace);
    for (const route of SLACK_WORKSPACE_ROUTES) {
      const r = new HttpRoute(this, `${route.id}Route`, { httpApi: props.httpApi, routeKey: HttpRouteKey.with(route.path, HttpMethod[route.method]), integration: workspaceIntegration });
      Validations.of(r).acknowledge({ id: "AwsSolutions::AwsSolutions-APIG4", reason: "The handler authenticates the bearer API token (SHA-256 lookup in the table), like every /v1 route of the API." });
    }
  }
}
