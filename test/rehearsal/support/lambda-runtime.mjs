/**
 * One rehearsal "Lambda container": a Node process that imports a built asset from cdk.out and
 * invokes its handler the way the Lambda Node.js runtime does, with exactly the environment the
 * parent gives it (the template's variables plus the runtime's own).
 *
 * Every AWS SDK v3 call the asset makes is intercepted (a middleware added to every client's
 * stack through the shared smithy `Client.prototype.send`; the asset marks `@aws-sdk/*` external,
 * so its clients come from the repository's node_modules, loaded here first) and asked of the
 * parent over IPC: the parent records it, checks it against the function's role, and either
 * answers it (Step Functions, Scheduler, Secrets Manager, KMS, Lambda, API Gateway management) or
 * lets it through to a local endpoint (DynamoDB -> dynalite).
 *
 * argv: <asset dir> <handler, e.g. index.handler>. Plain JavaScript: no loader in front of the asset.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [assetDir, handlerSpec] = process.argv.slice(2);
const requireFromAsset = createRequire(path.join(assetDir, "index.mjs"));

const CLIENT_PACKAGES = {
  DynamoDBClient: "@aws-sdk/client-dynamodb",
  SFNClient: "@aws-sdk/client-sfn",
  SchedulerClient: "@aws-sdk/client-scheduler",
  SecretsManagerClient: "@aws-sdk/client-secrets-manager",
  KMSClient: "@aws-sdk/client-kms",
  LambdaClient: "@aws-sdk/client-lambda",
  ApiGatewayManagementApiClient: "@aws-sdk/client-apigatewaymanagementapi",
  CloudWatchClient: "@aws-sdk/client-cloudwatch",
  SQSClient: "@aws-sdk/client-sqs",
};

let nextId = 0;
const pending = new Map();

function ask(message) {
  const id = ++nextId;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    process.send({ ...message, id });
  });
}

/** The service's own exception class when it has one (callers test `instanceof` or `name`). */
function serviceError(clientName, error) {
  const pkg = CLIENT_PACKAGES[clientName];
  const Exception = pkg ? requireFromAsset(pkg)[error.name] : undefined;
  if (typeof Exception === "function") return new Exception({ message: error.message, $metadata: { httpStatusCode: 400 } });
  const err = new Error(error.message);
  err.name = error.name;
  return err;
}

const { Client } = requireFromAsset("@smithy/core/client");
const HOOKED = Symbol("rehearsal-intercept");
const originalSend = Client.prototype.send;
Client.prototype.send = function send(...args) {
  const stack = this.middlewareStack;
  if (!stack[HOOKED]) {
    stack[HOOKED] = true;
    stack.add(
      (next, context) => async (request) => {
        const http = request.request ?? {};
        const reply = await ask({
          type: "aws",
          clientName: context.clientName,
          commandName: context.commandName,
          input: request.input,
          host: http.hostname,
          path: http.path,
        });
        if (reply.mode === "pass") {
          http.protocol = "http:";
          http.hostname = reply.hostname;
          http.port = reply.port;
          if (http.headers) http.headers.host = `${reply.hostname}:${reply.port}`;
          return next(request);
        }
        if (reply.mode === "error") throw serviceError(context.clientName, reply.error);
        return { output: { $metadata: { httpStatusCode: 200 }, ...reply.output }, response: {} };
      },
      { step: "build", priority: "low", name: "rehearsalIntercept" },
    );
  }
  return originalSend.apply(this, args);
};

const [moduleName, exportName] = handlerSpec.split(".");
const file = [".mjs", ".js", ".cjs"].map((ext) => path.join(assetDir, moduleName + ext)).find((f) => existsSync(f));
let handler;
try {
  if (!file) throw new Error(`no module ${moduleName} in ${assetDir}`);
  const mod = await import(pathToFileURL(file).href);
  handler = mod[exportName];
  if (typeof handler !== "function") throw new Error(`${handlerSpec} is not a function`);
} catch (err) {
  process.send({ type: "init-error", error: { name: err?.name ?? "Error", message: String(err?.message ?? err) } });
  process.exit(1);
}

process.on("message", async (message) => {
  if (message.type === "aws-reply") {
    pending.get(message.id)?.(message);
    pending.delete(message.id);
    return;
  }
  if (message.type !== "invoke") return;
  const deadline = Date.now() + message.context.timeoutMs;
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName: message.context.functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: message.context.invokedFunctionArn,
    memoryLimitInMB: String(message.context.memoryLimitInMB),
    awsRequestId: message.context.awsRequestId,
    logGroupName: message.context.logGroupName,
    logStreamName: "rehearsal",
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
  try {
    const value = await handler(message.event, context);
    process.send({ type: "result", id: message.id, ok: true, value: value === undefined ? null : JSON.parse(JSON.stringify(value)) });
  } catch (err) {
    // What the Lambda runtime reports: errorType is the error's `name`, as Step Functions sees it.
    process.send({ type: "result", id: message.id, ok: false, error: { name: err?.name ?? "Error", message: String(err?.message ?? err), trace: String(err?.stack ?? "").split("\n") } });
  }
});

// A container never outlives the rehearsal that started it.
process.on("disconnect", () => process.exit(0));

process.send({ type: "ready" });
