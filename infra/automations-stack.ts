/**
 * Automations (API.md "Automations"; issue 18) in a CloudFormation nested stack of its own (the
 * root stack is near CloudFormation's 500-resource limit):
 *
 * - the schedule group `<stack>-automations`: one recurring schedule per automation and one
 *   one-time timeout schedule per run (functions/adapters/aws/eventbridge-automation-scheduler.ts);
 * - the scheduler role: assumed by EventBridge Scheduler (this account's automations group only) to invoke the
 *   `automation-fired` function and nothing else;
 * - `automation-fired` (fixed name, so the functions that create schedules know its ARN before it
 *   exists): records a firing once, applies the skip rule, creates and starts the run's session
 *   through the ordinary session routes, times runs out;
 * - the `/v1/automations` routes: one route-group function (functions/automations/routes-entry.ts);
 * - both functions: the table, starting the ensure-runtime and stop flows, the schedule actions on
 *   this group's schedules only, `iam:PassRole` of the scheduler role to Scheduler only, the
 *   secrets KMS key (the webhook secrets are envelope-encrypted: the routes seal, both open), and
 *   the Slack secret (the bot token: a run that ends here, timed out or unable to start, posts to
 *   `notify.slackChannel`). Nothing else: the session routes they call in process (CreateSession,
 *   ResumeSession, StopSession) write the table and start flows; they reach no sandbox, agent
 *   or relay, so no provider credentials, sandbox access key or relay nudge queue (the flows do that).
 */
import { ArnFormat, Duration, Names, NestedStack, RemovalPolicy, Stack, Validations, type NestedStackProps } from "aws-cdk-lib";
import { HttpMethod, HttpRoute, HttpRouteKey, type HttpApi } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { CfnTable, Table } from "aws-cdk-lib/aws-dynamodb";
import { PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import type { ISecret } from "aws-cdk-lib/aws-secretsmanager";
import { ScheduleGroup } from "aws-cdk-lib/aws-scheduler";
import type { Construct, IConstruct } from "constructs";
import { AUTOMATION_ROUTES } from "../functions/automations/automation-routes";
import type { FlowName } from "../functions/ports/flow-runner";
import { createHandlerFunction } from "./handler-function";
import { flowStartGrant, stateMachineName } from "./lifecycle-flows";

/** Run-now, the webhook trigger and firings resume the run's session; a timeout stops it. */
export const AUTOMATION_FLOWS: readonly FlowName[] = ["ensure-runtime", "stop"];

export interface AutomationsStackProps extends NestedStackProps {
  root: Stack;
  table: Table;
  httpApi: HttpApi;
  /** The functions' base environment (TABLE_NAME, Powertools, WS_URL, ...). */
  environment: Record<string, string>;
  /** The Slack app's secret (SLACK_SECRET_ARN): the bot token posts run notifications to `notify.slackChannel`. */
  slackSecret: ISecret;
  /** The secrets KMS key: the webhook secrets are sealed (create) and opened (webhook trigger, notifications) under it. */
  allowSecrets: (fn: NodejsFunction, access: "encrypt" | "decrypt") => void;
}

export class AutomationsStack extends NestedStack {
  readonly scheduleGroup: ScheduleGroup;
  /** The group's name as a plain string (the ops dashboards name it without a cross-stack reference). */
  readonly scheduleGroupName: string;
  readonly schedulerRole: Role;
  readonly fired: NodejsFunction;
  readonly routes: NodejsFunction;
  /** What a function that creates automation schedules needs (the relay gets it too: a run that ends there deletes its timeout). */
  readonly schedulingEnvironment: Record<string, string>;

  constructor(scope: Construct, id: string, props: AutomationsStackProps) {
    super(scope, id, { ...props, description: "Automations: schedule group, automation-fired, /v1/automations routes (issue 18)" });
    const { root, table } = props;
    const groupName = `${root.stackName}-automations`;
    this.scheduleGroupName = groupName;
    this.scheduleGroup = new ScheduleGroup(this, "AutomationSchedules", { scheduleGroupName: groupName, removalPolicy: RemovalPolicy.DESTROY });
    this.schedulerRole = new Role(this, "AutomationSchedulerRole", {
      // Only for this stack's automations group (the confused-deputy guard Scheduler documents: its schedule-group ARN as aws:SourceArn).
      assumedBy: new ServicePrincipal("scheduler.amazonaws.com", {
        conditions: { StringEquals: { "aws:SourceAccount": root.account, "aws:SourceArn": root.formatArn({ service: "scheduler", resource: "schedule-group", resourceName: groupName }) } },
      }),
      description: "Assumed by EventBridge Scheduler to invoke the automation-fired function",
    });
    const firedName = `${root.stackName}-automation-fired`;
    const firedArn = root.formatArn({ service: "lambda", resource: "function", resourceName: firedName, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
    this.schedulingEnvironment = { AUTOMATIONS_SCHEDULE_GROUP: groupName, AUTOMATION_FIRED_ARN: firedArn, AUTOMATIONS_SCHEDULER_ROLE_ARN: this.schedulerRole.roleArn };

    const base = { ...props.environment, ...this.schedulingEnvironment, NODE_OPTIONS: "--enable-source-maps" };
    this.fired = createHandlerFunction(this, {
      id: "AutomationFired",
      entry: "functions/automations/automation-fired-entry.ts",
      purpose: "automation-fired (automation schedules and run timeouts)",
      alarmDescription: "automation-fired failed (Scheduler retries the firing; the run's conditional put keeps it one run)",
      environment: base,
      memorySize: 512,
      timeout: Duration.seconds(60),
      table,
      tableAccess: "readwrite",
      functionName: firedName,
    });
    this.schedulerRole.addToPrincipalPolicy(new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [firedArn] }));

    this.routes = createHandlerFunction(this, {
      id: "Automations",
      entry: "functions/automations/routes-entry.ts",
      purpose: "the /v1/automations routes",
      alarmDescription: "Automations handler threw (5xx) in the last 5 minutes",
      environment: base,
      memorySize: 512,
      timeout: Duration.seconds(30),
      table,
      tableAccess: "readwrite",
    });

    const grant = flowStartGrant(root, AUTOMATION_FLOWS, "Automations");
    const tableArnParameter = `referenceto${Names.uniqueId(table.node.defaultChild as CfnTable)}Arn`;
    for (const fn of [this.fired, this.routes]) {
      fn.node.addDependency(this.scheduleGroup);
      for (const [name, value] of Object.entries(grant.environment)) fn.addEnvironment(name, value);
      for (const statement of [...grant.statements, ...this.schedulingStatements()]) fn.addToRolePolicy(statement);
      props.allowSecrets(fn, "decrypt");
      fn.addEnvironment("SLACK_SECRET_ARN", props.slackSecret.secretArn);
      props.slackSecret.grantRead(fn);
      this.acknowledge(fn.role ?? fn, root, groupName, tableArnParameter);
    }

    props.allowSecrets(this.routes, "encrypt");
    const integration = new HttpLambdaIntegration("AutomationsIntegration", this.routes);
    for (const route of AUTOMATION_ROUTES) {
      const r = new HttpRoute(this, `${route.id}Route`, { httpApi: props.httpApi, routeKey: HttpRouteKey.with(route.path, HttpMethod[route.method]), integration });
      Validations.of(r).acknowledge({
        id: "AwsSolutions::AwsSolutions-APIG4",
        reason:
          route.id === "AutomationWebhook"
            ? "The webhook trigger verifies the automation's HMAC-SHA256 signature over the raw body (X-Signature) and stores nothing for a refused request."
            : "The handler authenticates the bearer API token (SHA-256 lookup in the table), like every /v1 route of the API.",
      });
    }
  }

  /** The schedule actions on this group's schedules, and passing the scheduler role to Scheduler only. */
  schedulingStatements(): PolicyStatement[] {
    const stack = Stack.of(this.scheduleGroup);
    return [
      new PolicyStatement({
        actions: ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule"],
        resources: [stack.formatArn({ service: "scheduler", resource: "schedule", resourceName: `${this.schedulingEnvironment.AUTOMATIONS_SCHEDULE_GROUP}/*` })],
      }),
      new PolicyStatement({
        actions: ["iam:PassRole"],
        resources: [this.schedulerRole.roleArn],
        conditions: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } },
      }),
    ];
  }

  private acknowledge(role: IConstruct, root: Stack, groupName: string, tableArnParameter: string): void {
    Validations.of(role).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/${groupName}/*]`,
      reason: "Schedules are named per automation and run at run time; the grant is limited to this stack's automations schedule group.",
    });
    Validations.of(role).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${tableArnParameter}>/index/*]`,
      reason: "The table's own GSI ARNs (<table>/index/*), needed for the org and status listings; no other table is reachable.",
    });
    for (const flow of AUTOMATION_FLOWS) {
      Validations.of(role).acknowledge({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:${stateMachineName(root, flow)}:*]`,
        reason: "Executions are named per session and fence at run time; DescribeExecution is limited to the executions of this one state machine.",
      });
    }
  }
}
