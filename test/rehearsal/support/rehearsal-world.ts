/**
 * The rehearsal's stand-in for an AWS account, built from the synthesized assembly only:
 *
 * - DynamoDB: dynalite, the table created from the template's key schema, attributes and GSIs;
 * - Lambda: every function of the template as built assets in child processes (lambda-functions.ts);
 * - Step Functions: every state machine's synthesized definition with its DefinitionSubstitutions
 *   applied, validated by asl-validator and run by aws-local-stepfunctions, each Task bound to the
 *   function whose ARN its Resource names (and the machine's role checked for invoking it);
 * - Scheduler, Secrets Manager, KMS, Lambda Invoke, API Gateway management, SQS SendMessage:
 *   small in-memory services that answer what the functions ask;
 * - nested stacks (Slack's): their functions, secrets and roles too, each function's calls
 *   checked against its own stack's role;
 * - API Gateway: HTTP and WebSocket events built from the template's routes and integrations.
 *
 * Every AWS call a function makes is recorded (function, action, resource ARN) and checked
 * against the function's role with the IAM simulator (iam-check.ts); a denied call is answered
 * `AccessDeniedException`, as AWS would, and stays in `denied` for the test to fail on.
 */
import "../../../infra/local/promise-with-resolvers";
import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes, randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient, type CreateTableCommandInput } from "@aws-sdk/client-dynamodb";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import aslValidator from "asl-validator";
import dynalite from "dynalite";
import { StateMachine } from "aws-local-stepfunctions";
import { buildHttpApiEvent } from "../../../infra/local/api-gateway-events";
import { listSandboxRecords } from "../../../functions/providers/local/sandbox-registry";
import { taskResources } from "../../../infra/lifecycle-flows";
import { createHash } from "node:crypto";
import { ACCOUNT, nestedAssembly, REGION, resourcesOfType, TemplateResolver, type Assembly } from "./assembly";
import { IamChecker, type IamRequest } from "./iam-check";
import { FunctionPool, functionSpecs, InvocationError, lambdaRuntimeEnvironment, type AwsCallMessage, type AwsReply, type FunctionSpec } from "./lambda-functions";

export interface RecordedCall {
  function: string;
  service: string;
  action: string;
  resource: string;
  allowed: boolean;
  detail: string;
}

export interface Execution {
  name: string;
  machine: string;
  input: string;
  status: "RUNNING" | "SUCCEEDED" | "FAILED";
  startDate: Date;
  error?: string;
  done: Promise<void>;
}

export interface Schedule {
  group: string;
  name: string;
  expression: string;
  target: { Arn: string; RoleArn: string; Input?: string };
}

interface MachineSpec {
  logicalId: string;
  arn: string;
  name: string;
  roleLogicalId: string;
  definition: Record<string, unknown> & { States: Record<string, { Type: string; Resource?: string }> };
  machine: StateMachine;
}

export interface WorldOptions {
  /** Variables the rehearsal sets over the template's (named in the test: what it takes to run locally). */
  overrides: (sandboxDir: string) => Record<string, string>;
}

class RehearsalFailure extends Error {
  override name = "RehearsalFailure";
}

/** `lambda` -> `FunctionName` as given (name, partial or full ARN) resolved to a full ARN. */
function functionArnOf(nameOrArn: string): string {
  if (nameOrArn.startsWith("arn:")) return nameOrArn.replace(/:(\$LATEST|\d+)$/, "");
  return `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${nameOrArn}`;
}

export class RehearsalWorld {
  readonly resolver: TemplateResolver;
  readonly iam: IamChecker;
  readonly calls: RecordedCall[] = [];
  readonly logs: { function: string; line: string }[] = [];
  readonly functions = new Map<string, FunctionPool>();
  readonly machines = new Map<string, MachineSpec>();
  readonly executions = new Map<string, Execution>();
  readonly schedules = new Map<string, Schedule>();
  /** Messages pushed to each WebSocket connection (PostToConnection). */
  readonly pushed = new Map<string, unknown[]>();
  readonly openConnections = new Set<string>();
  readonly secretValues = new Map<string, string>();
  /** Messages sent to each queue (SQS SendMessage), by queue URL: the relay nudges, Slack deliveries. */
  readonly queued = new Map<string, { MessageId: string; Body: string }[]>();
  /** The IAM checker of each nested stack's function (by its logical id); the root's functions use `iam`. */
  private readonly nestedIam = new Map<string, IamChecker>();
  /** Asynchronous invocations (Lambda Invoke, InvocationType Event) still running. */
  private readonly background = new Set<Promise<unknown>>();
  readonly sandboxDir: string;
  tableName = "";
  private dynamo: { server: ReturnType<typeof dynalite>; port: number } | undefined;

  constructor(
    readonly assembly: Assembly,
    private readonly options: WorldOptions,
  ) {
    this.resolver = new TemplateResolver(assembly);
    this.iam = new IamChecker(assembly, this.resolver);
    this.sandboxDir = mkdtempSync(path.join(tmpdir(), "rehearsal-sandboxes-"));
  }

  get denied(): RecordedCall[] {
    return this.calls.filter((c) => !c.allowed);
  }

  async start(): Promise<void> {
    const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    this.dynamo = { server, port: (server.address() as AddressInfo).port };
    await this.createTable();

    // The root stack and each nested stack: their resolver, and the IAM checker of their roles.
    const stacks = [
      { assembly: this.assembly, resolver: this.resolver, iam: this.iam },
      ...[...this.assembly.nested.keys()].map((id) => {
        const resolver = this.resolver.nested(id);
        return { assembly: nestedAssembly(this.assembly, id), resolver, iam: new IamChecker(nestedAssembly(this.assembly, id), resolver, this.iam) };
      }),
    ];
    for (const stack of stacks) {
      for (const [logicalId, secret] of resourcesOfType(stack.assembly, "AWS::SecretsManager::Secret")) {
        const generate = secret.Properties.GenerateSecretString as { SecretStringTemplate?: string; GenerateStringKey?: string } | undefined;
        const generated = randomBytes(48).toString("base64url").slice(0, 64);
        const value = generate?.SecretStringTemplate && generate.GenerateStringKey ? JSON.stringify({ ...JSON.parse(generate.SecretStringTemplate), [generate.GenerateStringKey]: generated }) : generated;
        this.secretValues.set(stack.resolver.ref(logicalId), value);
      }
    }

    for (const stack of stacks) {
      for (const [logicalId] of resourcesOfType(stack.assembly, "AWS::SQS::Queue")) this.queued.set(stack.resolver.ref(logicalId), []);
    }

    for (const { iam, ...spec } of stacks.flatMap((stack) => functionSpecs(stack.assembly, stack.resolver).map((s) => ({ ...s, iam: stack.iam })))) {
      if (iam !== this.iam) this.nestedIam.set(spec.logicalId, iam);
      const env = { ...spec.environment, ...this.options.overrides(this.sandboxDir), ...lambdaRuntimeEnvironment(spec), PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp" };
      this.functions.set(
        spec.logicalId,
        new FunctionPool({
          spec,
          env,
          onAwsCall: (s, call) => this.onAwsCall(s, call),
          onLog: (s, line) => this.logs.push({ function: s.logicalId, line }),
        }),
      );
    }

    // Schedules the template itself declares (the sweeper's rate schedule), next to those the functions arm.
    for (const [logicalId, r] of resourcesOfType(this.assembly, "AWS::Scheduler::Schedule")) {
      const p = this.resolver.resolve(r.Properties) as { GroupName?: string; Name?: string; ScheduleExpression: string; Target: Schedule["target"] };
      const schedule: Schedule = { group: p.GroupName ?? "default", name: p.Name ?? logicalId, expression: p.ScheduleExpression, target: p.Target };
      this.schedules.set(`${schedule.group}/${schedule.name}`, schedule);
    }
    for (const [logicalId, r] of resourcesOfType(this.assembly, "AWS::StepFunctions::StateMachine")) this.machines.set(logicalId, this.loadMachine(logicalId, r.Properties));
  }

  private async createTable(): Promise<void> {
    const tables = resourcesOfType(this.assembly, "AWS::DynamoDB::Table");
    if (tables.length !== 1) throw new Error(`expected one table, the template has ${tables.length}`);
    const [logicalId, table] = tables[0] as [string, { Properties: Record<string, unknown> }];
    this.tableName = this.resolver.ref(logicalId);
    const p = table.Properties;
    const client = this.dynamoClient();
    const input: CreateTableCommandInput = {
      TableName: this.tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: p.AttributeDefinitions as CreateTableCommandInput["AttributeDefinitions"],
      KeySchema: p.KeySchema as CreateTableCommandInput["KeySchema"],
      ...(p.GlobalSecondaryIndexes
        ? { GlobalSecondaryIndexes: (p.GlobalSecondaryIndexes as Record<string, unknown>[]).map((g) => ({ IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection })) as CreateTableCommandInput["GlobalSecondaryIndexes"] }
        : {}),
    };
    await client.send(new CreateTableCommand(input));
    // createTableMs 0: ACTIVE at once; bounded all the same.
    const { Table } = await client.send(new DescribeTableCommand({ TableName: this.tableName }));
    client.destroy();
    if (Table?.TableStatus !== "ACTIVE") throw new Error(`table ${this.tableName} is ${Table?.TableStatus}`);
  }

  /** A client of the rehearsal's own (seeding and reading), not recorded. */
  dynamoClient(): DynamoDBClient {
    if (!this.dynamo) throw new Error("the world is not started");
    return new DynamoDBClient({ endpoint: `http://127.0.0.1:${this.dynamo.port}`, region: REGION, credentials: { accessKeyId: "local", secretAccessKey: "local" } });
  }

  private loadMachine(logicalId: string, p: Record<string, unknown>): MachineSpec {
    let text = this.resolver.string(p.DefinitionString);
    const substitutions = (this.resolver.resolve(p.DefinitionSubstitutions ?? {}) as Record<string, string>) ?? {};
    for (const [variable, value] of Object.entries(substitutions)) text = text.split("${" + variable + "}").join(value);
    const unresolved = /\$\{([A-Za-z0-9_]+)\}/.exec(text);
    if (unresolved) throw new Error(`${logicalId}: \${${unresolved[1]}} has no DefinitionSubstitution`);
    const definition = JSON.parse(text) as MachineSpec["definition"];
    const { isValid, errorsText } = aslValidator(definition as never);
    if (!isValid) throw new Error(`${logicalId}: asl-validator: ${errorsText("; ")}`);
    for (const resource of taskResources(definition)) {
      if (!this.functionByArn(resource)) throw new Error(`${logicalId}: Task resource ${resource} is no function of the template`);
    }
    const arn = this.resolver.getAtt(logicalId, "Arn");
    return {
      logicalId,
      arn,
      name: arn.split(":").pop() ?? logicalId,
      roleLogicalId: (p.RoleArn as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0],
      definition,
      machine: new StateMachine(definition as never),
    };
  }

  functionByArn(arn: string): FunctionPool | undefined {
    return [...this.functions.values()].find((f) => f.spec.arn === arn);
  }

  /** The IAM checker of a function's role (a nested stack's function: its own stack's). */
  iamOf(pool: FunctionPool): IamChecker {
    return this.nestedIam.get(pool.spec.logicalId) ?? this.iam;
  }

  /**
   * What a Lambda SQS event source does: polls the queue as the function's role (its role must
   * allow ReceiveMessage, DeleteMessage and GetQueueAttributes on the queue), invokes the function
   * with a batch of the queued messages, and deletes those not reported in `batchItemFailures`
   * (they stay for a redelivery). Returns the batch's failures.
   */
  async deliverQueue(queueUrl: string, pool: FunctionPool, batchSize = 10): Promise<string[]> {
    const queue = this.queued.get(queueUrl);
    if (!queue) throw new Error(`no queue ${queueUrl}`);
    const [, region, account, name] = /^https:\/\/sqs\.([^.]+)\.amazonaws\.com\/(\d+)\/([^/]+)$/.exec(queueUrl) ?? [];
    const arn = `arn:aws:sqs:${region}:${account}:${name}`;
    const { spec } = pool;
    await this.authorize(spec.logicalId, spec.roleLogicalId, "SQS", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"].map((action) => ({ action, resource: arn })));
    const batch = queue.slice(0, batchSize);
    const Records = batch.map((m) => ({
      messageId: m.MessageId,
      receiptHandle: m.MessageId,
      body: m.Body,
      attributes: { ApproximateReceiveCount: "1", SentTimestamp: String(Date.now()), SenderId: ACCOUNT, ApproximateFirstReceiveTimestamp: String(Date.now()) },
      messageAttributes: {},
      md5OfBody: createHash("md5").update(m.Body).digest("hex"),
      eventSource: "aws:sqs",
      eventSourceARN: arn,
      awsRegion: region,
    }));
    const result = (await pool.invoke({ Records })) as { batchItemFailures?: { itemIdentifier: string }[] } | null;
    const failed = (result?.batchItemFailures ?? []).map((f) => f.itemIdentifier);
    this.queued.set(queueUrl, queue.filter((m) => !batch.includes(m) || failed.includes(m.MessageId)));
    return failed;
  }

  fn(logicalIdPrefix: string): FunctionPool {
    const matches = [...this.functions.entries()].filter(([id]) => id.startsWith(`${logicalIdPrefix}Function`));
    if (matches.length !== 1) throw new Error(`expected one function ${logicalIdPrefix}, found ${matches.length}`);
    return (matches[0] as [string, FunctionPool])[1];
  }

  // ---- IAM ---------------------------------------------------------------------------------

  private async authorize(who: string, roleLogicalId: string, service: string, requests: IamRequest[]): Promise<void> {
    const iam = this.nestedIam.get(who) ?? this.iam;
    for (const request of requests) {
      const decision = await iam.check(roleLogicalId, request);
      this.calls.push({ function: who, service, action: request.action, resource: request.resource, allowed: decision.allowed, detail: decision.detail });
      if (!decision.allowed) {
        const err = new RehearsalFailure(`${who} is not authorized to perform ${request.action} on ${request.resource} (${decision.detail})`);
        err.name = "AccessDeniedException";
        throw err;
      }
    }
  }

  // ---- the functions' AWS calls -----------------------------------------------------------

  private async onAwsCall(spec: FunctionSpec, call: AwsCallMessage): Promise<AwsReply> {
    const service = call.clientName.replace(/Client$/, "");
    const action = call.commandName.replace(/Command$/, "");
    let plan: { iam: IamRequest[]; answer: () => Promise<AwsReply> | AwsReply };
    try {
      plan = this.plan(service, action, call);
    } catch (err) {
      // A call the rehearsal does not know is a failure of the rehearsal, named like a denial.
      this.calls.push({ function: spec.logicalId, service, action, resource: "?", allowed: false, detail: (err as Error).message });
      return { mode: "error", error: { name: "RehearsalFailure", message: (err as Error).message } };
    }
    try {
      await this.authorize(spec.logicalId, spec.roleLogicalId, service, plan.iam);
    } catch (err) {
      return { mode: "error", error: { name: "AccessDeniedException", message: (err as Error).message } };
    }
    try {
      return await plan.answer();
    } catch (err) {
      return { mode: "error", error: { name: (err as Error).name, message: (err as Error).message } };
    }
  }

  private plan(service: string, action: string, call: AwsCallMessage): { iam: IamRequest[]; answer: () => Promise<AwsReply> | AwsReply } {
    const input = call.input;
    const output = (o: Record<string, unknown>): AwsReply => ({ mode: "output", output: o });
    const fail = (name: string, message: string): never => {
      const err = new Error(message);
      err.name = name;
      throw err;
    };
    switch (service) {
      case "DynamoDB": {
        const table = (name: unknown, index?: unknown) => `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${String(name)}${index ? `/index/${String(index)}` : ""}`;
        const pass = (): AwsReply => ({ mode: "pass", hostname: "127.0.0.1", port: this.dynamo?.port ?? 0 });
        let iam: IamRequest[];
        if (action === "TransactWriteItems") {
          const kinds: Record<string, string> = { Put: "PutItem", Update: "UpdateItem", Delete: "DeleteItem", ConditionCheck: "ConditionCheckItem" };
          iam = (input.TransactItems as Record<string, { TableName: string }>[]).map((item) => {
            const [kind, body] = Object.entries(item)[0] as [string, { TableName: string }];
            return { action: `dynamodb:${kinds[kind] ?? kind}`, resource: table(body.TableName) };
          });
        } else if (action === "TransactGetItems") {
          iam = (input.TransactItems as { Get: { TableName: string } }[]).map((item) => ({ action: "dynamodb:GetItem", resource: table(item.Get.TableName) }));
        } else if (action === "BatchGetItem" || action === "BatchWriteItem") {
          iam = Object.keys(input.RequestItems as object).map((name) => ({ action: `dynamodb:${action}`, resource: table(name) }));
        } else {
          iam = [{ action: `dynamodb:${action}`, resource: table(input.TableName, input.IndexName) }];
        }
        return { iam, answer: pass };
      }
      case "SFN": {
        if (action === "DescribeExecution") {
          const executionArn = String(input.executionArn);
          return {
            iam: [{ action: "states:DescribeExecution", resource: executionArn }],
            answer: () => {
              const execution = this.executions.get(executionArn);
              if (!execution) return fail("ExecutionDoesNotExist", `Execution Does Not Exist: '${executionArn}'`);
              const machine = this.machines.get(execution.machine);
              return output({ executionArn, stateMachineArn: machine?.arn, name: execution.name, status: execution.status, startDate: execution.startDate, input: execution.input });
            },
          };
        }
        if (action !== "StartExecution") throw new Error(`rehearsal: no Step Functions ${action}`);
        const arn = String(input.stateMachineArn);
        return {
          iam: [{ action: "states:StartExecution", resource: arn }],
          answer: () => {
            const machine = [...this.machines.values()].find((m) => m.arn === arn);
            if (!machine) return fail("StateMachineDoesNotExist", `State Machine Does Not Exist: '${arn}'`);
            const name = String(input.name ?? randomUUID());
            const executionArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:${machine.name}:${name}`;
            const existing = this.executions.get(executionArn);
            if (existing) {
              // Standard workflows: the same name and input while running is idempotent; anything else is taken.
              if (existing.status === "RUNNING" && existing.input === String(input.input)) return output({ executionArn, startDate: existing.startDate });
              return fail("ExecutionAlreadyExists", `Execution Already Exists: '${executionArn}'`);
            }
            const execution = this.startExecution(machine, name, executionArn, String(input.input ?? "{}"));
            return output({ executionArn, startDate: execution.startDate });
          },
        };
      }
      case "Scheduler": {
        const group = String(input.GroupName ?? "default");
        const name = String(input.Name);
        const arn = `arn:aws:scheduler:${REGION}:${ACCOUNT}:schedule/${group}/${name}`;
        const key = `${group}/${name}`;
        const target = input.Target as Schedule["target"] | undefined;
        const iam: IamRequest[] = [{ action: `scheduler:${action}`, resource: arn }];
        if (target?.RoleArn) iam.push({ action: "iam:PassRole", resource: target.RoleArn, context: { "iam:PassedToService": "scheduler.amazonaws.com" } });
        return {
          iam,
          answer: () => {
            const existing = this.schedules.get(key);
            switch (action) {
              case "CreateSchedule":
                if (existing) return fail("ConflictException", `Schedule ${name} already exists.`);
                this.schedules.set(key, { group, name, expression: String(input.ScheduleExpression), target: target as Schedule["target"] });
                return output({ ScheduleArn: arn });
              case "UpdateSchedule":
                if (!existing) return fail("ResourceNotFoundException", `Schedule ${name} does not exist.`);
                this.schedules.set(key, { group, name, expression: String(input.ScheduleExpression), target: target as Schedule["target"] });
                return output({ ScheduleArn: arn });
              case "DeleteSchedule":
                if (!existing) return fail("ResourceNotFoundException", `Schedule ${name} does not exist.`);
                this.schedules.delete(key);
                return output({});
              case "GetSchedule":
                if (!existing) return fail("ResourceNotFoundException", `Schedule ${name} does not exist.`);
                return output({ Name: name, GroupName: group, ScheduleExpression: existing.expression, Target: existing.target });
              default:
                throw new Error(`rehearsal: no Scheduler ${action}`);
            }
          },
        };
      }
      case "SecretsManager": {
        if (action !== "GetSecretValue") throw new Error(`rehearsal: no Secrets Manager ${action}`);
        const id = String(input.SecretId);
        const arn = [...this.secretValues.keys()].find((a) => a === id || a.split(":secret:")[1]?.replace(/-[A-Za-z0-9]{6}$/, "") === id) ?? id;
        return {
          iam: [{ action: "secretsmanager:GetSecretValue", resource: arn }],
          answer: () => {
            const value = this.secretValues.get(arn);
            if (value === undefined) return fail("ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
            return output({ ARN: arn, Name: arn.split(":secret:")[1], SecretString: value });
          },
        };
      }
      case "KMS": {
        const keyArn = String(input.KeyId);
        const context = (input.EncryptionContext ?? {}) as Record<string, string>;
        const iamContext: Record<string, string | string[]> = { "kms:EncryptionContextKeys": Object.keys(context) };
        for (const [k, v] of Object.entries(context)) iamContext[`kms:EncryptionContext:${k}`] = v;
        const iam = [{ action: `kms:${action}`, resource: keyArn, context: iamContext }];
        return {
          iam,
          answer: () => {
            const bytes = (v: unknown) => Buffer.from(v as Uint8Array);
            if (action === "Encrypt") {
              const blob = Buffer.from(JSON.stringify({ keyArn, context, plaintext: bytes(input.Plaintext).toString("base64") }));
              return output({ CiphertextBlob: new Uint8Array(blob), KeyId: keyArn });
            }
            if (action === "Decrypt") {
              const parsed = JSON.parse(bytes(input.CiphertextBlob).toString("utf8")) as { keyArn: string; context: Record<string, string>; plaintext: string };
              if (parsed.keyArn !== keyArn || JSON.stringify(parsed.context) !== JSON.stringify(context)) return fail("InvalidCiphertextException", "");
              return output({ Plaintext: new Uint8Array(Buffer.from(parsed.plaintext, "base64")), KeyId: keyArn });
            }
            throw new Error(`rehearsal: no KMS ${action}`);
          },
        };
      }
      case "Lambda": {
        if (action !== "Invoke") throw new Error(`rehearsal: no Lambda ${action}`);
        const arn = functionArnOf(String(input.FunctionName));
        return {
          iam: [{ action: "lambda:InvokeFunction", resource: arn }],
          answer: async () => {
            const target = this.functionByArn(arn);
            if (!target) return fail("ResourceNotFoundException", `Function not found: ${arn}`);
            const payload = input.Payload ? JSON.parse(Buffer.from(input.Payload as Uint8Array).toString("utf8")) : {};
            if (input.InvocationType === "Event") {
              const run = target.invoke(payload).catch((err: unknown) => this.logs.push({ function: target.spec.logicalId, line: `async invocation failed: ${String(err)}` }));
              this.background.add(run);
              void run.finally(() => this.background.delete(run));
              return output({ StatusCode: 202 });
            }
            const value = await target.invoke(payload);
            return output({ StatusCode: 200, Payload: new Uint8Array(Buffer.from(JSON.stringify(value))) });
          },
        };
      }
      case "ApiGatewayManagementApi": {
        // The endpoint the function was given (WS_MANAGEMENT_ENDPOINT): https://{api}.execute-api.{region}.amazonaws.com/{stage}
        const apiId = String(call.host ?? "").split(".")[0];
        const match = /^\/([^/]+)\/@connections\/(.+)$/.exec(decodeURIComponent(call.path ?? ""));
        if (!match) throw new Error(`rehearsal: unexpected management API path ${call.path}`);
        const [, stage, connectionId] = match as unknown as [string, string, string];
        const method = action === "PostToConnection" ? "POST" : action === "DeleteConnection" ? "DELETE" : "GET";
        return {
          iam: [{ action: "execute-api:ManageConnections", resource: `arn:aws:execute-api:${REGION}:${ACCOUNT}:${apiId}/${stage}/${method}/@connections/${connectionId}` }],
          answer: () => {
            if (!this.openConnections.has(connectionId)) return fail("GoneException", "");
            if (action === "PostToConnection") {
              const list = this.pushed.get(connectionId) ?? [];
              list.push(JSON.parse(Buffer.from(input.Data as Uint8Array).toString("utf8")));
              this.pushed.set(connectionId, list);
            }
            if (action === "DeleteConnection") this.openConnections.delete(connectionId);
            return output({});
          },
        };
      }
      case "CloudWatch":
        return { iam: [{ action: `cloudwatch:${action}`, resource: "*" }], answer: () => output({}) };
      case "SQS": {
        if (action !== "SendMessage") throw new Error(`rehearsal: no SQS ${action}`);
        // https://sqs.{region}.amazonaws.com/{account}/{name} -> arn:aws:sqs:{region}:{account}:{name}
        const url = String(input.QueueUrl);
        const match = /^https:\/\/sqs\.([^.]+)\.amazonaws\.com\/(\d+)\/([^/]+)$/.exec(url);
        if (!match) throw new Error(`rehearsal: unexpected queue URL ${url}`);
        const [, region, account, name] = match as unknown as [string, string, string, string];
        return {
          iam: [{ action: "sqs:SendMessage", resource: `arn:aws:sqs:${region}:${account}:${name}` }],
          answer: () => {
            const queue = this.queued.get(url);
            if (!queue) return fail("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.");
            const body = String(input.MessageBody);
            const message = { MessageId: randomUUID(), Body: body };
            queue.push(message);
            return output({ MessageId: message.MessageId, MD5OfMessageBody: createHash("md5").update(body).digest("hex") });
          },
        };
      }
      default:
        throw new Error(`rehearsal: no service ${service} (${action})`);
    }
  }

  // ---- Step Functions ----------------------------------------------------------------------

  private startExecution(machine: MachineSpec, name: string, executionArn: string, input: string): Execution {
    const handlers: Record<string, (event: unknown) => Promise<unknown>> = {};
    for (const [stateName, state] of Object.entries(machine.definition.States)) {
      if (state.Type !== "Task" || !state.Resource) continue;
      const resource = state.Resource;
      handlers[stateName] = async (event) => {
        // The state machine's role invokes the function (direct Lambda integration).
        await this.authorize(machine.logicalId, machine.roleLogicalId, "Lambda", [{ action: "lambda:InvokeFunction", resource }]);
        const target = this.functionByArn(resource);
        if (!target) throw new RehearsalFailure(`${machine.logicalId}.${stateName}: no function ${resource}`);
        try {
          return await target.invoke(event);
        } catch (err) {
          if (!(err instanceof InvocationError)) throw err;
          // What Step Functions makes of a Lambda function error: Error is the errorType, Cause the
          // runtime's error payload as a JSON string (errorType, errorMessage, trace).
          const failure = new Error(JSON.stringify({ errorType: err.errorName, errorMessage: err.message, trace: err.trace }));
          failure.name = err.errorName;
          throw failure;
        }
      };
    }
    const run = machine.machine.run(JSON.parse(input) as never, {
      overrides: { taskResourceLocalHandlers: handlers as never },
      context: {
        Execution: { Id: executionArn, Name: name, Input: JSON.parse(input) as never, StartTime: new Date().toISOString(), RoleArn: this.iam.roleArn(machine.roleLogicalId) },
        StateMachine: { Id: machine.arn, Name: machine.name },
      },
    });
    const execution: Execution = { name, machine: machine.logicalId, input, status: "RUNNING", startDate: new Date(), done: Promise.resolve() };
    execution.done = run.result.then(
      () => {
        execution.status = "SUCCEEDED";
      },
      (err: unknown) => {
        execution.status = "FAILED";
        execution.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      },
    );
    this.executions.set(executionArn, execution);
    return execution;
  }

  /** Resolves once no execution and no asynchronous invocation is running, including ones started meanwhile. */
  async settle(): Promise<void> {
    for (;;) {
      const running = [...this.executions.values()].filter((e) => e.status === "RUNNING").map((e) => e.done);
      const pending = [...running, ...this.background];
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  // ---- API Gateway -------------------------------------------------------------------------

  /** The function an HTTP route key (`POST /v1/sessions/{id}/resume`) is integrated with, from the template. */
  private routeTarget(apiType: "HTTP" | "WEBSOCKET", routeKey: string): { fn: FunctionPool; apiId: string; stage: string } {
    const apis = resourcesOfType(this.assembly, "AWS::ApiGatewayV2::Api").filter(([, api]) => (api.Properties.ProtocolType ?? "HTTP") === apiType).map(([id]) => id);
    const route = resourcesOfType(this.assembly, "AWS::ApiGatewayV2::Route").find(
      ([, r]) => r.Properties.RouteKey === routeKey && apis.includes((r.Properties.ApiId as { Ref: string }).Ref),
    );
    if (!route) throw new Error(`no ${apiType} route ${routeKey} in the template`);
    const integrationId = this.resolver.string(route[1].Properties.Target).replace(/^integrations\//, "");
    const integration = this.assembly.resources[integrationId];
    if (!integration) throw new Error(`route ${routeKey}: no integration ${integrationId}`);
    // HTTP APIs name the function's ARN; WebSocket APIs its invocation URI (arn:aws:apigateway:…:lambda:path/2015-03-31/functions/<arn>/invocations).
    const uri = this.resolver.string(integration.Properties.IntegrationUri);
    const fn = this.functionByArn(/\/functions\/(arn:[^/]+)\/invocations$/.exec(uri)?.[1] ?? uri);
    if (!fn) throw new Error(`route ${routeKey}: the integration targets no function of the template`);
    const apiLogicalId = (route[1].Properties.ApiId as { Ref: string }).Ref;
    const stage = resourcesOfType(this.assembly, "AWS::ApiGatewayV2::Stage").find(([, st]) => (st.Properties.ApiId as { Ref: string }).Ref === apiLogicalId);
    if (!stage) throw new Error(`route ${routeKey}: its API has no stage`);
    return { fn, apiId: this.resolver.ref(apiLogicalId), stage: String(stage[1].Properties.StageName) };
  }

  /** API Gateway invoking a route's function: the function's resource policy must let it, for this source ARN. */
  private async authorizeInvokeByApi(fn: FunctionPool, apiId: string, sourcePath: string): Promise<boolean> {
    const sourceArn = `arn:aws:execute-api:${REGION}:${ACCOUNT}:${apiId}/${sourcePath}`;
    const decision = await this.iam.checkInvoke(fn.spec.arn, "apigateway.amazonaws.com", sourceArn);
    this.calls.push({ function: `ApiGateway(${apiId})`, service: "Lambda", action: "lambda:InvokeFunction", resource: `${fn.spec.arn} from ${sourceArn}`, allowed: decision.allowed, detail: decision.detail });
    return decision.allowed;
  }

  private httpRouteKeys(): string[] {
    return resourcesOfType(this.assembly, "AWS::ApiGatewayV2::Route").map(([, r]) => String(r.Properties.RouteKey));
  }

  /** An HTTP API request, routed by the template's route keys like API Gateway (payload format 2.0). */
  async http(method: string, url: string, options: { token?: string; body?: unknown } = {}): Promise<{ status: number; body: unknown }> {
    const { pathname } = new URL(url, "https://api.example");
    let matched: { routeKey: string; params: Record<string, string> } | undefined;
    for (const routeKey of this.httpRouteKeys()) {
      const [m, template] = routeKey.split(" ") as [string, string | undefined];
      if (m !== method || !template) continue;
      const names: string[] = [];
      const pattern = new RegExp(`^${template.replace(/\{([^}]+)\}/g, (_x, n: string) => (names.push(n), "([^/]+)"))}$`);
      const found = pattern.exec(pathname);
      if (found) matched = { routeKey, params: Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(found[i + 1] as string)])) };
    }
    if (!matched) return { status: 404, body: { message: "Not Found" } };
    const body = options.body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(options.body));
    const headers: Record<string, string> = { host: "api.example", "user-agent": "rehearsal" };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (body.length) headers["content-type"] = "application/json";
    const event: APIGatewayProxyEventV2 = buildHttpApiEvent({ method, url, headers, body, sourceIp: "203.0.113.7" }, matched.routeKey, matched.params);
    const { fn, apiId, stage } = this.routeTarget("HTTP", matched.routeKey);
    // API Gateway answers 500 when it may not invoke the integration. The source ARN names the route's path template (`{id}` included).
    if (!(await this.authorizeInvokeByApi(fn, apiId, `${stage}/${method}${matched.routeKey.split(" ")[1] ?? ""}`))) return { status: 500, body: { message: "Internal Server Error" } };
    try {
      const result = (await fn.invoke(event)) as APIGatewayProxyStructuredResultV2;
      const text = result.body ?? "";
      return { status: result.statusCode ?? 200, body: text ? (JSON.parse(text) as unknown) : undefined };
    } catch (err) {
      // API Gateway answers a function error (or timeout) with a bare 500/503.
      if (err instanceof InvocationError) return { status: err.errorName === "Sandbox.Timedout" ? 503 : 500, body: { message: `${err.errorName}: ${err.message}` } };
      throw err;
    }
  }

  /** A WebSocket route event (`$connect`, `$disconnect`, `$default`) for one connection. */
  async ws(routeKey: string, connectionId: string, extra: { queryStringParameters?: Record<string, string>; body?: string } = {}): Promise<{ statusCode: number; body?: string }> {
    const eventType = routeKey === "$connect" ? "CONNECT" : routeKey === "$disconnect" ? "DISCONNECT" : "MESSAGE";
    if (routeKey === "$connect") this.openConnections.add(connectionId);
    if (routeKey === "$disconnect") this.openConnections.delete(connectionId);
    const { fn, apiId, stage } = this.routeTarget("WEBSOCKET", routeKey);
    const event = { requestContext: { connectionId, routeKey, eventType, requestId: randomUUID(), stage, apiId, domainName: `${apiId}.execute-api.${REGION}.amazonaws.com` }, ...extra };
    if (!(await this.authorizeInvokeByApi(fn, apiId, `${stage}/${routeKey}`))) return { statusCode: 500 };
    const result = (await fn.invoke(event)) as { statusCode: number; body?: string };
    if (routeKey === "$connect" && result.statusCode !== 200) this.openConnections.delete(connectionId);
    return result;
  }

  // ---- Scheduler ---------------------------------------------------------------------------

  /** Fires a schedule as Scheduler would: its role must be allowed to invoke its target, which gets its input. */
  async fireSchedule(group: string, name: string): Promise<unknown> {
    const schedule = this.schedules.get(`${group}/${name}`);
    if (!schedule) throw new Error(`no schedule ${group}/${name}`);
    const role = resourcesOfType(this.assembly, "AWS::IAM::Role").find(([id]) => this.iam.roleArn(id) === schedule.target.RoleArn);
    if (!role) throw new Error(`schedule ${name}: its role ${schedule.target.RoleArn} is no role of the template`);
    await this.authorize(`Scheduler(${role[0]})`, role[0], "Lambda", [{ action: "lambda:InvokeFunction", resource: schedule.target.Arn }]);
    const target = this.functionByArn(schedule.target.Arn);
    if (!target) throw new Error(`schedule ${name}: target ${schedule.target.Arn} is no function of the template`);
    // ActionAfterCompletion DELETE: a one-time schedule is gone once it fired.
    if (schedule.expression.startsWith("at(")) this.schedules.delete(`${group}/${name}`);
    return target.invoke(JSON.parse(schedule.target.Input ?? "{}"));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.background]);
    await Promise.all([...this.functions.values()].map((f) => f.close()));
    // Sandboxes a failed rehearsal left running: the process groups the local provider started for it.
    for (const record of await listSandboxRecords(this.sandboxDir).catch(() => [])) {
      try {
        process.kill(-record.pgid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await new Promise<void>((resolve) => (this.dynamo ? this.dynamo.server.close(() => resolve()) : resolve()));
    rmSync(this.sandboxDir, { recursive: true, force: true });
  }
}
