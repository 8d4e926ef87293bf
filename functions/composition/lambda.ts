/**
 * The Lambda runtime: the container's dependencies composed once (cold start) from the shared
 * AWS adapters (./aws.ts) plus what only the Lambdas use (the sandbox providers, the KMS key
 * wrapper of the org secrets, the asynchronous send-init invocation), and the Powertools
 * middlewares every Lambda entry wears: `injectLambdaContext` (each log line carries the Lambda
 * context, keys reset after each invocation) and `logMetrics` (the invocation's metrics flushed),
 * with one request metric per invocation whose route and outcome are dimensions. The Lambda SDK
 * (send-init's invocation) is loaded on first use, as every SDK but DynamoDB's
 * (functions/adapters/aws/sdk-client.ts).
 */
import middy from "@middy/core";
import type { Context } from "aws-lambda";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import type { LambdaClient } from "@aws-sdk/client-lambda";
import { onFirstUse } from "../adapters/aws/sdk-client";
import { loadConfig, processEnvironment, type Config } from "../config/config";
import { InternalError } from "../domain/errors";
import type { ProviderType } from "../domain/session";
import { MetricUnit, REQUEST_METRICS } from "../observability/metrics";
import type { SandboxProvider } from "../ports/sandbox-provider";
import { kmsKeyWrapperFromEnv } from "../secrets/kms-key-wrapper";
import { composeAwsRuntime } from "./aws";
import type { Runtime } from "./compose";

/**
 * How an entry gets its sandbox providers. Only the entries whose code calls a provider bind
 * `awsProviders` (functions/providers/aws-providers.ts) and so bundle the provider SDKs.
 */
export type ProviderBinding = (config: Config, env: Readonly<Record<string, string | undefined>>) => (type: ProviderType) => Promise<SandboxProvider>;

/**
 * The default for every entry that does not bind providers: no provider SDK (Modal, E2B, gRPC,
 * protobuf) in its bundle. An entry whose code calls a provider binds `awsProviders`; one that
 * does not and still asks fails here, naming the provider.
 */
export const noProviders: ProviderBinding = () => (type) =>
  Promise.reject(new InternalError(`this function has no sandbox providers bound (asked for ${type}): its entry must pass awsProviders`));

/** The Lambda container's runtime for a configuration and environment. */
export function composeLambdaRuntime(config: Config, env: Readonly<Record<string, string | undefined>>, providers: ProviderBinding = noProviders): Runtime {
  const sdk = () => import("@aws-sdk/client-lambda");
  const lambda = onFirstUse<LambdaClient>(async () => new (await sdk()).LambdaClient({}));
  return composeAwsRuntime(config, env, {
    provider: providers(config, env),
    // KMS only on first wrap/unwrap: functions that read metadata never need SECRETS_KMS_KEY_ARN.
    secretKeys: kmsKeyWrapperFromEnv(env),
    afterConnect: async (request) => {
      if (!config.SEND_INIT_FUNCTION_NAME) throw new Error("invalid configuration: SEND_INIT_FUNCTION_NAME is not set");
      const [client, { InvokeCommand }] = await Promise.all([lambda(), sdk()]);
      // Asynchronous: the connection opens only once $connect has returned.
      await client.send(new InvokeCommand({ FunctionName: config.SEND_INIT_FUNCTION_NAME, InvocationType: "Event", Payload: Buffer.from(JSON.stringify(request)) }));
    },
  });
}

let runtime: Runtime | undefined;

/**
 * This container's runtime: built on first use (cold start), then shared by every invocation.
 * `providers`: `awsProviders` for an entry that calls a sandbox provider (a container runs one entry).
 */
export function awsRuntime(providers: ProviderBinding = noProviders): Runtime {
  runtime ??= composeLambdaRuntime(loadConfig(), processEnvironment(), providers);
  return runtime;
}

/** The one datum an entry records per invocation: a metric name and its dimensions. */
export interface InvocationMetric<E, R> {
  name: string;
  dimensions(event: E, result: R, context: Context): Record<string, string>;
  onError(event: E, context: Context): Record<string, string>;
}

/**
 * Wraps a Lambda handler in the Powertools middlewares: the logger gets the Lambda context
 * (`function_request_id`, `function_name`, cold start...) and its keys are reset after each
 * invocation; one `metric` datum per invocation with `dimensions(result)` (or `onError(error)`),
 * flushed by `logMetrics` with the rest of the invocation's metrics.
 */
export function withPowertools<E, R>(
  rt: Pick<Runtime, "logger" | "metrics">,
  handler: (event: E, context: Context) => Promise<R>,
  metric: InvocationMetric<E, R>,
): (event: E, context: Context) => Promise<R> {
  const record = (dimensions: Record<string, string>) => {
    rt.metrics.addDimensions(dimensions);
    rt.metrics.addMetric(metric.name, MetricUnit.Count, 1);
  };
  return middy<E, R>()
    .use(injectLambdaContext(rt.logger, { resetKeys: true }))
    .use(logMetrics(rt.metrics))
    .use({
      after: (request) => record(metric.dimensions(request.event, request.response as R, request.context)),
      onError: (request) => record(metric.onError(request.event, request.context)),
    })
    .handler(handler) as unknown as (event: E, context: Context) => Promise<R>;
}

/** Flow steps, schedule targets, the sweeper, send-init: `StepInvocations` by `Function` (the Lambda's name) and `Outcome`. */
export function stepMetric<E, R>(): InvocationMetric<E, R> {
  return {
    name: REQUEST_METRICS.step,
    dimensions: (_event, _result, context) => ({ Function: context.functionName, Outcome: "ok" }),
    onError: (_event, context) => ({ Function: context.functionName, Outcome: "error" }),
  };
}
