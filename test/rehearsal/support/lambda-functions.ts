/**
 * The stack's Lambda functions as the rehearsal runs them: each one the built asset its template
 * resource names (`Code.S3Key`), with the template's handler, environment (intrinsics resolved),
 * timeout and role. Each function is a pool of "containers" (lambda-runtime.mjs child processes):
 * like Lambda, one invocation per container at a time, a new container when all are busy, and a
 * container that exceeds the function's timeout is killed (`Sandbox.Timedout`).
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { REGION, resourcesOfType, type Assembly, type TemplateResolver } from "./assembly";

const RUNTIME = path.join(path.dirname(fileURLToPath(import.meta.url)), "lambda-runtime.mjs");

export interface AwsCallMessage {
  type: "aws";
  id: number;
  clientName: string;
  commandName: string;
  input: Record<string, unknown>;
  host?: string;
  path?: string;
}

export type AwsReply =
  | { mode: "pass"; hostname: string; port: number }
  | { mode: "output"; output: Record<string, unknown> }
  | { mode: "error"; error: { name: string; message: string } };

export interface FunctionSpec {
  logicalId: string;
  name: string;
  arn: string;
  handler: string;
  assetDir: string;
  environment: Record<string, string>;
  timeoutSeconds: number;
  memorySize: number;
  roleLogicalId: string;
  logGroupName: string;
}

/** Reads every AWS::Lambda::Function of the template. */
/**
 * The CDK's own custom-resource handlers (the console stack's BucketDeployment, Python; the S3
 * auto-delete provider, CommonJS) are the CDK's code, run by CloudFormation at deploy time, not
 * the control plane's: the rehearsal runs only the stack's own functions.
 */
export function isCdkCustomResourceHandler(logicalId: string, properties: Record<string, unknown>): boolean {
  // The CDK names them `Custom...` (CustomCDKBucketDeployment..., CustomS3AutoDeleteObjectsCustomResourceProviderHandler...).
  return logicalId.startsWith("Custom") || String(properties.Runtime ?? "").startsWith("python");
}

export function functionSpecs(assembly: Assembly, resolver: TemplateResolver): FunctionSpec[] {
  return resourcesOfType(assembly, "AWS::Lambda::Function").filter(([logicalId, r]) => !isCdkCustomResourceHandler(logicalId, r.Properties)).map(([logicalId, r]) => {
    const p = r.Properties;
    const key = String((p.Code as { S3Key: unknown }).S3Key);
    const assetDir = assembly.assetDirs.get(key.replace(/\.zip$/, ""));
    if (!assetDir) throw new Error(`${logicalId}: no asset for ${key} in ${assembly.dir}`);
    const variables = ((p.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {}) as Record<string, unknown>;
    const environment = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, resolver.string(v)]));
    const role = (p.Role as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0];
    const logGroup = (p.LoggingConfig as { LogGroup?: unknown } | undefined)?.LogGroup;
    return {
      logicalId,
      name: resolver.ref(logicalId),
      arn: resolver.getAtt(logicalId, "Arn"),
      handler: String(p.Handler),
      assetDir,
      environment,
      timeoutSeconds: Number(p.Timeout ?? 3),
      memorySize: Number(p.MemorySize ?? 128),
      roleLogicalId: role,
      logGroupName: logGroup ? resolver.string(logGroup) : `/aws/lambda/${resolver.ref(logicalId)}`,
    };
  });
}

export class InvocationError extends Error {
  constructor(
    readonly errorName: string,
    message: string,
    /** The runtime's `trace` (the error's stack lines), as Lambda reports a function error. */
    readonly trace: string[] = [],
  ) {
    super(message);
    this.name = errorName;
  }
}

interface Container {
  child: ChildProcess;
  ready: Promise<void>;
  busy: boolean;
  calls: Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>;
}

export interface PoolOptions {
  spec: FunctionSpec;
  /** The template environment plus the rehearsal's overrides and the runtime's own variables. */
  env: Record<string, string>;
  onAwsCall: (spec: FunctionSpec, call: AwsCallMessage) => Promise<AwsReply>;
  /** Every line the function writes (stdout and stderr). */
  onLog: (spec: FunctionSpec, line: string) => void;
}

/** The containers of one function. */
export class FunctionPool {
  private readonly containers: Container[] = [];
  /** Cold starts so far. */
  coldStarts = 0;

  constructor(private readonly options: PoolOptions) {}

  get spec(): FunctionSpec {
    return this.options.spec;
  }

  private spawn(): Container {
    const { spec } = this.options;
    this.coldStarts += 1;
    const child = fork(RUNTIME, [spec.assetDir, spec.handler], {
      env: this.options.env,
      cwd: spec.assetDir,
      execArgv: [],
      serialization: "advanced",
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    });
    const container: Container = { child, ready: Promise.resolve(), busy: false, calls: new Map() };
    for (const stream of [child.stdout, child.stderr]) {
      let buffered = "";
      stream?.setEncoding("utf8");
      stream?.on("data", (chunk: string) => {
        buffered += chunk;
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) if (line) this.options.onLog(spec, line);
      });
    }
    container.ready = new Promise<void>((resolve, reject) => {
      child.on("message", (message: { type: string; id: number; ok?: boolean; value?: unknown; error?: { name: string; message: string; trace?: string[] } }) => {
        if (message.type === "ready") resolve();
        else if (message.type === "init-error") reject(new InvocationError("Runtime.ImportModuleError", `${spec.logicalId}: ${message.error?.message}`));
        else if (message.type === "aws") {
          void this.options.onAwsCall(spec, message as unknown as AwsCallMessage).then(
            (reply) => child.connected && child.send({ type: "aws-reply", id: message.id, ...reply }),
            (err: unknown) => child.connected && child.send({ type: "aws-reply", id: message.id, mode: "error", error: { name: "RehearsalFailure", message: String((err as Error).message ?? err) } }),
          );
        } else if (message.type === "result") {
          const call = container.calls.get(String(message.id));
          container.calls.delete(String(message.id));
          if (!call) return;
          if (message.ok) call.resolve(message.value);
          else call.reject(new InvocationError(message.error?.name ?? "Error", message.error?.message ?? "", message.error?.trace ?? []));
        }
      });
      child.on("exit", (code, signal) => {
        const i = this.containers.indexOf(container);
        if (i >= 0) this.containers.splice(i, 1);
        reject(new InvocationError("Runtime.ExitError", `${spec.logicalId} exited (${signal ?? code}) before it was ready`));
        for (const call of container.calls.values()) call.reject(new InvocationError("Runtime.ExitError", `${spec.logicalId} exited (${signal ?? code})`));
        container.calls.clear();
      });
    });
    container.ready.catch(() => undefined);
    this.containers.push(container);
    return container;
  }

  /** Starts a container (the asset imported with the function's environment) and waits until it is ready; it stays for later invocations. */
  async coldStart(): Promise<void> {
    const container = this.containers.find((c) => !c.busy) ?? this.spawn();
    await container.ready;
  }

  /** Invokes the function synchronously (RequestResponse): its result, or an InvocationError named like the Lambda errorType. */
  async invoke(event: unknown): Promise<unknown> {
    const { spec } = this.options;
    const container = this.containers.find((c) => !c.busy) ?? this.spawn();
    container.busy = true;
    try {
      await container.ready;
      const id = randomUUID();
      const result = new Promise<unknown>((resolve, reject) => container.calls.set(id, { resolve, reject }));
      const timeoutMs = spec.timeoutSeconds * 1000;
      container.child.send({
        type: "invoke",
        id,
        event,
        context: { functionName: spec.name, invokedFunctionArn: spec.arn, memoryLimitInMB: spec.memorySize, awsRequestId: id, logGroupName: spec.logGroupName, timeoutMs },
      });
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          container.child.kill("SIGKILL");
          reject(new InvocationError("Sandbox.Timedout", `${spec.logicalId} timed out after ${spec.timeoutSeconds} seconds`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([result, timedOut]);
      } finally {
        clearTimeout(timer);
      }
    } finally {
      container.busy = false;
    }
  }

  async close(): Promise<void> {
    await Promise.all(
      this.containers.splice(0).map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.child.exitCode !== null || c.child.signalCode !== null) return resolve();
            c.child.once("exit", () => resolve());
            c.child.kill("SIGKILL");
          }),
      ),
    );
  }
}

/** The variables the Lambda runtime itself sets in every container (credentials are fake: nothing reaches AWS). */
export function lambdaRuntimeEnvironment(spec: FunctionSpec): Record<string, string> {
  return {
    AWS_REGION: REGION,
    AWS_DEFAULT_REGION: REGION,
    AWS_ACCESS_KEY_ID: "ASIAREHEARSAL",
    AWS_SECRET_ACCESS_KEY: "rehearsal",
    AWS_SESSION_TOKEN: "rehearsal",
    AWS_LAMBDA_FUNCTION_NAME: spec.name,
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memorySize),
    AWS_LAMBDA_FUNCTION_VERSION: "$LATEST",
    AWS_LAMBDA_LOG_GROUP_NAME: spec.logGroupName,
    AWS_EXECUTION_ENV: "AWS_Lambda_nodejs22.x",
    LAMBDA_TASK_ROOT: spec.assetDir,
    _HANDLER: spec.handler,
    TZ: ":UTC",
  };
}
