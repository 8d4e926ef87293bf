/**
 * The HTTP contract (API.md): every public route with the zod schemas its handler validates
 * with (request bodies, queries) and the shapes it answers. One table for the OpenAPI document
 * (functions/contract/openapi.ts, `GET /v1/openapi.json`) and the types of the typed client
 * (clients/api-client, which imports this module for types only: `import type`).
 *
 * The request schemas are the handlers' own (re-exported here, not copied), so the document and
 * the client's types can never drift from what the server accepts. Response shapes are open
 * (`looseObject`): the server may add fields.
 */
import * as z from "zod";
import { CreatePromptBody, CreateSessionBody, ListEventsQuery, ListMessagesQuery, ListSessionsQuery, PutSecretBody } from "./requests";
import { OrgLimitsBody, UsageQuery } from "../http/handlers/org-usage";
import { OrgModelBody } from "../http/handlers/org-model";
import { CreateRepoBody, PatchRepoBody } from "../http/handlers/repos";
import { CreatePrebuildBody, ListBuildsQuery, PatchPrebuildBody } from "../http/handlers/prebuilds";
import { ProxyConnectionBody } from "../http/handlers/proxy-connections";
import { SidecarAccessBody } from "../http/handlers/sidecar-access";
import { PutWorkspaceBody } from "../../functions/slack/workspace-routes";
import { CreateAutomationBody, PatchAutomationBody } from "../automations/automation";
import { SessionView, TranscriptMessageView } from "./frames";
import { AgentModel } from "../domain/agent-settings";

export {
  CreateSessionBody,
  ListSessionsQuery,
  CreatePromptBody,
  ListMessagesQuery,
  ListEventsQuery,
  PutSecretBody,
  OrgLimitsBody,
  UsageQuery,
  OrgModelBody,
  CreateRepoBody,
  PatchRepoBody,
  CreatePrebuildBody,
  PatchPrebuildBody,
  ListBuildsQuery,
  PutWorkspaceBody,
  SessionView,
  TranscriptMessageView,
};

/** The request header naming a prompt for retries (domain/idempotency-key.ts). */
export const IDEMPOTENCY_KEY_HEADER_NAME = "Idempotency-Key";

export const ErrorBody = z.object({ error: z.looseObject({ code: z.string(), message: z.string(), requestId: z.string().optional() }) });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const Health = z.looseObject({ ok: z.literal(true), wsUrl: z.string().nullable() });
export type Health = z.infer<typeof Health>;

const page = <T extends z.ZodType>(item: T) => z.looseObject({ items: z.array(item), nextCursor: z.string().nullable() });

export const SessionBody = z.looseObject({ session: SessionView });
export const SessionPage = page(SessionView);
export type SessionPage = z.infer<typeof SessionPage>;

export const PromptView = z.looseObject({ id: z.string(), status: z.enum(["queued", "processing"]), position: z.number().optional(), createdAt: z.string().optional(), authorId: z.string().optional() });
export type PromptView = z.infer<typeof PromptView>;
export const PromptBody = z.looseObject({ prompt: PromptView, delivery: z.string().optional() });
export type PromptBody = z.infer<typeof PromptBody>;

export const MessagePage = page(TranscriptMessageView);
export type MessagePage = z.infer<typeof MessagePage>;

export const LifecycleEventView = z.looseObject({
  eventId: z.string(),
  sessionId: z.string(),
  at: z.string(),
  flow: z.string(),
  outcome: z.string(),
  from: z.string().nullable(),
  to: z.string().nullable(),
  reason: z.string().nullable(),
  actor: z.string(),
  message: z.string().nullable().optional(),
  timings: z.record(z.string(), z.number()),
});
export type LifecycleEventView = z.infer<typeof LifecycleEventView>;
export const EventPage = page(LifecycleEventView);
export type EventPage = z.infer<typeof EventPage>;

export const WsTicket = z.looseObject({ ticket: z.string(), expiresAt: z.string() });
export type WsTicket = z.infer<typeof WsTicket>;

export const SecretView = z.looseObject({ name: z.string(), description: z.string().nullable().optional(), createdAt: z.string(), updatedAt: z.string() });
export type SecretView = z.infer<typeof SecretView>;

export const OrgView = z.looseObject({
  org: z.looseObject({
    id: z.string(),
    limits: z.looseObject({ maxRunningSessions: z.number().nullable(), monthlyActiveSeconds: z.number().nullable() }),
    usage: z.looseObject({ period: z.string(), activeSeconds: z.number(), runningSessions: z.number() }),
  }),
});
export type OrgView = z.infer<typeof OrgView>;
export const UsageView = z.looseObject({ items: z.array(z.looseObject({ day: z.string(), activeSeconds: z.number(), sessions: z.number() })), total: z.unknown() });
export type UsageView = z.infer<typeof UsageView>;
/** The org's default model chain (`GET/PUT /v1/org/model`): a model and its secret's name, never a key. */
export const OrgModelView = z.looseObject({ model: AgentModel.nullable(), fallbackModels: z.array(AgentModel) });
export type OrgModelView = z.infer<typeof OrgModelView>;

/** A sidecar access token (terminal, editor, preview), answered once and never stored. */
export const SidecarAccessView = z.looseObject({
  sidecarAccess: z.looseObject({ sandboxId: z.string(), url: z.string(), terminalUrl: z.string(), token: z.string(), expiresAt: z.string() }),
});
export type SidecarAccessView = z.infer<typeof SidecarAccessView>;

export const RepoView = z.looseObject({ id: z.string(), url: z.string() });
export type RepoView = z.infer<typeof RepoView>;
export const BuildView = z.looseObject({ id: z.string(), status: z.enum(["running", "succeeded", "failed"]) });
export type BuildView = z.infer<typeof BuildView>;
export const PrebuildView = z.looseObject({ id: z.string(), name: z.string(), snapshot: z.looseObject({ id: z.string(), builtAt: z.string() }).nullable(), latestBuild: BuildView.nullable().optional() });
export type PrebuildView = z.infer<typeof PrebuildView>;
export const SlackWorkspaceView = z.looseObject({ teamId: z.string(), defaultRepo: z.string().nullable().optional() });
export type SlackWorkspaceView = z.infer<typeof SlackWorkspaceView>;

const AnyObject = z.record(z.string(), z.unknown());

export const AutomationView = z.looseObject({ id: z.string(), name: z.string(), schedule: z.string(), timezone: z.string(), enabled: z.boolean(), nextRunAt: z.string().nullable() });
export type AutomationView = z.infer<typeof AutomationView>;
/** `POST /v1/automations` answers the webhook secret this once. */
export const CreatedAutomationView = AutomationView.extend({ webhookSecret: z.string() });
export type CreatedAutomationView = z.infer<typeof CreatedAutomationView>;
export const AutomationRunView = z.looseObject({
  id: z.string(),
  automationId: z.string(),
  trigger: z.string(),
  status: z.enum(["starting", "running", "succeeded", "failed", "timed_out", "skipped"]),
  scheduledAt: z.string().nullable(),
  sessionId: z.string().nullable(),
});
export type AutomationRunView = z.infer<typeof AutomationRunView>;
const AutomationListQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).optional(), cursor: z.string().optional() });

/** Who may call a route: an API token, nobody in particular, Slack's signature, or a sandbox's own signature. */
export type RouteAuth = "bearer" | "none" | "slack" | "sandbox";

export interface ContractOperation {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  /** The route's id in the route table (functions/http/routes.ts, functions/slack/routes.ts). */
  operationId: string;
  summary: string;
  tag: string;
  auth: RouteAuth;
  /** Admin-only (API.md "Roles"): a member gets 403. */
  admin?: boolean;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The request body's media type (Slack sends forms). */
  bodyType?: "application/json" | "application/x-www-form-urlencoded";
  /** The optional `Idempotency-Key` request header. */
  idempotencyKey?: boolean;
  /** The success status and its body (null: no body). */
  status: 200 | 201 | 202 | 204;
  response: z.ZodType | null;
}

const op = (o: ContractOperation): ContractOperation => o;

/**
 * Every route of the public contract, once each (`method path`), under its route table's id.
 * The OpenAPI document holds the entries whose routes are served.
 */
export const CONTRACT_OPERATIONS: readonly ContractOperation[] = [
  op({ method: "GET", path: "/v1/health", operationId: "Health", summary: "Liveness and the WebSocket URL", tag: "meta", auth: "none", status: 200, response: Health }),
  op({ method: "GET", path: "/v1/openapi.json", operationId: "GetOpenApiDocument", summary: "This OpenAPI 3.1 document", tag: "meta", auth: "none", status: 200, response: AnyObject }),
  // Sessions
  op({ method: "POST", path: "/v1/sessions", operationId: "CreateSession", summary: "Create a session (no sandbox yet)", tag: "sessions", auth: "bearer", body: CreateSessionBody, status: 201, response: SessionBody }),
  op({ method: "GET", path: "/v1/sessions", operationId: "ListSessions", summary: "The org's sessions, newest first", tag: "sessions", auth: "bearer", query: ListSessionsQuery, status: 200, response: SessionPage }),
  op({ method: "GET", path: "/v1/sessions/{id}", operationId: "GetSession", summary: "One session", tag: "sessions", auth: "bearer", status: 200, response: SessionBody }),
  op({ method: "DELETE", path: "/v1/sessions/{id}", operationId: "StopSession", summary: "Terminate the sandbox: stopped for good; deletes all the session's snapshots (the transcript stays)", tag: "sessions", auth: "bearer", status: 202, response: SessionBody }),
  op({ method: "POST", path: "/v1/sessions/{id}/resume", operationId: "ResumeSession", summary: "Provision or restore the sandbox", tag: "sessions", auth: "bearer", status: 202, response: SessionBody }),
  op({ method: "POST", path: "/v1/sessions/{id}/pause", operationId: "PauseSession", summary: "Snapshot, terminate, paused (user)", tag: "sessions", auth: "bearer", status: 202, response: SessionBody }),
  op({ method: "POST", path: "/v1/sessions/{id}/snapshot", operationId: "SnapshotSession", summary: "Snapshot without stopping", tag: "sessions", auth: "bearer", status: 202, response: SessionBody }),
  op({ method: "POST", path: "/v1/sessions/{id}/heartbeat", operationId: "Heartbeat", summary: "Refresh the idle grace (never resumes)", tag: "sessions", auth: "bearer", status: 204, response: null }),
  op({ method: "POST", path: "/v1/sessions/{id}/prompts", operationId: "CreatePrompt", summary: "Queue a prompt (wakes a paused session)", tag: "sessions", auth: "bearer", body: CreatePromptBody, idempotencyKey: true, status: 202, response: PromptBody }),
  op({ method: "GET", path: "/v1/sessions/{id}/messages", operationId: "ListMessages", summary: "The transcript, oldest first", tag: "sessions", auth: "bearer", query: ListMessagesQuery, status: 200, response: MessagePage }),
  op({ method: "GET", path: "/v1/sessions/{id}/events", operationId: "ListEvents", summary: "Lifecycle audit with step timings", tag: "sessions", auth: "bearer", query: ListEventsQuery, status: 200, response: EventPage }),
  op({ method: "POST", path: "/v1/sessions/{id}/ws-ticket", operationId: "CreateWsTicket", summary: "A single-use WebSocket connect ticket", tag: "sessions", auth: "bearer", status: 201, response: WsTicket }),
  op({ method: "POST", path: "/v1/sessions/{id}/sidecar-access", operationId: "CreateSidecarAccess", summary: "A sidecar access token (terminal, editor, preview)", tag: "sessions", auth: "bearer", body: SidecarAccessBody, status: 201, response: SidecarAccessView }),
  op({ method: "PUT", path: "/v1/sessions/{id}/proxy-connections/{proxyId}", operationId: "PutProxyConnection", summary: "Register a proxied connection (sidecar)", tag: "sessions", auth: "bearer", body: ProxyConnectionBody, status: 200, response: AnyObject }),
  op({ method: "DELETE", path: "/v1/sessions/{id}/proxy-connections/{proxyId}", operationId: "DeleteProxyConnection", summary: "Unregister a proxied connection", tag: "sessions", auth: "bearer", status: 204, response: null }),
  // Secrets
  op({ method: "PUT", path: "/v1/secrets/{name}", operationId: "PutSecret", summary: "Store an org secret", tag: "secrets", auth: "bearer", admin: true, body: PutSecretBody, status: 200, response: z.looseObject({ secret: SecretView }) }),
  op({ method: "GET", path: "/v1/secrets", operationId: "ListSecrets", summary: "The org's secrets (never values)", tag: "secrets", auth: "bearer", status: 200, response: z.looseObject({ items: z.array(SecretView) }) }),
  op({ method: "GET", path: "/v1/secrets/{name}", operationId: "GetSecret", summary: "One secret (never its value)", tag: "secrets", auth: "bearer", status: 200, response: z.looseObject({ secret: SecretView }) }),
  op({ method: "DELETE", path: "/v1/secrets/{name}", operationId: "DeleteSecret", summary: "Remove a secret", tag: "secrets", auth: "bearer", admin: true, status: 204, response: null }),
  // Org, usage, limits
  op({ method: "GET", path: "/v1/org", operationId: "GetOrg", summary: "The caller's org: limits and usage", tag: "org", auth: "bearer", status: 200, response: OrgView }),
  op({ method: "PUT", path: "/v1/org/limits", operationId: "PutOrgLimits", summary: "Set the org's limits", tag: "org", auth: "bearer", admin: true, body: OrgLimitsBody, status: 200, response: OrgView }),
  op({ method: "GET", path: "/v1/usage", operationId: "GetUsage", summary: "Metered sandbox seconds by UTC day", tag: "org", auth: "bearer", query: UsageQuery, status: 200, response: UsageView }),
  op({ method: "GET", path: "/v1/org/model", operationId: "GetOrgModel", summary: "The org's default model chain", tag: "org", auth: "bearer", status: 200, response: OrgModelView }),
  op({ method: "PUT", path: "/v1/org/model", operationId: "PutOrgModel", summary: "Set the org's default model chain", tag: "org", auth: "bearer", admin: true, body: OrgModelBody, status: 200, response: OrgModelView }),
  // Repositories and prebuilds
  op({ method: "POST", path: "/v1/repos", operationId: "CreateRepo", summary: "Store a repository", tag: "repos", auth: "bearer", body: CreateRepoBody, status: 201, response: z.looseObject({ repo: RepoView }) }),
  op({ method: "GET", path: "/v1/repos", operationId: "ListRepos", summary: "The org's repositories", tag: "repos", auth: "bearer", status: 200, response: page(RepoView) }),
  op({ method: "GET", path: "/v1/repos/{id}", operationId: "GetRepo", summary: "One repository", tag: "repos", auth: "bearer", status: 200, response: z.looseObject({ repo: RepoView }) }),
  op({ method: "PATCH", path: "/v1/repos/{id}", operationId: "PatchRepo", summary: "Change a repository", tag: "repos", auth: "bearer", body: PatchRepoBody, status: 200, response: z.looseObject({ repo: RepoView }) }),
  op({ method: "DELETE", path: "/v1/repos/{id}", operationId: "DeleteRepo", summary: "Delete a repository", tag: "repos", auth: "bearer", status: 204, response: null }),
  op({ method: "POST", path: "/v1/repos/{id}/refresh", operationId: "RefreshRepo", summary: "Rebuild the repository's snapshots", tag: "repos", auth: "bearer", status: 202, response: z.looseObject({ builds: z.array(BuildView) }) }),
  op({ method: "POST", path: "/v1/prebuilds", operationId: "CreatePrebuild", summary: "Define a prebuild", tag: "prebuilds", auth: "bearer", body: CreatePrebuildBody, status: 201, response: z.looseObject({ prebuild: PrebuildView }) }),
  op({ method: "GET", path: "/v1/prebuilds", operationId: "ListPrebuilds", summary: "The org's prebuilds", tag: "prebuilds", auth: "bearer", status: 200, response: page(PrebuildView) }),
  op({ method: "GET", path: "/v1/prebuilds/{id}", operationId: "GetPrebuild", summary: "One prebuild with its snapshot and latest build", tag: "prebuilds", auth: "bearer", status: 200, response: z.looseObject({ prebuild: PrebuildView }) }),
  op({ method: "PATCH", path: "/v1/prebuilds/{id}", operationId: "PatchPrebuild", summary: "Change a prebuild", tag: "prebuilds", auth: "bearer", body: PatchPrebuildBody, status: 200, response: z.looseObject({ prebuild: PrebuildView }) }),
  op({ method: "DELETE", path: "/v1/prebuilds/{id}", operationId: "DeletePrebuild", summary: "Delete a prebuild", tag: "prebuilds", auth: "bearer", status: 204, response: null }),
  op({ method: "POST", path: "/v1/prebuilds/{id}/builds", operationId: "CreatePrebuildBuild", summary: "Build the prebuild's snapshot", tag: "prebuilds", auth: "bearer", status: 202, response: z.looseObject({ build: BuildView }) }),
  op({ method: "GET", path: "/v1/prebuilds/{id}/builds", operationId: "ListPrebuildBuilds", summary: "The prebuild's builds", tag: "prebuilds", auth: "bearer", query: ListBuildsQuery, status: 200, response: page(BuildView) }),
  // Automations (API.md "Automations")
  op({ method: "POST", path: "/v1/automations", operationId: "CreateAutomation", summary: "Define an automation (its webhook secret is in this answer only)", tag: "automations", auth: "bearer", body: CreateAutomationBody, status: 201, response: z.looseObject({ automation: CreatedAutomationView }) }),
  op({ method: "GET", path: "/v1/automations", operationId: "ListAutomations", summary: "The org's automations", tag: "automations", auth: "bearer", query: AutomationListQuery, status: 200, response: page(AutomationView) }),
  op({ method: "GET", path: "/v1/automations/{id}", operationId: "GetAutomation", summary: "One automation", tag: "automations", auth: "bearer", status: 200, response: z.looseObject({ automation: AutomationView }) }),
  op({ method: "PATCH", path: "/v1/automations/{id}", operationId: "PatchAutomation", summary: "Change an automation", tag: "automations", auth: "bearer", body: PatchAutomationBody, status: 200, response: z.looseObject({ automation: AutomationView }) }),
  op({ method: "DELETE", path: "/v1/automations/{id}", operationId: "DeleteAutomation", summary: "Delete an automation and its schedule", tag: "automations", auth: "bearer", status: 204, response: null }),
  op({ method: "POST", path: "/v1/automations/{id}/runs", operationId: "RunAutomation", summary: "Run now", tag: "automations", auth: "bearer", status: 202, response: z.looseObject({ run: AutomationRunView }) }),
  op({ method: "GET", path: "/v1/automations/{id}/runs", operationId: "ListAutomationRuns", summary: "Run history, newest first", tag: "automations", auth: "bearer", query: AutomationListQuery, status: 200, response: page(AutomationRunView) }),
  op({ method: "POST", path: "/v1/automations/{id}/webhook", operationId: "AutomationWebhook", summary: "Start a run from a signed webhook (X-Signature: sha256=<hmac of the body>)", tag: "automations", auth: "none", body: AnyObject, status: 202, response: z.looseObject({ run: AutomationRunView }) }),
  // Slack
  op({ method: "PUT", path: "/v1/slack/workspace", operationId: "PutSlackWorkspace", summary: "Bind a Slack team to the org", tag: "slack", auth: "bearer", admin: true, body: PutWorkspaceBody, status: 200, response: z.looseObject({ workspace: SlackWorkspaceView }) }),
  op({ method: "GET", path: "/v1/slack/workspace", operationId: "GetSlackWorkspace", summary: "The bound Slack team", tag: "slack", auth: "bearer", status: 200, response: z.looseObject({ workspace: SlackWorkspaceView }) }),
  op({ method: "DELETE", path: "/v1/slack/workspace", operationId: "DeleteSlackWorkspace", summary: "Unbind the Slack team", tag: "slack", auth: "bearer", admin: true, status: 204, response: null }),
  op({ method: "POST", path: "/slack/commands", operationId: "SlackCommands", summary: "Slack slash command (signed by Slack)", tag: "slack", auth: "slack", body: AnyObject, bodyType: "application/x-www-form-urlencoded", status: 200, response: AnyObject }),
  op({ method: "POST", path: "/slack/events", operationId: "SlackEvents", summary: "Slack Events API (signed by Slack)", tag: "slack", auth: "slack", body: AnyObject, status: 200, response: AnyObject }),
  op({ method: "POST", path: "/slack/interactions", operationId: "SlackInteractions", summary: "Slack interactive buttons (signed by Slack)", tag: "slack", auth: "slack", body: AnyObject, bodyType: "application/x-www-form-urlencoded", status: 200, response: AnyObject }),
  // Called by sandboxes (their sidecar signs with the session's sandbox key), never by people.
  op({ method: "POST", path: "/v1/sandbox/git-credential", operationId: "SandboxGitCredential", summary: "A repository credential for the sandbox's git", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 200, response: AnyObject }),
  op({ method: "POST", path: "/v1/sandbox/env-values", operationId: "SandboxEnvValues", summary: "Env file values for the sandbox", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 200, response: AnyObject }),
  op({ method: "POST", path: "/v1/sandbox/snapshots", operationId: "SandboxSaveSnapshot", summary: "The agent saves a snapshot", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 202, response: AnyObject }),
  op({ method: "GET", path: "/v1/sandbox/snapshots/{execution}", operationId: "SandboxSnapshotStatus", summary: "A snapshot's progress", tag: "sandbox", auth: "sandbox", status: 200, response: AnyObject }),
  op({ method: "PUT", path: "/v1/sandbox/service-commands", operationId: "SandboxServiceCommands", summary: "The agent sets service commands", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 200, response: AnyObject }),
  op({ method: "PUT", path: "/v1/sandbox/env-files", operationId: "SandboxEnvFiles", summary: "The agent sets env files", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 200, response: AnyObject }),
  op({ method: "POST", path: "/v1/sandbox/env-requests", operationId: "SandboxEnvRequest", summary: "The agent asks the user for env values", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 202, response: AnyObject }),
  op({ method: "POST", path: "/v1/sandbox/verifications", operationId: "SandboxVerification", summary: "The agent reports a verification", tag: "sandbox", auth: "sandbox", body: AnyObject, status: 200, response: AnyObject }),
];

/** Request body types as callers write them (defaults optional). */
export type CreateSessionInput = z.input<typeof CreateSessionBody>;
export type ListSessionsInput = { status?: z.infer<typeof ListSessionsQuery>["status"]; limit?: number; cursor?: string };
export type PageInput = { limit?: number; cursor?: string };
export type PutSecretInput = z.input<typeof PutSecretBody>;
export type OrgLimitsInput = z.input<typeof OrgLimitsBody>;
export type UsageInput = { from?: string; to?: string };
export type CreateRepoInput = z.input<typeof CreateRepoBody>;
export type PatchRepoInput = z.input<typeof PatchRepoBody>;
export type CreatePrebuildInput = z.input<typeof CreatePrebuildBody>;
export type PatchPrebuildInput = z.input<typeof PatchPrebuildBody>;
export type PutSlackWorkspaceInput = z.input<typeof PutWorkspaceBody>;
export type OrgModelInput = z.input<typeof OrgModelBody>;
export type SidecarAccessInput = z.input<typeof SidecarAccessBody>;
export type CreateAutomationInput = z.input<typeof CreateAutomationBody>;
export type PatchAutomationInput = z.input<typeof PatchAutomationBody>;
export type SessionBody = z.infer<typeof SessionBody>;
