/**
 * The control plane as one env-agnostic stack. This slice: the single table and the
 * HTTP API with one Lambda function per route (from the shared route table), each with its own
 * role, log group and least-privilege table grant. Flows, schedules, the WebSocket API and the
 * relay attach here in later issues.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CfnOutput, Duration, RemovalPolicy, Stack, Validations, type StackProps } from "aws-cdk-lib";
import { HttpApi, HttpMethod, HttpStage, LogGroupLogDestination } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { AttributeType, BillingMode, CfnTable, Table, TableEncryption } from "aws-cdk-lib/aws-dynamodb";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, Runtime, Tracing } from "aws-cdk-lib/aws-lambda";
import { NodejsFunction, OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import type { Construct } from "constructs";
import { HTTP_ROUTES } from "../functions/http/routes";
import { TABLE_DEFINITION } from "../functions/store/table-layout";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface ControlPlaneStackProps extends StackProps {
  /** Protect the table from deletion (and retain it when the stack is deleted). Default true. */
  deletionProtection?: boolean;
  /** Sandbox provider sessions use by default in AWS (the local provider cannot run in Lambda). */
  defaultSandboxProvider?: "modal" | "e2b";
  /** API-wide throttling (requests per second, burst). */
  throttle?: { rateLimit: number; burstLimit: number };
}

export class ControlPlaneStack extends Stack {
  readonly table: Table;
  readonly httpApi: HttpApi;
  readonly functions: Record<string, NodejsFunction> = {};

  constructor(scope: Construct, id: string, props: ControlPlaneStackProps = {}) {
    super(scope, id, props);
    const deletionProtection = props.deletionProtection ?? true;
    const defaultProvider = props.defaultSandboxProvider ?? "modal";

    this.table = new Table(this, "SessionTable", {
      partitionKey: { name: TABLE_DEFINITION.partitionKey, type: AttributeType.STRING },
      sortKey: { name: TABLE_DEFINITION.sortKey, type: AttributeType.STRING },
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
        sortKey: { name: gsi.sortKey, type: AttributeType.STRING },
      });
    }

    const tableLogicalId = this.getLogicalId(this.table.node.defaultChild as CfnTable);

    this.httpApi = new HttpApi(this, "HttpApi", {
      description: "Sandbox control plane HTTP API (v1)",
      createDefaultStage: false,
    });
    const accessLogs = new LogGroup(this, "HttpApiAccessLogs", { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
    const stage = new HttpStage(this, "DefaultStage", {
      httpApi: this.httpApi,
      stageName: "$default",
      autoDeploy: true,
      throttle: props.throttle ?? { rateLimit: 100, burstLimit: 200 },
      accessLogSettings: { destination: new LogGroupLogDestination(accessLogs) },
    });

    const environment: Record<string, string> = {
      TABLE_NAME: this.table.tableName,
      DEFAULT_SANDBOX_PROVIDER: defaultProvider,
      SANDBOX_PROVIDERS: "modal,e2b",
      WS_URL: "",
      POWERTOOLS_SERVICE_NAME: "sandbox-control-plane",
      POWERTOOLS_METRICS_NAMESPACE: "SandboxControlPlane",
      POWERTOOLS_LOG_LEVEL: "INFO",
      NODE_OPTIONS: "--enable-source-maps",
    };

    for (const route of HTTP_ROUTES) {
      const logGroup = new LogGroup(this, `${route.id}Logs`, { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
      // One role per function, writing only to its own log group: no managed policies.
      const role = new Role(this, `${route.id}Role`, {
        assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
        description: `Execution role of the ${route.id} HTTP handler`,
      });
      logGroup.grantWrite(role);
      const fn = new NodejsFunction(this, `${route.id}Function`, {
        entry: path.join(REPO_ROOT, route.entry),
        handler: "handler",
        runtime: Runtime.NODEJS_22_X,
        architecture: Architecture.ARM_64,
        memorySize: 512,
        timeout: Duration.seconds(10),
        role,
        logGroup,
        tracing: Tracing.ACTIVE,
        environment,
        depsLockFilePath: path.join(REPO_ROOT, "package-lock.json"),
        projectRoot: REPO_ROOT,
        bundling: {
          format: OutputFormat.ESM,
          target: "node22",
          minify: true,
          sourceMap: true,
          // Stack traces keep file:line; the original sources need not ship in every zip.
          sourcesContent: false,
          // ESM bundles need `require` for the CommonJS dependencies esbuild inlines.
          banner: "import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);",
          externalModules: ["@aws-sdk/*"],
          forceDockerBundling: false,
        },
      });
      if (route.tableAccess === "read") this.table.grantReadData(fn);
      if (route.tableAccess === "readwrite") this.table.grantReadWriteData(fn);
      this.httpApi.addRoutes({
        path: route.path,
        methods: [HttpMethod[route.method]],
        integration: new HttpLambdaIntegration(`${route.id}Integration`, fn),
      });
      new Alarm(this, `${route.id}Errors`, {
        metric: fn.metricErrors({ period: Duration.minutes(5) }),
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: `${route.id} handler threw (5xx) in the last 5 minutes`,
      });
      this.functions[route.id] = fn;

      // The only two wildcards in the function's policy, each acknowledged by its exact finding.
      Validations.of(role).acknowledge({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${tableLogicalId}.Arn>/index/*]`,
        reason: "The table's own GSI ARNs (<table>/index/*), needed for the org and status listings; no other table is reachable.",
      });
      Validations.of(role).acknowledge({
        id: "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
        reason: "xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing) support no resource-level permissions.",
      });
    }

    Validations.of(this).acknowledge({
      id: "AwsSolutions::AwsSolutions-L1",
      reason: "Lambda runtime is pinned to nodejs22.x (the platform's supported Node line, matching middy 7 and the SDK's engine range); upgrades are deliberate, not automatic.",
    });
    Validations.of(this.httpApi).acknowledge({
      id: "AwsSolutions::AwsSolutions-APIG4",
      reason: "Every route except GET /v1/health authenticates the bearer API token in the handler (SHA-256 lookup in the table); /v1/health is public by contract (API.md).",
    });
    Validations.of(this.httpApi).acknowledge({
      id: "AwsSolutions::AwsSolutions-APIG1",
      reason: "Access logging is configured on the explicit $default HttpStage (HttpApiAccessLogs), which this rule does not see on the API resource.",
    });

    new CfnOutput(this, "HttpApiUrl", { value: stage.url, description: "Base URL of the HTTP API (append v1/...)" });
    new CfnOutput(this, "TableName", { value: this.table.tableName });
  }
}
