/**
 * CDK app entry (cdk.json: `npx tsx infra/app.ts`). Env-agnostic: account and region come from
 * the CLI's environment at deploy time. Context: `deletionProtection` (default true),
 * `defaultSandboxProvider` (modal | e2b), `providerSecretArn` (complete ARN of an existing provider
 * credentials secret; default: the stack creates one), `webSocketAccessLogs` (default false: needs the
 * account's API Gateway CloudWatch Logs role), `sweeperIntervalSeconds` (orphan sweeper period,
 * default 600), `gitPullOnRestore` + `gitPullCadenceSeconds` (seed 003 freshness pull on restore,
 * default off), `reservedConcurrency` (default true; false where the account's Lambda concurrency
 * limit cannot spare it), `stackName` (default SandboxControlPlane: another name deploys a second stack beside
 * it, every physical name prefixed with it), `alarmEmail` (subscribed to the alarm topic),
 * `createAutoScalingServiceLinkedRole` (default false), `providerPricesPerSecond` (JSON object of
 * USD per sandbox-second by provider, for the Cost dashboard), `timeToRunningP95Ms` (the time to
 * running alarm's threshold). cdk-nag's AwsSolutions pack runs on every synth.
 */
import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { ControlPlaneStack, DEFAULT_STACK_NAME } from "./control-plane-stack";

export function buildApp(app = new App()): { app: App; stack: ControlPlaneStack } {
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const deletionProtection = app.node.tryGetContext("deletionProtection");
  const provider = app.node.tryGetContext("defaultSandboxProvider");
  const providerSecretArn = app.node.tryGetContext("providerSecretArn");
  const webSocketAccessLogs = app.node.tryGetContext("webSocketAccessLogs");
  const sweeperIntervalSeconds = app.node.tryGetContext("sweeperIntervalSeconds");
  const gitPullOnRestore = app.node.tryGetContext("gitPullOnRestore");
  const gitPullCadenceSeconds = app.node.tryGetContext("gitPullCadenceSeconds");
  const reservedConcurrency = app.node.tryGetContext("reservedConcurrency");
  const stackName = app.node.tryGetContext("stackName");
  const alarmEmail = app.node.tryGetContext("alarmEmail");
  const createAutoScalingServiceLinkedRole = app.node.tryGetContext("createAutoScalingServiceLinkedRole");
  const prices: unknown = app.node.tryGetContext("providerPricesPerSecond");
  const providerPricesPerSecond = typeof prices === "string" ? (JSON.parse(prices) as unknown) : prices;
  if (providerPricesPerSecond !== undefined && (typeof providerPricesPerSecond !== "object" || providerPricesPerSecond === null || Object.values(providerPricesPerSecond).some((v) => typeof v !== "number" || !(v >= 0)))) {
    throw new Error(`providerPricesPerSecond must be a JSON object of non-negative numbers by provider, e.g. {"modal":0.0000351,"e2b":0.000046}`);
  }
  const timeToRunningP95Ms = app.node.tryGetContext("timeToRunningP95Ms");
  const stack = new ControlPlaneStack(app, typeof stackName === "string" && stackName ? stackName : DEFAULT_STACK_NAME, {
    deletionProtection: deletionProtection === undefined ? true : String(deletionProtection) !== "false",
    ...(provider === "modal" || provider === "e2b" ? { defaultSandboxProvider: provider } : {}),
    ...(typeof providerSecretArn === "string" && providerSecretArn ? { providerSecretArn } : {}),
    webSocketAccessLogs: String(webSocketAccessLogs) === "true",
    ...(sweeperIntervalSeconds === undefined ? {} : { sweeperIntervalSeconds: Number(sweeperIntervalSeconds) }),
    ...(gitPullOnRestore === undefined ? {} : { gitPullOnRestore: { enabled: String(gitPullOnRestore) === "true", cadenceSeconds: Number(gitPullCadenceSeconds ?? 0) } }),
    ...(reservedConcurrency === undefined ? {} : { reservedConcurrency: String(reservedConcurrency) !== "false" }),
    ...(typeof alarmEmail === "string" && alarmEmail ? { alarmEmail } : {}),
    createAutoScalingServiceLinkedRole: String(createAutoScalingServiceLinkedRole) === "true",
    ...(providerPricesPerSecond ? { providerPricesPerSecond: providerPricesPerSecond as Record<string, number> } : {}),
    ...(timeToRunningP95Ms === undefined ? {} : { timeToRunningP95Ms: Number(timeToRunningP95Ms) }),
  });
  return { app, stack };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/").split("/").pop() ?? "")) {
  buildApp().app.synth();
}
