/**
 * `/v1/automations` (API.md "Automations"): definitions CRUD, run now, run history, and the
 * inbound webhook trigger. Served by one route-group function in AWS (infra/automations-stack.ts,
 * functions/automations/routes-entry.ts) and beside the route table locally. Validation at the
 * door, each error a 400 naming the field: the schedule (EventBridge Scheduler's syntax, the
 * minimum interval AUTOMATION_MIN_INTERVAL_SECONDS), the IANA timezone, the repos and prompt by
 * the session create's own rules (`CreateSessionBody`: what a run's session will be checked
 * against), an enabled provider. An invalid request changes nothing; a create whose schedule
 * cannot be written is undone.
 */
import { randomBytes } from "node:crypto";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { timingSafeEqual } from "node:crypto";
import * as z from "zod";
import { ConflictError, NotFoundError, ValidationError } from "../domain/errors";
import { describeZodError, httpRoute, type HttpDeps, type HttpHandler } from "../http/http-handler";
import { CreateSessionBody } from "../contract/requests";
import { requirePrincipal } from "../http/session-access";
import type { AutomationScheduler, AutomationStore, WebhookKeyRun } from "../ports/automations";
import {
  CreateAutomationBody,
  PatchAutomationBody,
  automationView,
  runView,
  type AutomationRecord,
} from "./automation";
import { currentRun, startRun, type AutomationRunDeps } from "./automation-runs";
import { webhookSignature } from "./run-notifier";
import { newWebhookSecret, openWebhookSecret, sealWebhookSecret } from "./webhook-secret";
import type { SecretKeyWrapper } from "../ports/secret-key-wrapper";
import { ScheduleError, nextRunAt, parseSchedule, validateSchedule } from "./schedule-expression";

import { AUTOMATION_ROUTES, type AutomationRouteId } from "./route-table";

export { AUTOMATION_ROUTES, type AutomationRouteId };

/** What the routes need beyond HttpDeps: built per runtime (functions/composition/automations.ts). */
export type AutomationParts = Omit<AutomationRunDeps, "api"> & { runDeps: (http: HttpDeps) => AutomationRunDeps; store: AutomationStore; scheduler: AutomationScheduler; secretKeys: SecretKeyWrapper };

const IdParams = z.object({ id: z.string().regex(/^aut_[A-Za-z0-9]{8,64}$/, "must be an automation id (aut_...)") });
const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20), cursor: z.string().min(1).max(2048).optional() }).strict();

/** The repos and prompt, checked by the session create's own schema (`body.repos...`, `body.prompt`). */
function checkSessionFields(deps: HttpDeps, fields: { repos: unknown; prompt: string; provider: string | null | undefined }): void {
  const parsed = CreateSessionBody.safeParse({ repos: fields.repos, initialPrompt: fields.prompt, ...(fields.provider ? { provider: fields.provider } : {}) });
  if (!parsed.success) throw new ValidationError(describeZodError(parsed.error, "body").replace(/^body\.initialPrompt/, "body.prompt"));
  if (fields.provider && !deps.config.SANDBOX_PROVIDERS.includes(fields.provider as never)) {
    throw new ValidationError(`body.provider: "${fields.provider}" is not enabled here (enabled: ${deps.config.SANDBOX_PROVIDERS.join(", ")})`, "provider_unavailable");
  }
}

function checkSchedule(deps: HttpDeps, schedule: string, timezone: string): void {
  try {
    validateSchedule(schedule, timezone, deps.config.AUTOMATION_MIN_INTERVAL_SECONDS, deps.now());
  } catch (err) {
    if (err instanceof ScheduleError) throw new ValidationError(`body.${err.field}: ${err.message}`);
    throw err;
  }
}

export function viewOf(a: AutomationRecord, now: Date) {
  const next = a.enabled ? nextRunAt(parseSchedule(a.schedule, a.timezone), a.timezone, new Date(a.scheduleAnchor), now) : null;
  return automationView(a, next);
}

async function load(parts: AutomationParts, orgId: string, id: string): Promise<AutomationRecord> {
  const a = await parts.store.get(orgId, id, true);
  if (!a) throw new NotFoundError(`automation ${id} not found`);
  return a;
}

export function makeAutomationHandlers(parts: AutomationParts): Record<AutomationRouteId, (deps: HttpDeps) => HttpHandler> {
  return {
    CreateAutomation: httpRoute({ name: "CreateAutomation", auth: true, body: CreateAutomationBody }, async ({ body, principal }, deps) => {
      const who = requirePrincipal(principal);
      checkSchedule(deps, body.schedule, body.timezone);
      checkSessionFields(deps, { repos: body.repos, prompt: body.prompt, provider: body.provider });
      const now = deps.now().toISOString();
      const id = `aut_${randomBytes(12).toString("hex")}`;
      const webhookSecret = newWebhookSecret();
      const record: AutomationRecord = {
        id,
        orgId: who.orgId,
        userId: who.userId,
        name: body.name,
        schedule: body.schedule,
        timezone: body.timezone,
        repos: body.repos,
        prompt: body.prompt,
        enabled: body.enabled,
        disabledReason: null,
        provider: body.provider ?? null,
        maxRunSeconds: body.maxRunSeconds,
        notify: body.notify ?? null,
        webhookSecret: await sealWebhookSecret(parts.secretKeys, who.orgId, id, webhookSecret),
        scheduleAnchor: now,
        consecutiveFailures: 0,
        activeRun: null,
        lastRunAt: null,
        createdAt: now,
        updatedAt: now,
      };
      if (!(await parts.store.create(record))) throw new ConflictError(`automation ${record.id} exists`);
      try {
        await parts.scheduler.put(record);
      } catch (err) {
        // No schedule, no automation: the create changes nothing.
        await parts.store.delete(record.orgId, record.id);
        throw err;
      }
      deps.logger.info("automation created", { automationId: record.id, schedule: record.schedule, timezone: record.timezone });
      // The secret is shown this once (it signs notifications and verifies the webhook trigger).
      return { status: 201, body: { automation: { ...viewOf(record, deps.now()), webhookSecret } }, headers: { location: `/v1/automations/${record.id}` } };
    }),

    ListAutomations: httpRoute({ name: "ListAutomations", auth: true, query: ListQuery }, async ({ query, principal }, deps) => {
      const who = requirePrincipal(principal);
      const page = await parts.store.list(who.orgId, { limit: query.limit, cursor: query.cursor ?? null });
      return { status: 200, body: { items: page.items.map((a) => viewOf(a, deps.now())), nextCursor: page.nextCursor } };
    }),

    GetAutomation: httpRoute({ name: "GetAutomation", auth: true, params: IdParams }, async ({ params, principal }, deps) => {
      const who = requirePrincipal(principal);
      return { status: 200, body: { automation: viewOf(await load(parts, who.orgId, params.id), deps.now()) } };
    }),

    PatchAutomation: httpRoute({ name: "PatchAutomation", auth: true, params: IdParams, body: PatchAutomationBody }, async ({ params, body, principal }, deps) => {
      const who = requirePrincipal(principal);
      const current = await load(parts, who.orgId, params.id);
      const schedule = body.schedule ?? current.schedule;
      const timezone = body.timezone ?? current.timezone;
      const scheduleChanged = schedule !== current.schedule || timezone !== current.timezone;
      if (scheduleChanged) checkSchedule(deps, schedule, timezone);
      const provider = body.provider === undefined ? current.provider : body.provider;
      if (body.repos !== undefined || body.prompt !== undefined || body.provider !== undefined) {
        checkSessionFields(deps, { repos: body.repos ?? current.repos, prompt: body.prompt ?? current.prompt, provider });
      }
      const now = deps.now().toISOString();
      const fields: Partial<AutomationRecord> = {
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.repos !== undefined ? { repos: body.repos } : {}),
        ...(body.prompt !== undefined ? { prompt: body.prompt } : {}),
        ...(body.provider !== undefined ? { provider: body.provider } : {}),
        ...(body.maxRunSeconds !== undefined ? { maxRunSeconds: body.maxRunSeconds } : {}),
        ...(body.notify !== undefined ? { notify: body.notify } : {}),
        ...(scheduleChanged ? { schedule, timezone, scheduleAnchor: now } : {}),
        ...(body.enabled !== undefined ? { enabled: body.enabled } : {}),
        // Enabling again starts a fresh streak.
        ...(body.enabled === true && !current.enabled ? { disabledReason: null, consecutiveFailures: 0 } : {}),
        ...(body.enabled === false ? { disabledReason: "disabled by a user" } : {}),
        updatedAt: now,
      };
      const updated = await parts.store.update(who.orgId, params.id, fields, current.updatedAt);
      if (!updated) throw new ConflictError(`automation ${params.id} changed meanwhile (state: updated at another time); read it again and retry`);
      if (scheduleChanged || body.enabled !== undefined) await parts.scheduler.put(updated);
      return { status: 200, body: { automation: viewOf(updated, deps.now()) } };
    }),

    DeleteAutomation: httpRoute({ name: "DeleteAutomation", auth: true, params: IdParams }, async ({ params, principal }) => {
      const who = requirePrincipal(principal);
      const a = await load(parts, who.orgId, params.id);
      // The schedule first: a firing between the two finds no automation and does nothing.
      await parts.scheduler.remove(a);
      await parts.store.delete(a.orgId, a.id);
      return { status: 204 };
    }),

    RunAutomation: httpRoute({ name: "RunAutomation", auth: true, params: IdParams }, async ({ params, principal }, deps) => {
      const who = requirePrincipal(principal);
      const a = await load(parts, who.orgId, params.id);
      const runDeps = parts.runDeps(deps);
      const active = await currentRun(runDeps, a);
      if (active) throw new ConflictError(`automation ${a.id} has a run in progress (run ${active.id} is ${active.status})`);
      const { run } = await startRun(runDeps, a, { trigger: "manual", scheduledAt: deps.now().toISOString() });
      return { status: 202, body: { run: runView(run) } };
    }),

    ListAutomationRuns: httpRoute({ name: "ListAutomationRuns", auth: true, params: IdParams, query: ListQuery }, async ({ params, query, principal }) => {
      const who = requirePrincipal(principal);
      const a = await load(parts, who.orgId, params.id);
      const page = await parts.store.listRuns(a.id, { limit: query.limit, cursor: query.cursor ?? null });
      return { status: 200, body: { items: page.items.map(runView), nextCursor: page.nextCursor } };
    }),

    AutomationWebhook: (deps) => makeWebhookHandler(parts, deps),
  };
}

const WebhookBody = z.object({ idempotencyKey: z.string().min(1).max(256).optional() }).loose();
const MAX_WEBHOOK_BODY = 16_384;

function answer(status: number, body: unknown): APIGatewayProxyStructuredResultV2 {
  return { statusCode: status, headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" }, body: JSON.stringify(body) };
}
const refuse = (status: number, code: string, message: string) => answer(status, { error: { code, message } });

/**
 * `POST /v1/automations/{id}/webhook` (issue 18, beyond the contract's peers): no bearer token;
 * `X-Signature: sha256=<hex HMAC-SHA256 of the raw body>` with the automation's webhook secret.
 * A valid call starts a run (trigger `webhook`) with the JSON body as the trigger context's
 * `payload`; `idempotencyKey` in the body makes a retry the same run (202 with it again, read
 * through the key's claim). A bad signature is 401 and nothing is stored; a disabled automation,
 * or one with a run in progress, is 409 and leaves the key unclaimed (the retry may start a run);
 * a claim whose run then fails to start (an error) is released.
 */
function makeWebhookHandler(parts: AutomationParts, deps: HttpDeps): HttpHandler {
  return async (event: APIGatewayProxyEventV2) => {
    try {
      const id = IdParams.safeParse({ id: event.pathParameters?.id });
      if (!id.success) return refuse(400, "invalid_request", `path.id: ${id.error.issues[0]?.message ?? "invalid"}`);
      const raw = event.body ? (event.isBase64Encoded ? Buffer.from(event.body, "base64").toString("utf8") : event.body) : "";
      if (raw.length > MAX_WEBHOOK_BODY) return refuse(413, "payload_too_large", `body: at most ${MAX_WEBHOOK_BODY} bytes`);
      const orgId = event.headers?.["x-automation-org"];
      const signature = event.headers?.["x-signature"] ?? "";
      // The org is part of the key: the caller names it (the automation's secret proves the rest).
      if (!orgId) return refuse(401, "unauthorized", "missing X-Automation-Org header");
      const a = await parts.store.get(orgId, id.data.id, true);
      const expected = a ? webhookSignature(await openWebhookSecret(parts.secretKeys, a), raw) : "";
      if (!a || signature.length !== expected.length || !timingSafeEqual(Buffer.from(signature), Buffer.from(expected))) {
        return refuse(401, "unauthorized", "missing or invalid X-Signature (sha256=<hex HMAC-SHA256 of the body with the automation's webhook secret>)");
      }
      let json: unknown;
      try {
        json = raw ? JSON.parse(raw) : {};
      } catch {
        return refuse(400, "invalid_json", "body: not valid JSON");
      }
      const body = WebhookBody.safeParse(json);
      if (!body.success) return refuse(400, "invalid_request", describeZodError(body.error, "body"));
      if (!a.enabled) return refuse(409, "conflict", `automation ${a.id} is disabled`);
      const now = deps.now();
      const runDeps = parts.runDeps(deps);
      const key = body.data.idempotencyKey;
      // A key already bound to a run: that run, read directly (its id and scheduled time are in the claim).
      const duplicate = async (bound: WebhookKeyRun) => {
        const run = await parts.store.getRun(a.id, bound.scheduledAt, bound.runId);
        return answer(202, { run: run ? runView(run) : { id: bound.runId, automationId: a.id }, duplicate: true });
      };
      if (key) {
        const bound = await parts.store.getWebhookKey(a.id, key);
        if (bound) return duplicate(bound);
      }
      // The 409 before the claim: a refused call leaves its key free for the retry.
      const busy = (detail: string) => refuse(409, "conflict", `automation ${a.id} has a run in progress (${detail})`);
      const active = await currentRun(runDeps, a);
      if (active) return busy(`run ${active.id} is ${active.status}`);
      const runKey: WebhookKeyRun = { runId: `run_${randomBytes(12).toString("hex")}`, scheduledAt: now.toISOString() };
      if (key) {
        const claim = await parts.store.claimWebhookKey(a.id, key, runKey, now);
        if (!claim.fresh) return duplicate(claim.run);
      }
      // A claim whose run did not start (startRun threw, or another run began meanwhile) is released.
      const release = () => (key ? parts.store.releaseWebhookKey(a.id, key, runKey.runId) : Promise.resolve());
      let started: Awaited<ReturnType<typeof startRun>>;
      try {
        started = await startRun(runDeps, a, { trigger: "webhook", ...runKey, payload: json });
      } catch (err) {
        await release().catch((releaseErr: unknown) => deps.logger.warn("webhook idempotency key not released", { automationId: a.id, error: releaseErr instanceof Error ? releaseErr.message : String(releaseErr) }));
        throw err;
      }
      const { run } = started;
      if (started.outcome === "skipped") {
        await release();
        return busy(run.error ?? "another run started meanwhile");
      }
      return answer(202, { run: runView(run) });
    } catch (err) {
      deps.logger.error("automation webhook failed", { error: err instanceof Error ? err.message : String(err) });
      return refuse(500, "internal_error", `internal error (request ${event.requestContext?.requestId ?? "unknown"})`);
    }
  };
}
