/**
 * Deploy rehearsal (ARCHITECTURE.md §9): a whole session lifecycle through the synthesized
 * artifacts themselves. `cdk synth` with real bundling, then every Lambda is the built asset from
 * cdk.out run with its template's handler and environment, every state machine is the
 * synthesized definition with its substitutions (asl-validator, then aws-local-stepfunctions),
 * DynamoDB is dynalite created from the template's table, HTTP and WebSocket events are routed by
 * the template's routes, and every AWS call a function makes is checked against its role's
 * policy with the IAM simulator (support/rehearsal-world.ts).
 *
 * What the rehearsal sets over the template's environment, and why (nothing else differs):
 * - DEFAULT_SANDBOX_PROVIDER=local, SANDBOX_PROVIDERS=local: sandboxes are the local provider's
 *   real OpenCode processes (the template says modal/e2b, which cannot be reached from here);
 * - LOCAL_SANDBOX_DIR: where that provider keeps them;
 * - IDLE_SNAPSHOT_DELAY_SECONDS=1: the idle grace, so the idle check the flows arm is due now;
 * - SLACK_API_URL: Slack's Web API is a local stand-in (test/support/slack-web-api.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import { DynamoApiTokenStore, DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { sessionKeyEpochs, staticKeyring } from "../../functions/config/sandbox-keyring";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import { newApiToken } from "../../functions/domain/ids";
import { ACCOUNT, REGION, nestedStackId, synthesize, type Assembly } from "./support/assembly";
import { RehearsalWorld } from "./support/rehearsal-world";
import { rmSync } from "node:fs";
import { gitOrigin } from "../support/git-origin";
import { buildHttpApiEvent } from "../../infra/local/api-gateway-events";
import { slackSignature } from "../../functions/slack/signature";
import { startSlackWebApi, type SlackWebApiStandIn } from "../support/slack-web-api";

const ORG_SECRET_VALUE = "s3cr3t-rehearsal-value";

let assembly: Assembly;
let world: RehearsalWorld;
let token: string;
let slack: SlackWebApiStandIn;

beforeAll(async () => {
  slack = await startSlackWebApi();
  assembly = synthesize();
  world = new RehearsalWorld(assembly, {
    overrides: (sandboxDir) => ({
      DEFAULT_SANDBOX_PROVIDER: "local",
      SANDBOX_PROVIDERS: "local",
      LOCAL_SANDBOX_DIR: sandboxDir,
      IDLE_SNAPSHOT_DELAY_SECONDS: "1",
      SLACK_API_URL: slack.url,
    }),
  });
  await world.start();
  // The operator's first API token (what `npm run token:create` writes), straight into the table.
  token = newApiToken();
  const doc = DynamoDBDocumentClient.from(world.dynamoClient());
  await new DynamoApiTokenStore(doc, world.tableName).putToken(token, { userId: "rehearsal-user", orgId: "rehearsal-org", role: "admin", name: "rehearsal" }, new Date());
});

afterAll(async () => {
  if (world) {
    // Whatever is still running is stopped the way the stack stops it (the stop flow), then the containers go.
    await world.settle().catch(() => undefined);
    await world.close();
  }
  assembly?.dispose();
  await slack?.close();
});

interface SessionView {
  id: string;
  status: string;
  sandboxId: string | null;
  pauseReason?: string | null;
  snapshotId?: string | null;
}

async function session(id: string): Promise<SessionView> {
  const res = await world.http("GET", `/v1/sessions/${id}`, { token });
  expect(res.status).toBe(200);
  return (res.body as { session: SessionView }).session;
}

async function storedSession(id: string): Promise<Record<string, unknown>> {
  const doc = DynamoDBDocumentClient.from(world.dynamoClient());
  const out = await doc.send(new GetCommand({ TableName: world.tableName, Key: { PK: `SESSION#${id}`, SK: "SESSION" } }));
  return (out.Item ?? {}) as Record<string, unknown>;
}

/** The session's status, with what went wrong when it is not the expected one (denied calls, failed executions, the audit trail). */
async function expectStatus(id: string, status: string): Promise<SessionView> {
  const s = await session(id);
  if (s.status !== status) {
    const events = (await world.http("GET", `/v1/sessions/${id}/events`, { token })).body as { items: { flow: string; outcome: string; message: string | null }[] };
    const why = {
      denied: world.denied.map((c) => `${c.function}: ${c.action} on ${c.resource}`),
      failedExecutions: failedExecutions(),
      events: events.items.map((e) => `${e.flow} ${e.outcome}${e.message ? `: ${e.message}` : ""}`),
    };
    expect.fail(`session ${id} is ${s.status}, expected ${status}: ${JSON.stringify(why, null, 2)}`);
  }
  return s;
}

function failedExecutions(): string[] {
  return [...world.executions.values()].filter((e) => e.status === "FAILED").map((e) => `${e.machine} ${e.name}: ${e.error}`);
}

describe("deploy rehearsal: the synthesized stack runs a whole lifecycle", () => {
  let id: string;

  it("every state machine definition validates (asl-validator) and binds each Task to a function of the template", () => {
    // RehearsalWorld.start refuses a definition asl-validator rejects, a substitution left unresolved, or a Task bound to no function.
    const names = [...world.machines.values()].map((m) => m.name);
    expect(names).toEqual(expect.arrayContaining(["ensure-runtime", "pause", "snapshot", "stop", "idle-snapshot", "migrate"].map((f) => `${assembly.stackName}-${f}`)));
  });

  it("every function's asset imports with its template environment (no Runtime.ImportModuleError at cold start)", async () => {
    const pools = [...world.functions.values()];
    expect(pools.length).toBeGreaterThan(30);
    // Four at a time, each container stopped once ready (forty Node processes at once would crowd a shared machine).
    for (let i = 0; i < pools.length; i += 4) {
      await Promise.all(
        pools.slice(i, i + 4).map(async (p) => {
          await p.coldStart();
          await p.close();
        }),
      );
    }
  });

  it("health answers through its route's function", async () => {
    const res = await world.http("GET", "/v1/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true });
  });

  it("org secrets: the value is encrypted under the stack's KMS key with the org and name as context", async () => {
    const put = await world.http("PUT", "/v1/secrets/REHEARSAL_KEY", { token, body: { value: ORG_SECRET_VALUE } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(JSON.stringify(put.body)).not.toContain(ORG_SECRET_VALUE);
    expect(world.calls.filter((c) => c.action === "kms:Encrypt")).toHaveLength(1);
    const got = await world.http("GET", "/v1/secrets/REHEARSAL_KEY", { token });
    expect(got.status).toBe(200);
    expect(JSON.stringify(got.body)).not.toContain(ORG_SECRET_VALUE);
  });

  it("a provision that fails (the model key's secret was deleted) puts the session in error with a message for people, not the Lambda error payload", async () => {
    const created = await world.http("POST", "/v1/sessions", { token, body: { title: "doomed", model: { id: "anthropic/claude-sonnet-4-5", apiKeySecret: "REHEARSAL_KEY" } } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const doomed = (created.body as { session: SessionView }).session.id;
    expect((await world.http("DELETE", "/v1/secrets/REHEARSAL_KEY", { token })).status).toBe(204);
    expect((await world.http("POST", `/v1/sessions/${doomed}/resume`, { token })).status).toBe(202);
    await world.settle();
    const s = (await expectStatus(doomed, "error")) as SessionView & { errorMessage?: string };
    expect(s.errorMessage).toContain('"REHEARSAL_KEY" no longer exists');
    // Step Functions hands the step the runtime's error payload (JSON with the stack trace) as Cause.
    expect(s.errorMessage).not.toMatch(/errorType|trace|index\.mjs/);
    expect(s.sandboxId).toBeNull();
  });

  it("create, then resume provisions a sandbox through the ensure-runtime state machine", async () => {
    const created = await world.http("POST", "/v1/sessions", { token, body: { title: "rehearsal" } });
    expect(created.status).toBe(201);
    id = (created.body as { session: SessionView }).session.id;
    const resumed = await world.http("POST", `/v1/sessions/${id}/resume`, { token });
    expect(resumed.status).toBe(202);
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    const s = await expectStatus(id, "running");
    expect(s.sandboxId).toMatch(/^lsb_/);
    // The committed flow nudged the relays through the template's queue (issue 15), as its role allows.
    const nudges = [...world.queued.values()].flat().map((m) => JSON.parse(m.Body) as { sessionId: string });
    expect(nudges).toContainEqual({ sessionId: id });
  });

  it("the idle check the flow armed fires through Scheduler's role into schedule-fired (not idle: no relay watches the agent)", async () => {
    const armed = [...world.schedules.values()].find((s) => s.name.includes(id) && JSON.parse(s.target.Input ?? "{}").purpose === "idle-check");
    expect(armed, `an idle-check schedule for ${id} among ${[...world.schedules.keys()].join(", ")}`).toBeDefined();
    if (!armed) return;
    expect(await world.fireSchedule(armed.group, armed.name)).toEqual({ started: null });
    await world.settle();
    await expectStatus(id, "running");
  });

  it("the template's sweeper schedule runs the sweeper, which snapshots the unwatched idle session (idle-snapshot flow)", async () => {
    const sweeper = [...world.schedules.values()].find((s) => s.expression.startsWith("rate(") && s.name.startsWith("SweeperSchedule"));
    expect(sweeper).toBeDefined();
    if (!sweeper) return;
    await world.fireSchedule(sweeper.group, sweeper.name);
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    expect([...world.executions.values()].map((e) => e.name)).toContainEqual(expect.stringMatching(/^idle-snapshot-/));
    const s = await expectStatus(id, "paused");
    expect(s.pauseReason).toBe("orphaned");
    expect(s.sandboxId).toBeNull();
  });

  it("resume restores it, pause snapshots and terminates the sandbox", async () => {
    expect((await world.http("POST", `/v1/sessions/${id}/resume`, { token })).status).toBe(202);
    await world.settle();
    await expectStatus(id, "running");
    const res = await world.http("POST", `/v1/sessions/${id}/pause`, { token });
    expect(res.status).toBe(202);
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    const s = await expectStatus(id, "paused");
    expect(s.pauseReason).toBe("user");
    expect(s.snapshotId).toBeTruthy();
  });

  it("a prompt wakes the paused session", async () => {
    const res = await world.http("POST", `/v1/sessions/${id}/prompts`, { token, body: { content: "wake up" } });
    expect(res.status).toBe(202);
    expect((res.body as { delivery: string }).delivery).toBe("woken");
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    await expectStatus(id, "running");
  });

  it("a prompt to the running session is accepted and queued for the relay (the Fargate relay is not part of the rehearsal)", async () => {
    const res = await world.http("POST", `/v1/sessions/${id}/prompts`, { token, body: { content: "hello from the rehearsal" } });
    expect(res.status).toBe(202);
    expect((res.body as { prompt: { id: string } }).prompt.id).toMatch(/^prm_/);
    expect((res.body as { delivery: string }).delivery).toBe("waiting");
  });

  it("a WebSocket client connects ($connect, send-init through Lambda Invoke), pings ($default) and leaves ($disconnect)", async () => {
    const connectionId = "rehearsalConn1=";
    const connected = await world.ws("$connect", connectionId, { queryStringParameters: { sessionId: id, token } });
    expect(connected.statusCode).toBe(200);
    await world.settle();
    expect(world.pushed.get(connectionId)?.[0]).toMatchObject({ type: "init" });
    expect((await world.ws("$default", connectionId, { body: JSON.stringify({ type: "ping" }) })).statusCode).toBe(200);
    expect(world.pushed.get(connectionId)?.map((m) => (m as { type: string }).type)).toContain("pong");
    expect((await world.ws("$disconnect", connectionId)).statusCode).toBe(200);
    await world.settle();
    expect(failedExecutions()).toEqual([]);
  });

  it("the agent's tools (issue 25 §4): a sandbox-signed save_snapshot runs the snapshot state machine, its status names the snapshot, a save, an env request and a verification (pushed to a client) land", async () => {
    const doc = DynamoDBDocumentClient.from(world.dynamoClient());
    const masterArn = world.fn("SandboxAgentTools").spec.environment.SANDBOX_ACCESS_KEY_SECRET_ARN ?? "";
    const keyring = staticKeyring(world.secretValues.get(masterArn) ?? "", sessionKeyEpochs(new DynamoSessionStore(doc, world.tableName)));
    const now = Math.floor(Date.now() / 1000);
    const sandbox = mintAccessToken(await keyring.sandboxKey(id), { sid: id, iat: now, exp: now + 300 });
    const started = await world.http("POST", "/v1/sandbox/snapshots", { token: sandbox, body: { message: "rehearsal" } });
    expect(started.status).toBe(202);
    const execution = (started.body as { snapshot: { execution: string } }).snapshot.execution;
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    const status = await world.http("GET", `/v1/sandbox/snapshots/${execution}`, { token: sandbox });
    expect(status.body).toMatchObject({ snapshot: { execution, status: "committed", snapshotId: (await storedSession(id)).snapshotId } });

    const saved = await world.http("PUT", "/v1/sandbox/service-commands", { token: sandbox, body: { commands: [{ name: "web", command: "npm run dev" }] } });
    expect(saved.status).toBe(200);
    expect((await storedSession(id)).serviceCommands).toEqual([{ name: "web", command: "npm run dev" }]);

    const connectionId = "rehearsalConn2=";
    expect((await world.ws("$connect", connectionId, { queryStringParameters: { sessionId: id, token } })).statusCode).toBe(200);
    await world.settle();
    const asked = await world.http("POST", "/v1/sandbox/env-requests", { token: sandbox, body: { keys: [{ name: "STRIPE_KEY" }] } });
    expect(asked.status).toBe(202);
    expect(world.pushed.get(connectionId)?.map((m) => (m as { type: string }).type)).toContain("env.requested");
    const report = { folder: "evidence", summary: "rehearsed", files: [{ path: "test.log", bytes: 2 }], truncated: false, services: [] };
    expect((await world.http("POST", "/v1/sandbox/verifications", { token: sandbox, body: report })).status).toBe(202);
    expect(world.pushed.get(connectionId)?.map((m) => (m as { type: string }).type)).toContain("verification.reported");
    expect((await world.ws("$disconnect", connectionId)).statusCode).toBe(200);
    await world.settle();
  });

  it("usage and credits: the Org routes set a budget, and the template's metering schedule meters the running session and pauses it with credit_limit (pause flow)", async () => {
    const put = await world.http("PUT", "/v1/org/limits", { token, body: { monthlyActiveSeconds: 0 } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const metering = [...world.schedules.values()].find((s) => s.name.startsWith("MeteringSchedule"));
    expect(metering?.expression).toBe("rate(1 minute)");
    if (!metering) return;
    await world.fireSchedule(metering.group, metering.name);
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    expect([...world.executions.values()].map((e) => e.name)).toContainEqual(expect.stringMatching(/^pause-/));
    const s = await expectStatus(id, "paused");
    expect(s.pauseReason).toBe("credit_limit");
    const usage = await world.http("GET", "/v1/usage", { token });
    expect(usage.status, JSON.stringify(usage.body)).toBe(200);
    expect((usage.body as { total: number }).total).toBeGreaterThan(0);
    const org = await world.http("GET", "/v1/org", { token });
    expect((org.body as { org: { limits: { monthlyActiveSeconds: number } } }).org.limits.monthlyActiveSeconds).toBe(0);
    expect((await world.http("POST", "/v1/sessions", { token, body: { title: "over budget" } })).status).toBe(402);
    expect((await world.http("PUT", "/v1/org/limits", { token, body: { monthlyActiveSeconds: null } })).status).toBe(200);
  });

  it("stop ends the session", async () => {
    const res = await world.http("DELETE", `/v1/sessions/${id}`, { token });
    expect(res.status).toBe(202);
    await world.settle();
    expect(failedExecutions()).toEqual([]);
    await expectStatus(id, "stopped");
    expect((await storedSession(id)).status).toBe("stopped");
  });

  it("the template's snapshot builder builds a prebuild (route -> StartExecution -> builder steps), and a new session starts from its snapshot", async () => {
    const origin = gitOrigin("rehearsal-prebuild-");
    try {
      const repo = await world.http("POST", "/v1/repos", { token, body: { url: origin.url, setupCommands: ["echo built > .setup-marker"] } });
      expect(repo.status, JSON.stringify(repo.body)).toBe(201);
      const repoId = (repo.body as { repo: { id: string } }).repo.id;
      const prebuild = await world.http("POST", "/v1/prebuilds", { token, body: { name: "rehearsal", repos: [{ repoId }] } });
      expect(prebuild.status, JSON.stringify(prebuild.body)).toBe(201);
      const prebuildId = (prebuild.body as { prebuild: { id: string } }).prebuild.id;
      const started = await world.http("POST", `/v1/prebuilds/${prebuildId}/builds`, { token });
      expect(started.status, JSON.stringify(started.body)).toBe(202);
      await world.settle();
      expect(failedExecutions()).toEqual([]);
      const view = (await world.http("GET", `/v1/prebuilds/${prebuildId}`, { token })).body as { prebuild: { snapshot: { id: string } | null; latestBuild: { status: string; error: string | null } } };
      expect(view.prebuild.latestBuild, JSON.stringify({ view, denied: world.denied.map((c) => `${c.function}: ${c.action}`) })).toMatchObject({ status: "succeeded" });
      expect(view.prebuild.snapshot?.id).toMatch(/^lsnap_/);
      const created = await world.http("POST", "/v1/sessions", { token, body: { prebuildId } });
      expect(created.status).toBe(201);
      const sid = (created.body as { session: SessionView }).session.id;
      expect((await world.http("POST", `/v1/sessions/${sid}/resume`, { token })).status).toBe(202);
      await world.settle();
      await expectStatus(sid, "running");
      expect((await storedSession(sid)).snapshotLayer).toBe("prebuild");
      expect((await world.http("DELETE", `/v1/sessions/${sid}`, { token })).status).toBe(202);
      await world.settle();
      await expectStatus(sid, "stopped");
    } finally {
      rmSync(origin.dir, { recursive: true, force: true });
    }
  });

  it("a client of an `ask` session: send-init reads the sandbox key and asks the agent for its pending permission questions (issue 25 §3)", async () => {
    const created = await world.http("POST", "/v1/sessions", { token, body: { permissionPolicy: "ask" } });
    expect(created.status).toBe(201);
    const sid = (created.body as { session: SessionView }).session.id;
    expect((await world.http("POST", `/v1/sessions/${sid}/resume`, { token })).status).toBe(202);
    await world.settle();
    await expectStatus(sid, "running");
    const before = world.calls.length;
    const connectionId = "rehearsalConn3=";
    expect((await world.ws("$connect", connectionId, { queryStringParameters: { sessionId: sid, token } })).statusCode).toBe(200);
    await world.settle();
    expect(world.pushed.get(connectionId)?.map((m) => (m as { type: string }).type)).toEqual(["init", "status"]);
    const sendInit = world.fn("SendInit").spec.logicalId;
    const sendInitCalls = world.calls.slice(before).filter((c) => c.function === sendInit);
    expect(sendInitCalls.map((c) => c.action)).toContain("secretsmanager:GetSecretValue");
    // A running session's relay is told of the new client (issue 25: it catches the client up with a turn in progress).
    expect(sendInitCalls.map((c) => c.action)).toContain("sqs:SendMessage");
    expect(world.denied.filter((c) => c.function === sendInit)).toEqual([]);
    // The agent answered (no pending question: nothing was prompted).
    expect(world.logs.filter((l) => l.line.includes("pending permissions could not be listed"))).toEqual([]);
    expect((await world.ws("$disconnect", connectionId)).statusCode).toBe(200);
    expect((await world.http("DELETE", `/v1/sessions/${sid}`, { token })).status).toBe(202);
    await world.settle();
    await expectStatus(sid, "stopped");
  });

  it("every AWS call every function made is allowed by its role (IAM simulator)", () => {
    const denied = world.denied.map((c) => `${c.function}: ${c.action} on ${c.resource} (${c.detail})`);
    expect(denied).toEqual([]);
    // Every kind of call the lifecycle makes was seen (the check is not vacuous).
    const actions = new Set(world.calls.map((c) => c.action));
    expect(world.calls.filter((c) => c.function.startsWith("ApiGateway(")).length).toBeGreaterThan(0);
    for (const action of ["dynamodb:GetItem", "dynamodb:Query", "states:StartExecution", "lambda:InvokeFunction", "scheduler:CreateSchedule", "iam:PassRole", "secretsmanager:GetSecretValue", "kms:Encrypt", "execute-api:ManageConnections", "sqs:SendMessage"]) {
      expect(actions, action).toContain(action);
    }
  });

  it("the IAM check denies what a role does not grant (the simulator, not a matcher that allows everything)", async () => {
    const health = world.fn("Health").spec;
    const table = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${world.tableName}`;
    expect((await world.iam.check(health.roleLogicalId, { action: "dynamodb:GetItem", resource: table })).allowed).toBe(false);
    expect((await world.iam.check(world.fn("GetSession").spec.roleLogicalId, { action: "dynamodb:GetItem", resource: table })).allowed).toBe(true);
    expect((await world.iam.check(world.fn("GetSession").spec.roleLogicalId, { action: "dynamodb:PutItem", resource: table })).allowed).toBe(false);
    // kms:Encrypt only with the org and name as encryption context.
    const putSecret = world.fn("PutSecret").spec;
    const keyArn = putSecret.environment.SECRETS_KMS_KEY_ARN ?? "";
    const context = { "kms:EncryptionContextKeys": ["orgId", "name"], "kms:EncryptionContext:orgId": "o", "kms:EncryptionContext:name": "n" };
    expect((await world.iam.check(putSecret.roleLogicalId, { action: "kms:Encrypt", resource: keyArn, context })).allowed).toBe(true);
    expect((await world.iam.check(putSecret.roleLogicalId, { action: "kms:Encrypt", resource: keyArn, context: { "kms:EncryptionContextKeys": ["orgId"], "kms:EncryptionContext:orgId": "o" } })).allowed).toBe(false);
    expect((await world.iam.check(putSecret.roleLogicalId, { action: "kms:Decrypt", resource: keyArn, context })).allowed).toBe(false);
    // API Gateway may invoke a route's function only for that route (its AWS::Lambda::Permission's SourceArn).
    const api = (world.calls.find((c) => c.function.startsWith("ApiGateway(") && c.resource.startsWith(health.arn))?.resource ?? "").split(" from ")[1] ?? "";
    expect(api).toMatch(/\/GET\/v1\/health$/);
    expect((await world.iam.checkInvoke(health.arn, "apigateway.amazonaws.com", api)).allowed).toBe(true);
    expect((await world.iam.checkInvoke(health.arn, "apigateway.amazonaws.com", api.replace(/v1\/health$/, "v1/sessions"))).allowed).toBe(false);
  });

  it("no secret value reaches a log line", () => {
    expect(world.logs.length).toBeGreaterThan(0);
    for (const value of [...world.secretValues.values(), ORG_SECRET_VALUE]) {
      const leaked = world.logs.filter((l) => l.line.includes(value)).map((l) => l.function);
      expect(leaked).toEqual([]);
    }
  });
});

describe("deploy rehearsal: Slack's nested stack, each function under its own role", () => {
  const SIGNING = "rehearsal-signing-secret";
  const slackCalls = () => world.calls.filter((c) => ["SlackAck", "SlackWorker", "SlackWorkspace"].some((p) => c.function.startsWith(`${p}Function`)));
  let threadTs: string;
  let sessionId: string;

  it("the workspace route binds the team; a signed app_mention goes ack -> queue -> worker, which starts a session (ensure-runtime flow) in its own thread", async () => {
    const ack = world.fn("SlackAck");
    const worker = world.fn("SlackWorker");
    // The operator fills in the Slack secret (README "Slack").
    const secretArn = ack.spec.environment.SLACK_SECRET_ARN ?? "";
    expect(worker.spec.environment.SLACK_SECRET_ARN).toBe(secretArn);
    world.secretValues.set(secretArn, JSON.stringify({ SLACK_SIGNING_SECRET: SIGNING, SLACK_BOT_TOKEN: "xoxb-rehearsal" }));

    const bind = Buffer.from(JSON.stringify({ teamId: "TREHEARSAL" }));
    const bound = (await world.fn("SlackWorkspace").invoke(buildHttpApiEvent({ method: "PUT", url: "/v1/slack/workspace", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: bind, sourceIp: "203.0.113.7" }, "PUT /v1/slack/workspace", {}))) as { statusCode: number; body: string };
    expect(bound.statusCode, bound.body).toBe(200);

    const origin = gitOrigin("rehearsal-slack-");
    try {
      const body = JSON.stringify({ type: "event_callback", team_id: "TREHEARSAL", event_id: "EvRehearsal1", event: { type: "app_mention", user: "UREHEARSAL", text: `<@UBOT> ${origin.url} say hello`, channel: "CREHEARSAL", ts: "1700000000.000100" } });
      const queueUrl = ack.spec.environment.SLACK_QUEUE_URL ?? "";
      // The lifecycle above forwarded its statuses to this queue already (web sessions: the worker posts nothing for those).
      const queuedBefore = world.queued.get(queueUrl)?.length ?? 0;
      const ts = String(Math.floor(Date.now() / 1000));
      const headers = { "content-type": "application/json", "x-slack-request-timestamp": ts, "x-slack-signature": slackSignature(SIGNING, ts, body) };
      const answered = (await ack.invoke(buildHttpApiEvent({ method: "POST", url: "/slack/events", headers, body: Buffer.from(body), sourceIp: "203.0.113.9" }, "POST /slack/events", {}))) as { statusCode: number };
      expect(answered.statusCode).toBe(200);
      expect(world.queued.get(queueUrl)).toHaveLength(queuedBefore + 1);
      expect(JSON.parse(world.queued.get(queueUrl)?.at(-1)?.Body ?? "{}")).toMatchObject({ kind: "event", key: "event:EvRehearsal1" });

      while ((world.queued.get(queueUrl) ?? []).length) expect(await world.deliverQueue(queueUrl, worker)).toEqual([]);
      expect(slack.callsOf("chat.postMessage").filter((c) => !String(c.args.text).includes("say hello") && !String(c.args.text).startsWith("Status:"))).toEqual([]);
      const parent = slack.callsOf("chat.postMessage").find((c) => String(c.args.text).includes("say hello"));
      expect(parent?.args).toMatchObject({ channel: "CREHEARSAL", thread_ts: "1700000000.000100" });
      threadTs = "1700000000.000100";
      const started = world.calls.find((c) => c.function === worker.spec.logicalId && c.action === "states:StartExecution");
      expect(started?.allowed, JSON.stringify(world.denied)).toBe(true);
      // The status line's buttons carry the session id.
      const statusLine = slack.callsOf("chat.postMessage").find((c) => c.args.thread_ts === threadTs && String(c.args.text).startsWith("Status:"));
      sessionId = /ses_[A-Za-z0-9]+/.exec(JSON.stringify(statusLine?.args ?? {}))?.[0] ?? "";
      expect(sessionId).not.toBe("");
      await world.settle();
      await expectStatus(sessionId, "running");
    } finally {
      rmSync(origin.dir, { recursive: true, force: true });
    }
  });

  it("the flow steps forward their statuses to the Slack queue under their roles; the worker posts them in the thread once", async () => {
    const worker = world.fn("SlackWorker");
    const queueUrl = world.fn("SlackAck").spec.environment.SLACK_QUEUE_URL ?? "";
    for (const step of ["BeginStep", "CommitStep", "FinishStep", "RecordFailureStep"]) expect(world.fn(step).spec.environment.SLACK_QUEUE_URL, step).toBe(queueUrl);
    // Commit runs Finish in process (issue 15): it is the one that broadcasts a committed flow's status.
    // The lifecycle so far forwarded statuses (web sessions' too: the worker posts nothing for those).
    const senders = new Set(world.calls.filter((c) => c.action === "sqs:SendMessage").map((c) => c.function.replace(/Function[0-9A-F]+$/, "")));
    expect([...senders].sort()).toEqual(expect.arrayContaining(["BeginStep", "CommitStep", "SlackAck"]));
    const pause = await world.http("POST", `/v1/sessions/${sessionId}/pause`, { token });
    expect(pause.status).toBe(202);
    await world.settle();
    // (The Slack start's initial prompt waits for a relay, which the rehearsal has not: the pause wakes the session again.)
    const events = (await world.http("GET", `/v1/sessions/${sessionId}/events`, { token })).body as { items: { flow: string; outcome: string }[] };
    expect(events.items.map((e) => `${e.flow} ${e.outcome}`)).toContain("pause committed");
    const forwarded = (world.queued.get(queueUrl) ?? []).map((m) => JSON.parse(m.Body) as { kind: string; body: string });
    expect(forwarded.filter((d) => d.kind === "status" && d.body.includes(sessionId)).length).toBeGreaterThan(0);
    const redelivery = [...(world.queued.get(queueUrl) ?? [])];
    while ((world.queued.get(queueUrl) ?? []).length) expect(await world.deliverQueue(queueUrl, worker)).toEqual([]);
    const paused = () => slack.callsOf("chat.postMessage").filter((c) => c.args.thread_ts === threadTs && String(c.args.text).startsWith("Paused"));
    expect(paused()).toHaveLength(1);
    // SQS delivers at least once: the same messages again post nothing new.
    world.queued.set(queueUrl, redelivery);
    while ((world.queued.get(queueUrl) ?? []).length) expect(await world.deliverQueue(queueUrl, worker)).toEqual([]);
    expect(paused()).toHaveLength(1);
  });

  it("every call the Slack functions made is allowed by their roles, and the ack's role writes only delivery records", async () => {
    const calls = slackCalls();
    expect(calls.filter((c) => !c.allowed).map((c) => `${c.function}: ${c.action} on ${c.resource} (${c.detail})`)).toEqual([]);
    const actions = (prefix: string) => new Set(calls.filter((c) => c.function.startsWith(`${prefix}Function`)).map((c) => c.action));
    expect([...actions("SlackAck")].sort()).toEqual(["dynamodb:PutItem", "secretsmanager:GetSecretValue", "sqs:SendMessage"]);
    for (const action of ["secretsmanager:GetSecretValue", "dynamodb:GetItem", "dynamodb:PutItem", "states:StartExecution", "sqs:ReceiveMessage", "sqs:DeleteMessage"]) expect(actions("SlackWorker"), action).toContain(action);
    expect(world.denied.filter((c) => c.action === "sqs:SendMessage")).toEqual([]);
    const ack = world.fn("SlackAck");
    const table = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${world.tableName}`;
    const iam = world.iamOf(ack);
    expect((await iam.check(ack.spec.roleLogicalId, { action: "dynamodb:PutItem", resource: table, context: { "dynamodb:LeadingKeys": ["SLACKDELIVERY#event:Ev1"] } })).allowed).toBe(true);
    expect((await iam.check(ack.spec.roleLogicalId, { action: "dynamodb:PutItem", resource: table, context: { "dynamodb:LeadingKeys": ["SESSION#ses_x"] } })).allowed).toBe(false);
    expect((await iam.check(ack.spec.roleLogicalId, { action: "states:StartExecution", resource: `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${assembly.stackName}-stop` })).allowed).toBe(false);
  });
});

describe("deploy rehearsal: the automations' nested stack, each function under its own role", () => {
  const automationCalls = () => world.calls.filter((c) => ["AutomationsFunction", "AutomationFiredFunction"].some((p) => c.function.startsWith(p)));

  it("the route creates an automation and its schedule in the automations group; Scheduler fires automation-fired, which records the run, starts its session and arms its timeout", async () => {
    const routes = world.fn("Automations");
    const body = Buffer.from(JSON.stringify({ name: "rehearsal", schedule: "rate(1 hour)", timezone: "Europe/Berlin", repos: [], prompt: "say hello" }));
    const created = (await routes.invoke(buildHttpApiEvent({ method: "POST", url: "/v1/automations", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body, sourceIp: "203.0.113.7" }, "POST /v1/automations", {}))) as { statusCode: number; body: string };
    expect(created.statusCode, created.body).toBe(201);
    const id = (JSON.parse(created.body) as { automation: { id: string } }).automation.id;
    const group = `${assembly.stackName}-automations`;
    const schedule = world.schedules.get(`${group}/automation-${id}`);
    expect(schedule?.expression).toBe("rate(1 hour)");
    // What Scheduler does: as the schedule's role (in the nested template), invoke the target with
    // the input, its context attribute substituted.
    const fired = world.fn("AutomationFired");
    const nestedResources = assembly.nested.get(nestedStackId(assembly, "Automations"))?.resources ?? {};
    const schedulerRole = Object.entries(nestedResources).find(([, r]) => r.Type === "AWS::IAM::Role" && JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes("scheduler.amazonaws.com"))?.[0] ?? "";
    expect(schedule?.target.RoleArn).toContain(schedulerRole);
    expect(schedule?.target.Arn).toBe(fired.spec.environment.AUTOMATION_FIRED_ARN);
    expect((await world.iamOf(fired).check(schedulerRole, { action: "lambda:InvokeFunction", resource: schedule?.target.Arn ?? "" })).allowed).toBe(true);
    expect((await world.iamOf(fired).check(schedulerRole, { action: "lambda:InvokeFunction", resource: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${assembly.stackName}-schedule-fired` })).allowed).toBe(false);
    const scheduledAt = new Date().toISOString();
    await fired.invoke(JSON.parse((schedule?.target.Input ?? "{}").replace("<aws.scheduler.scheduled-time>", scheduledAt)));
    await world.settle();
    const listed = (await routes.invoke(buildHttpApiEvent({ method: "GET", url: `/v1/automations/${id}/runs`, headers: { authorization: `Bearer ${token}` }, body: Buffer.alloc(0), sourceIp: "203.0.113.7" }, "GET /v1/automations/{id}/runs", { id }))) as { statusCode: number; body: string };
    expect(listed.statusCode, listed.body).toBe(200);
    const runs = (JSON.parse(listed.body) as { items: { id: string; status: string; sessionId: string | null; scheduledAt: string }[] }).items;
    expect(runs).toHaveLength(1);
    expect(runs[0]?.scheduledAt).toBe(scheduledAt);
    expect(runs[0]?.sessionId, JSON.stringify(runs)).toMatch(/^ses_/);
    expect(world.schedules.has(`${group}/run-timeout-${runs[0]?.id}`)).toBe(true);
  });

  it("every call the automation functions made is allowed by their roles", () => {
    const calls = automationCalls();
    expect(calls.filter((c) => !c.allowed).map((c) => `${c.function}: ${c.action} on ${c.resource} (${c.detail})`)).toEqual([]);
    const actions = new Set(calls.map((c) => c.action));
    for (const action of ["scheduler:CreateSchedule", "iam:PassRole", "dynamodb:PutItem", "states:StartExecution"]) expect(actions, action).toContain(action);
  });
});

describe("deploy rehearsal: the API document's nested stack", () => {
  it("GET /v1/openapi.json answers the document of the deployed routes, unauthenticated, under its own role", async () => {
    const docs = world.fn("OpenApiDocument");
    const res = (await docs.invoke(buildHttpApiEvent({ method: "GET", url: "/v1/openapi.json", headers: {}, body: Buffer.alloc(0), sourceIp: "203.0.113.8" }, "GET /v1/openapi.json", {}))) as { statusCode: number; body: string };
    expect(res.statusCode, res.body).toBe(200);
    const doc = JSON.parse(res.body) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/sessions", "/v1/sessions/{id}/prompts", "/v1/slack/workspace", "/v1/openapi.json"]));
    const calls = world.calls.filter((c) => c.function.startsWith("OpenApiDocumentFunction"));
    expect(calls.filter((c) => !c.allowed).map((c) => `${c.action} on ${c.resource}`)).toEqual([]);
  });
});
