/**
 * Automation runs over the real session routes and flows (flow harness: dynalite, the real ASL
 * files, the instant provider behind the fault-injecting one), with the real route handlers of
 * functions/automations: the run notifications against a real local HTTP server (the signed
 * webhook POST, its retries, a hanging receiver never holding the run's end) and the local Slack
 * Web API stand-in (through the Slack outbox); the inbound webhook trigger (HMAC, idempotency
 * key, the body in the trigger context); the webhook secret sealed at rest; a run whose session cannot start ends `failed` from the
 * flow's own failure path (`record-failure`), as in AWS, where no broadcast is observed.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runView, type AutomationRecord, type RunRecord } from "../../functions/automations/automation";
import { makeAutomationHandlers } from "../../functions/automations/automation-routes";
import { endRun, handleAutomationFired, sessionFailed, startRun } from "../../functions/automations/automation-runs";
import { ProviderError } from "../../functions/domain/errors";
import { composeAutomations, type AutomationComposition } from "../../functions/composition/automations";
import { composeSlackStore, slackWebClient } from "../../functions/composition/slack";
import { openWebhookSecret } from "../../functions/automations/webhook-secret";
import { SecretEnvelope } from "../../functions/secrets/envelope-cipher";
import { SlackOutbox } from "../../functions/slack/outbox";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { buildLambdaContext } from "../../infra/local/api-gateway-events";
import { LocalAutomationScheduler } from "../../infra/local/local-automation-scheduler";
import { settlingNotifications } from "../../functions/automations/settle-notifications";
import { capturingLogger } from "../support/capturing-logger";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, TEST_SECRETS_MASTER_KEY, type FlowHarness } from "../support/flow-harness";
import { LocalSecretKeyWrapper } from "../../functions/secrets/local-key-wrapper";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { startSlackWebApi, type SlackWebApiStandIn } from "../support/slack-web-api";
import { waitFor } from "../support/wait-for";

const TOKEN = "sbx_automation_runs_token_0123456789";
const ORG = "org-a";

/** A webhook receiver: answers each request by the next behaviour queued (200 when none). */
interface Receiver {
  url: string;
  requests: { headers: IncomingMessage["headers"]; body: string }[];
  /** `hang`: the response is held until `release()`. `drop`: the connection is destroyed. */
  next: ("drop" | "hang" | number)[];
  release(): void;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const requests: Receiver["requests"] = [];
  const next: Receiver["next"] = [];
  const held: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      requests.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      const behaviour = next.shift() ?? 200;
      if (behaviour === "drop") req.socket.destroy();
      else if (behaviour === "hang") held.push(res);
      else res.writeHead(behaviour, { "content-type": "text/plain" }).end(behaviour < 300 ? "ok" : "no");
    });
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    next,
    release: () => {
      for (const res of held.splice(0)) res.writeHead(503).end("late");
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let h: FlowHarness;
let provider: FaultInjectingProvider;
let slack: SlackWebApiStandIn;
let receiver: Receiver;
let automations: AutomationComposition;
let timers: LocalAutomationScheduler;
let handlers: ReturnType<typeof makeAutomationHandlers>;
const logger = capturingLogger();

beforeAll(async () => {
  provider = new FaultInjectingProvider(new InstantSandboxProvider({}));
  h = await startFlowHarness({ provider, agent: new ScriptedAgent() });
  await new DynamoApiTokenStore(h.table.doc, h.table.tableName).putToken(TOKEN, { userId: "user-a", orgId: ORG }, new Date());
  slack = await startSlackWebApi();
  receiver = await startReceiver();
  const outbox = new SlackOutbox(slackWebClient({ botToken: "xoxb-automation-test", apiUrl: slack.url, logger: h.httpDeps.logger, retries: 0 }), composeSlackStore(h.table.doc, h.table.tableName), () => new Date());
  timers = new LocalAutomationScheduler((event) => handleAutomationFired(automations.runDeps(h.httpDeps), event).then(() => undefined), {
    now: () => new Date(),
    onError: (err) => h.httpDeps.logger.error("automation firing failed", { error: String(err) }),
  });
  automations = composeAutomations({
    doc: h.table.doc,
    tableName: h.table.tableName,
    scheduler: timers,
    sessions: h.deps.sessions,
    prompts: h.deps.prompts,
    transcript: h.httpDeps.transcript,
    metrics: h.metrics,
    logger: logger.logger,
    now: () => new Date(),
    slack: () => Promise.resolve(outbox),
    // Retries at once: the test waits on the requests, never on the clock.
    webhookBackoffMs: [0, 0, 0],
    secretKeys: new LocalSecretKeyWrapper(TEST_SECRETS_MASTER_KEY),
  });
  handlers = makeAutomationHandlers(automations);
  // As the local runtime and the RecordFailure Lambda wire it: the flow's failure path ends the run.
  h.deps.automationRuns = { sessionFailed: (sessionId, message) => sessionFailed(automations.runDeps(h.httpDeps), sessionId, message) };
});
afterAll(async () => {
  await automations?.notifier.settled();
  await timers?.close();
  await receiver?.close();
  await slack?.close();
  await h?.close();
});

function routeEvent(method: string, routeKey: string, path: string, options: { id?: string; body?: string; headers?: Record<string, string> } = {}): APIGatewayProxyEventV2 {
  return {
    version: "2.0",
    routeKey,
    rawPath: path,
    rawQueryString: "",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...options.headers },
    ...(options.id ? { pathParameters: { id: options.id } } : {}),
    requestContext: { requestId: `req-${Math.random().toString(36).slice(2)}`, http: { method, path } },
    ...(options.body !== undefined ? { body: options.body } : {}),
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

async function call(route: keyof typeof handlers, event: APIGatewayProxyEventV2): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = (await handlers[route](h.httpDeps)(event, buildLambdaContext(route, "req"))) as APIGatewayProxyStructuredResultV2;
  return { status: res.statusCode ?? 0, body: JSON.parse(String(res.body ?? "{}")) as Record<string, unknown> };
}

/** POST /v1/automations: the record as stored and the secret the create returned (once). */
async function createAutomation(name: string, notify?: Record<string, string>): Promise<{ automation: AutomationRecord; secret: string }> {
  const res = await call(
    "CreateAutomation",
    routeEvent("POST", "POST /v1/automations", "/v1/automations", {
      body: JSON.stringify({ name, schedule: "rate(1 hour)", repos: [{ url: "https://github.com/acme/app" }], prompt: "summarise", ...(notify ? { notify } : {}) }),
    }),
  );
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const view = res.body.automation as { id: string; webhookSecret: string };
  const automation = await automations.store.get(ORG, view.id, true);
  if (!automation) throw new Error("automation not stored");
  return { automation, secret: view.webhookSecret };
}

/** A manual run started through the real session routes. */
async function startedRun(automation: AutomationRecord): Promise<RunRecord> {
  const { outcome, run } = await startRun(automations.runDeps(h.httpDeps), automation, { trigger: "manual", scheduledAt: new Date().toISOString() });
  expect(outcome).toBe("started");
  return run;
}

/** A Lambda context with `remainingMs` left. */
const lambdaContext = (remainingMs: number) => ({ ...buildLambdaContext("automation-fired", "req"), getRemainingTimeInMillis: () => remainingMs });

const sign = (secret: string, body: string) => `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;

describe("run notifications", () => {
  it("the webhook gets the run as JSON signed with the secret the create returned, retried after a 503 and a dropped connection", async () => {
    const { automation, secret } = await createAutomation("signed", { webhookUrl: receiver.url });
    const run = await startedRun(automation);
    const before = receiver.requests.length;
    receiver.next.push(503, "drop");
    const ended = await endRun(automations.runDeps(h.httpDeps), run, "succeeded", { summary: "all good" });
    expect(ended?.status).toBe("succeeded");
    await automations.notifier.settled();
    const requests = receiver.requests.slice(before);
    // 503, dropped, then delivered: three attempts of the same signed body.
    expect(requests).toHaveLength(3);
    const body = requests[2]?.body ?? "";
    expect(requests.map((r) => r.body)).toEqual([body, body, body]);
    expect(JSON.parse(body)).toEqual({ type: "automation.run.finished", automation: { id: automation.id, name: "signed" }, run: runView(ended as RunRecord) });
    for (const r of requests) {
      expect(r.headers["content-type"]).toBe("application/json");
      expect(r.headers["x-signature"]).toBe(sign(secret, body));
      expect(r.headers["x-automation-run"]).toBe(run.id);
    }
    // The secret is never in the body or logs.
    expect(body).not.toContain(secret);
    expect(logger.lines.join("\n")).not.toContain(secret);
  });

  it("a hanging or failing webhook never holds or fails the run's end", async () => {
    const { automation } = await createAutomation("hanging", { webhookUrl: receiver.url });
    const run = await startedRun(automation);
    const before = receiver.requests.length;
    receiver.next.push("hang");
    const ended = await endRun(automations.runDeps(h.httpDeps), run, "failed", { error: "boom" });
    // The run ended (and its automation was updated) while the receiver still holds the POST.
    expect(ended?.status).toBe("failed");
    await waitFor(() => receiver.requests.length, { until: (n) => n > before, timeoutMs: 30_000, message: "the webhook POST never arrived" });
    expect((await automations.store.getRun(run.automationId, run.scheduledAt, run.id))?.status).toBe("failed");
    expect((await automations.store.get(ORG, automation.id, true))?.activeRun).toBeNull();
    // Then every attempt fails (503s): given up after the retries, logged, nothing thrown.
    receiver.next.push(503, 503, 503);
    receiver.release();
    await automations.notifier.settled();
    expect(receiver.requests.length - before).toBe(4);
    expect(logger.lines.some((l) => l.includes("automation notification failed") && l.includes(run.id))).toBe(true);
  });

  it("a Lambda handler that ended a run returns only once its notifications are sent (settlingNotifications, as the three entries wear it)", async () => {
    const { automation } = await createAutomation("settling", { webhookUrl: receiver.url });
    const run = await startedRun(automation);
    const before = receiver.requests.length;
    receiver.next.push("hang");
    const handler = settlingNotifications(async () => {
      await endRun(automations.runDeps(h.httpDeps), run, "succeeded", { summary: "ok" });
      return "done";
    }, () => automations.notifier);
    let returned = false;
    const invocation = handler({}, lambdaContext(60_000)).then((r) => ((returned = true), r));
    // The POST landed and is held by the receiver: the handler has not returned.
    await waitFor(() => receiver.requests.length, { until: (n) => n > before, timeoutMs: 30_000, message: "the webhook POST never arrived" });
    expect(returned).toBe(false);
    // Answered (503, then the retry's 200): the handler returns once the notification is delivered.
    receiver.release();
    expect(await invocation).toBe("done");
    expect(receiver.requests.length - before).toBe(2);
  });

  it("...but no longer than the invocation's remaining time less 2 s", async () => {
    const { automation } = await createAutomation("capped", { webhookUrl: receiver.url });
    const run = await startedRun(automation);
    const before = receiver.requests.length;
    receiver.next.push("hang");
    const handler = settlingNotifications(async () => {
      await endRun(automations.runDeps(h.httpDeps), run, "succeeded", { summary: "ok" });
      await waitFor(() => receiver.requests.length, { until: (n) => n > before, timeoutMs: 30_000, message: "the webhook POST never arrived" });
      return "done";
    }, () => automations.notifier);
    // 2.2 s left: 200 ms for the notifications, and the receiver holds the POST until released.
    expect(await handler({}, lambdaContext(2_200))).toBe("done");
    expect(receiver.requests.length - before).toBe(1);
    receiver.release();
    await automations.notifier.settled();
  });

  it("notify.slackChannel: one chat.postMessage through the Slack outbox, keyed by the run", async () => {
    const { automation } = await createAutomation("nightly", { slackChannel: "C0AUTOMATION" });
    const run = await startedRun(automation);
    await endRun(automations.runDeps(h.httpDeps), run, "succeeded", { summary: "3 PRs merged" });
    await automations.notifier.settled();
    expect(slack.callsOf("chat.postMessage").filter((c) => c.args.channel === "C0AUTOMATION")).toEqual([
      {
        method: "chat.postMessage",
        token: "xoxb-automation-test",
        rateLimited: false,
        args: {
          channel: "C0AUTOMATION",
          text: "✅ Automation *nightly* run succeeded: 3 PRs merged",
          metadata: { event_type: "scp_outbox", event_payload: { key: `automation:${automation.id}:${run.id}` } },
        },
      },
    ]);
  });
});

describe("the webhook secret at rest", () => {
  it("is stored envelope-encrypted (never the value), bound to its automation", async () => {
    const { automation, secret } = await createAutomation("sealed");
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(SecretEnvelope.parse(automation.webhookSecret)).toMatchObject({ v: 1, alg: "AES-256-GCM" });
    expect(JSON.stringify(automation)).not.toContain(secret);
    expect(JSON.stringify(automation)).not.toContain(secret.slice(6));
    expect(await openWebhookSecret(automations.secretKeys, automation)).toBe(secret);
    // Copied to another automation's item, the envelope does not open.
    const other = await createAutomation("other");
    await expect(openWebhookSecret(automations.secretKeys, { ...other.automation, webhookSecret: automation.webhookSecret })).rejects.toThrow(/could not be decrypted/);
    expect(JSON.stringify(await automations.store.list(ORG, { limit: 100 }))).not.toContain(secret);
  });
});

describe("the inbound webhook trigger", () => {
  const webhook = (automationId: string, body: string, headers: Record<string, string>) =>
    call("AutomationWebhook", routeEvent("POST", "POST /v1/automations/{id}/webhook", `/v1/automations/${automationId}/webhook`, { id: automationId, body, headers: { authorization: "", ...headers } }));

  it("a missing or bad signature is 401 and creates nothing", async () => {
    const { automation, secret } = await createAutomation("guarded");
    const body = JSON.stringify({ idempotencyKey: "k-unsigned", ref: "main" });
    const refusals = [
      await webhook(automation.id, body, { "x-automation-org": ORG }),
      await webhook(automation.id, body, { "x-automation-org": ORG, "x-signature": sign("whsec_wrong", body) }),
      await webhook(automation.id, body, { "x-automation-org": ORG, "x-signature": sign(secret, `${body} `) }),
      await webhook(automation.id, body, { "x-automation-org": "org-other", "x-signature": sign(secret, body) }),
      await webhook(automation.id, body, { "x-signature": sign(secret, body) }),
    ];
    expect(refusals.map((r) => [r.status, (r.body.error as { code: string }).code])).toEqual(Array.from({ length: 5 }, () => [401, "unauthorized"]));
    expect((await automations.store.listRuns(automation.id, { limit: 10 })).items).toEqual([]);
    expect((await automations.store.get(ORG, automation.id, true))?.activeRun).toBeNull();
    // Nothing claimed either: the same key, signed, is a fresh run.
    const signed = await webhook(automation.id, body, { "x-automation-org": ORG, "x-signature": sign(secret, body) });
    expect(signed.status).toBe(202);
    expect(signed.body.duplicate).toBeUndefined();
  });

  it("a signed call starts a run with the body in its trigger context; the same idempotencyKey again is the same run", async () => {
    const { automation, secret } = await createAutomation("triggered");
    const payload = { idempotencyKey: "deploy-42", ref: "main", commits: [{ id: "abc123", message: "fix" }] };
    const body = JSON.stringify(payload);
    const headers = { "x-automation-org": ORG, "x-signature": sign(secret, body) };
    const first = await webhook(automation.id, body, headers);
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const run = first.body.run as { id: string; trigger: string; status: string; sessionId: string };
    expect(run).toMatchObject({ automationId: automation.id, trigger: "webhook", status: "running" });
    const again = await webhook(automation.id, body, headers);
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ run: { id: run.id, sessionId: run.sessionId }, duplicate: true });
    expect((await automations.store.listRuns(automation.id, { limit: 10 })).items.map((r) => r.id)).toEqual([run.id]);
    // The run's session: an automation session carrying the trigger context, started by the ordinary resume.
    const session = await h.session(run.sessionId);
    expect(session.clientType).toBe("automation");
    expect(session.triggerContext).toEqual({ automationId: automation.id, automationName: "triggered", runId: run.id, trigger: "webhook", scheduledAt: expect.any(String) as string, payload });
    await waitFor(() => h.session(run.sessionId), { until: (s) => s.status === "running", timeoutMs: 60_000, message: "the webhook run's session never reached running" });
    expect((await automations.store.get(ORG, automation.id, true))?.activeRun?.runId).toBe(run.id);
  });
  it("409 while a run is in progress, then a retry with the same idempotencyKey starts a run (the refused call claimed nothing)", async () => {
    const { automation, secret } = await createAutomation("busy");
    const manual = await startedRun(automation);
    const body = JSON.stringify({ idempotencyKey: "retry-after-409", ref: "main" });
    const headers = { "x-automation-org": ORG, "x-signature": sign(secret, body) };
    const refused = await webhook(automation.id, body, headers);
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect((refused.body.error as { message: string }).message).toContain(manual.id);
    await endRun(automations.runDeps(h.httpDeps), manual, "succeeded", { summary: "done" });
    const retried = await webhook(automation.id, body, headers);
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
    expect(retried.body.duplicate).toBeUndefined();
    const run = retried.body.run as { id: string; trigger: string; status: string; sessionId: string };
    expect(run).toMatchObject({ trigger: "webhook", status: "running", sessionId: expect.stringMatching(/^ses_/) as string });
    // Once started, the key is bound to that run: a third call is the same run, read through the key.
    const third = await webhook(automation.id, body, headers);
    expect(third.body).toMatchObject({ run: { id: run.id, status: "running", sessionId: run.sessionId }, duplicate: true });
    expect((await automations.store.listRuns(automation.id, { limit: 10 })).items.map((r) => r.id).sort()).toEqual([manual.id, run.id].sort());
    // Its session provisioned before the next test injects a provider fault.
    await waitFor(() => h.session(run.sessionId), { until: (s) => s.status === "running", timeoutMs: 60_000, message: "the retried run's session never reached running" });
  });

  it("a run that fails to start with an error releases its key: the retry starts a run", async () => {
    const { automation, secret } = await createAutomation("flaky start");
    const body = JSON.stringify({ idempotencyKey: "retry-after-500" });
    const headers = { "x-automation-org": ORG, "x-signature": sign(secret, body) };
    // The run's timeout cannot be armed once (the scheduler's API failing): startRun throws.
    const armTimeout = timers.armTimeout.bind(timers);
    timers.armTimeout = () => {
      timers.armTimeout = armTimeout;
      return Promise.reject(new Error("scheduler unavailable (test)"));
    };
    const failed = await webhook(automation.id, body, headers);
    expect(failed.status).toBe(500);
    expect(timers.armTimeout).toBe(armTimeout);
    // That run ended failed (a run without its timeout is never left active).
    const [first] = (await automations.store.listRuns(automation.id, { limit: 10 })).items;
    expect(first).toMatchObject({ trigger: "webhook", status: "failed", error: expect.stringContaining("timeout could not be scheduled") as string });
    const retried = await webhook(automation.id, body, headers);
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
    expect(retried.body.duplicate).toBeUndefined();
    expect(retried.body.run).toMatchObject({ trigger: "webhook", status: "running" });
    const sessionId = (retried.body.run as { sessionId: string }).sessionId;
    await waitFor(() => h.session(sessionId), { until: (s) => s.status === "running", timeoutMs: 60_000, message: "the retried run's session never reached running" });
  });
});

describe("a run whose session fails", () => {
  it("ends failed from the flow's failure path (record-failure): the streak counts, the run is no longer active", async () => {
    const { automation } = await createAutomation("doomed", { webhookUrl: receiver.url });
    provider.failNext("ensureSandbox", new ProviderError("local", "ensureSandbox", "quota exceeded", { retryable: false }));
    const run = await startedRun(automation);
    expect(run.status).toBe("running");
    const ended = await waitFor(() => automations.store.getRun(run.automationId, run.scheduledAt, run.id), {
      until: (r) => r?.status !== "running",
      timeoutMs: 60_000,
      message: "the run never ended after its session's provisioning failed",
    });
    expect(ended).toMatchObject({ status: "failed", sessionId: run.sessionId, error: expect.stringContaining("quota exceeded") as string });
    expect(ended?.error).toMatch(/^session error: Sandbox could not be started: /);
    expect((await h.session(run.sessionId ?? "")).status).toBe("error");
    // The rest of the run's end follows its conditional write: wait on it, not on the clock.
    const after = await waitFor(() => automations.store.get(ORG, automation.id, true), { until: (a) => a?.consecutiveFailures === 1, timeoutMs: 30_000, message: "the failure was never counted" });
    expect(after).toMatchObject({ activeRun: null, consecutiveFailures: 1, enabled: true });
    expect(h.metrics.recorded.some((m) => m.name === "AutomationRuns" && m.dimensions.Status === "failed")).toBe(true);
    // The notification goes out for it too.
    const notified = (r: Receiver["requests"][number]) => (JSON.parse(r.body) as { run: { id: string; status: string } }).run;
    await waitFor(() => receiver.requests.map(notified), { until: (runs) => runs.some((r) => r.id === run.id), timeoutMs: 30_000, message: "the failed run was never notified" });
    expect(receiver.requests.map(notified).find((r) => r.id === run.id)?.status).toBe("failed");
  });
});

describe("a run whose org has no credits left", () => {
  it("fails with the session create's 402 credits_exhausted: the streak counts 1, the run is notified", async () => {
    const { automation } = await createAutomation("broke", { webhookUrl: receiver.url });
    // API.md "Usage, limits and credits": a spent budget (here none at all) refuses the session create.
    await h.deps.usage.putLimits(ORG, { monthlyActiveSeconds: 0 }, new Date());
    try {
      const scheduledAt = new Date().toISOString();
      const out = await handleAutomationFired(automations.runDeps(h.httpDeps), { kind: "fire", orgId: ORG, automationId: automation.id, scheduledAt });
      expect(out.outcome).toBe("failed");
      expect(out.run).toMatchObject({ status: "failed", trigger: "schedule", scheduledAt, sessionId: null, error: expect.stringContaining("402 credits_exhausted") as string });
      const stored = await automations.store.getRun(automation.id, scheduledAt, out.run?.id ?? "");
      expect(stored?.status).toBe("failed");
      expect(await automations.store.get(ORG, automation.id, true)).toMatchObject({ consecutiveFailures: 1, enabled: true, activeRun: null });
      // Notified as failed, with the reason.
      await automations.notifier.settled();
      const notified = receiver.requests.map((r) => (JSON.parse(r.body) as { run: { id: string; status: string; error: string } }).run).find((r) => r.id === out.run?.id);
      expect(notified).toMatchObject({ status: "failed", error: expect.stringContaining("credits_exhausted") as string });
    } finally {
      await h.deps.usage.putLimits(ORG, { monthlyActiveSeconds: null }, new Date());
    }
  });
});
