/**
 * Every Lambda function of the stack (HTTP routes, flow steps, the schedule target) is deployed
 * the same way: its own role writing only to its own log group (no managed policies), nodejs22.x
 * on arm64, one esbuild ESM bundle built without Docker (the AWS SDK v3 comes from the runtime),
 * active tracing, the table grant it declares, and an Errors alarm. Construct ids are
 * `<id>Logs|Role|Function|Errors` directly in the given scope, so every logical id starts with
 * the route or step id.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import type { CfnTable, Table } from "aws-cdk-lib/aws-dynamodb";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, Runtime, Tracing } from "aws-cdk-lib/aws-lambda";
import { NodejsFunction, OutputFormat, type BundlingOptions } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import type { Construct } from "constructs";
import type { TableAccess } from "../functions/http/routes";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * How every function is bundled (esbuild, no Docker). test/bench/esbuild-options.ts builds with
 * the same options, so the bench and the bundle tests measure what deploys.
 */
export const LAMBDA_BUNDLING: BundlingOptions = {
  format: OutputFormat.ESM,
  target: "node22",
  minify: true,
  // Minified class names would be `c`: error names are what Step Functions matches (Retry,
  // Catch), what logs and errorForLog print, and AppError's `name` is its class name.
  keepNames: true,
  sourceMap: true,
  // Stack traces keep file:line; the original sources need not ship in every zip.
  sourcesContent: false,
  // ESM bundles need `require` for the CommonJS dependencies esbuild inlines.
  banner: "import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);",
  externalModules: ["@aws-sdk/*"],
  forceDockerBundling: false,
};

export interface HandlerFunctionProps {
  /** Construct id stem (route or step id). */
  id: string;
  /** Handler module relative to the repository root; it exports `handler`. */
  entry: string;
  /** Who calls it, for the role description ("the Health HTTP handler"). */
  purpose: string;
  /** What the Errors alarm means for this function. */
  alarmDescription: string;
  environment: Record<string, string>;
  memorySize: number;
  timeout: Duration;
  table: Table;
  tableAccess: TableAccess;
  /** Only where another resource must know the ARN before the function exists. */
  functionName?: string;
  /** Reserved concurrency (infra/api-throttles.ts); unset: the account's unreserved pool. */
  reservedConcurrency?: number;
}

export function createHandlerFunction(scope: Construct, props: HandlerFunctionProps): NodejsFunction {
  const { id, table } = props;
  const logGroup = new LogGroup(scope, `${id}Logs`, { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
  // One role per function, writing only to its own log group: no managed policies.
  const role = new Role(scope, `${id}Role`, {
    assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
    description: `Execution role of ${props.purpose}`,
  });
  logGroup.grantWrite(role);
  const fn = new NodejsFunction(scope, `${id}Function`, {
    entry: path.join(REPO_ROOT, props.entry),
    handler: "handler",
    ...(props.functionName ? { functionName: props.functionName } : {}),
    runtime: Runtime.NODEJS_22_X,
    architecture: Architecture.ARM_64,
    memorySize: props.memorySize,
    timeout: props.timeout,
    ...(props.reservedConcurrency === undefined ? {} : { reservedConcurrentExecutions: props.reservedConcurrency }),
    role,
    logGroup,
    tracing: Tracing.ACTIVE,
    // A copy: later bindings (flow ARNs, secrets) are per function.
    environment: { ...props.environment },
    depsLockFilePath: path.join(REPO_ROOT, "package-lock.json"),
    projectRoot: REPO_ROOT,
    bundling: LAMBDA_BUNDLING,
  });
  if (props.tableAccess === "read") table.grantReadData(fn);
  if (props.tableAccess === "readwrite") table.grantReadWriteData(fn);
  new Alarm(scope, `${id}Errors`, {
    metric: fn.metricErrors({ period: Duration.minutes(5) }),
    threshold: 1,
    evaluationPeriods: 1,
    comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: props.alarmDescription,
  });

  // The wildcards in the function's policy, each acknowledged by its exact finding.
  if (props.tableAccess !== "none") {
    const tableLogicalId = Stack.of(scope).getLogicalId(table.node.defaultChild as CfnTable);
    Validations.of(role).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${tableLogicalId}.Arn>/index/*]`,
      reason: "The table's own GSI ARNs (<table>/index/*), needed for the org and status listings; no other table is reachable.",
    });
  }
  Validations.of(role).acknowledge({
    id: "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
    reason: "xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing) support no resource-level permissions.",
  });
  return fn;
}
