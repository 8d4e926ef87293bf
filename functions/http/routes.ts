/**
 * The HTTP API route table: one source for the CDK stack (one Lambda function per route, with
 * the table access it needs) and for the local runtime (which serves the same handlers).
 */
import type { FlowName } from "../ports/flow-runner";
import type { HttpDeps, HttpHandler } from "./http-handler";
import { makeCreateSessionHandler } from "./handlers/create-session";
import { makeGetSessionHandler } from "./handlers/get-session";
import { makeHealthHandler } from "./handlers/health";
import { makeHeartbeatHandler } from "./handlers/heartbeat";
import { makeListSessionsHandler } from "./handlers/list-sessions";
import { makeResumeSessionHandler } from "./handlers/resume-session";
import { makePauseSessionHandler } from "./handlers/pause-session";
import { makeSnapshotSessionHandler } from "./handlers/snapshot-session";
import { makeStopSessionHandler } from "./handlers/stop-session";
import { makeCreatePromptHandler } from "./handlers/create-prompt";
import { makeListEventsHandler } from "./handlers/list-events";
import { makeListMessagesHandler } from "./handlers/list-messages";
import { makeDeleteProxyConnectionHandler, makePutProxyConnectionHandler } from "./handlers/proxy-connections";
import { makeSidecarAccessHandler } from "./handlers/sidecar-access";
import { makeCreateWsTicketHandler } from "./handlers/create-ws-ticket";
import { makePutSecretHandler } from "./handlers/put-secret";
import { makeListSecretsHandler } from "./handlers/list-secrets";
import { makeGetSecretHandler } from "./handlers/get-secret";
import { makeDeleteSecretHandler } from "./handlers/delete-secret";
import { makeGetOrgModelHandler, makePutOrgModelHandler } from "./handlers/org-model";
import { makeSandboxEnvValuesHandler, makeSandboxGitCredentialHandler } from "./handlers/sandbox-credentials";
import {
  makeSandboxEnvFilesHandler,
  makeSandboxEnvRequestHandler,
  makeSandboxSaveSnapshotHandler,
  makeSandboxServiceCommandsHandler,
  makeSandboxSnapshotStatusHandler,
  makeSandboxVerificationHandler,
} from "./handlers/sandbox-agent-tools";
import { makeCreateRepoHandler, makeDeleteRepoHandler, makeGetRepoHandler, makeListReposHandler, makePatchRepoHandler, makeRefreshRepoHandler } from "./handlers/repos";
import {
  makeCreatePrebuildBuildHandler,
  makeCreatePrebuildHandler,
  makeDeletePrebuildHandler,
  makeGetPrebuildHandler,
  makeListPrebuildBuildsHandler,
  makeListPrebuildsHandler,
  makePatchPrebuildHandler,
} from "./handlers/prebuilds";
import { makeGetOrgHandler, makeGetUsageHandler, makePutOrgLimitsHandler } from "./handlers/org-usage";

export type TableAccess = "none" | "read" | "readwrite";

export interface HttpRouteDefinition {
  /** Construct id and function name stem. */
  id: string;
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** API Gateway route path; `{id}` is a path parameter. */
  path: string;
  /** Handler module, relative to the repository root (the Lambda bundle's entry). */
  entry: string;
  /**
   * Routes of one family served by one Lambda (the group's `entry` dispatches on the route key:
   * `lambdaRouteGroup`), whose grants are the union of its routes'. Only families whose routes
   * need nearly the same grants share one: CloudFormation's 500-resource stack limit.
   */
  group?: string;
  make: (deps: HttpDeps) => HttpHandler;
  /** Least privilege: what the function may do on the table (token lookups are reads). */
  tableAccess: TableAccess;
  /** Calls a sandbox provider with no session involved (deleting a repo's or prebuild's snapshot): provider credentials only. */
  providerAccess?: boolean;
  /** Starts the snapshot builder (API.md "Repositories and prebuilds"): `states:StartExecution` on its state machine. */
  startsBuilds?: boolean;
  /** Lifecycle flows the route starts (it needs `states:StartExecution` on their state machines). */
  startsFlows?: readonly FlowName[];
  /** Talks to the agent inside a sandbox (prompt delivery to a running session). */
  agentAccess?: boolean;
  /** Arms lifecycle schedules (the idle check): needs the scheduler group and its role. */
  armsSchedules?: boolean;
  /** Signs sidecar access (the sandbox access key) and resolves sandbox tunnels (provider credentials). */
  sandboxAccess?: boolean;
  /** Verifies a sandbox's own signature (`auth: "sandbox"`): the sandbox access key, no provider credentials. */
  verifiesSandboxes?: boolean;
  /**
   * What the route does with org secrets (functions/store/dynamo-org-secrets.ts), for the KMS
   * grant on the secrets key: `metadata` reads, lists or deletes items only (no KMS);
   * `encrypt` stores values (kms:Encrypt); `decrypt` reveals them (kms:Decrypt).
   */
  secretAccess?: SecretAccess;
  /** Pushes to the session's WebSocket clients (the agent's `env.requested`): the Management API endpoint and grant. */
  pushesToClients?: boolean;
}

export type SecretAccess = "metadata" | "encrypt" | "decrypt";

export const HTTP_ROUTES: readonly HttpRouteDefinition[] = [
  { id: "Health", method: "GET", path: "/v1/health", entry: "functions/http/handlers/health.ts", make: makeHealthHandler, tableAccess: "none" },
  { id: "CreateSession", method: "POST", path: "/v1/sessions", entry: "functions/http/handlers/create-session.ts", make: makeCreateSessionHandler, tableAccess: "readwrite" },
  { id: "ListSessions", method: "GET", path: "/v1/sessions", entry: "functions/http/handlers/list-sessions.ts", make: makeListSessionsHandler, tableAccess: "read" },
  { id: "GetSession", method: "GET", path: "/v1/sessions/{id}", entry: "functions/http/handlers/get-session.ts", make: makeGetSessionHandler, tableAccess: "read" },
  { id: "Heartbeat", method: "POST", path: "/v1/sessions/{id}/heartbeat", entry: "functions/http/handlers/heartbeat.ts", make: makeHeartbeatHandler, tableAccess: "readwrite" },
  { id: "ResumeSession", method: "POST", path: "/v1/sessions/{id}/resume", entry: "functions/http/handlers/resume-session.ts", make: makeResumeSessionHandler, tableAccess: "readwrite", startsFlows: ["ensure-runtime"] },
  { id: "PauseSession", method: "POST", path: "/v1/sessions/{id}/pause", entry: "functions/http/handlers/pause-session.ts", make: makePauseSessionHandler, tableAccess: "read", startsFlows: ["pause"] },
  { id: "SnapshotSession", method: "POST", path: "/v1/sessions/{id}/snapshot", entry: "functions/http/handlers/snapshot-session.ts", make: makeSnapshotSessionHandler, tableAccess: "read", startsFlows: ["snapshot"] },
  { id: "StopSession", method: "DELETE", path: "/v1/sessions/{id}", entry: "functions/http/handlers/stop-session.ts", make: makeStopSessionHandler, tableAccess: "read", startsFlows: ["stop"] },
  { id: "CreatePrompt", method: "POST", path: "/v1/sessions/{id}/prompts", entry: "functions/http/handlers/create-prompt.ts", make: makeCreatePromptHandler, tableAccess: "readwrite", startsFlows: ["ensure-runtime"], agentAccess: true },
  { id: "ListMessages", method: "GET", path: "/v1/sessions/{id}/messages", entry: "functions/http/handlers/list-messages.ts", make: makeListMessagesHandler, tableAccess: "read" },
  { id: "ListEvents", method: "GET", path: "/v1/sessions/{id}/events", entry: "functions/http/handlers/list-events.ts", make: makeListEventsHandler, tableAccess: "read" },
  { id: "PutProxyConnection", method: "PUT", path: "/v1/sessions/{id}/proxy-connections/{proxyId}", entry: "functions/http/handlers/put-proxy-connection.ts", make: makePutProxyConnectionHandler, tableAccess: "readwrite" },
  { id: "DeleteProxyConnection", method: "DELETE", path: "/v1/sessions/{id}/proxy-connections/{proxyId}", entry: "functions/http/handlers/delete-proxy-connection.ts", make: makeDeleteProxyConnectionHandler, tableAccess: "readwrite", armsSchedules: true },
  { id: "CreateSidecarAccess", method: "POST", path: "/v1/sessions/{id}/sidecar-access", entry: "functions/http/handlers/create-sidecar-access.ts", make: makeSidecarAccessHandler, tableAccess: "read", sandboxAccess: true },
  { id: "CreateWsTicket", method: "POST", path: "/v1/sessions/{id}/ws-ticket", entry: "functions/http/handlers/create-ws-ticket.ts", make: makeCreateWsTicketHandler, tableAccess: "readwrite" },
  { id: "PutSecret", method: "PUT", path: "/v1/secrets/{name}", entry: "functions/http/handlers/put-secret.ts", make: makePutSecretHandler, tableAccess: "readwrite", secretAccess: "encrypt" },
  { id: "ListSecrets", method: "GET", path: "/v1/secrets", entry: "functions/http/handlers/list-secrets.ts", make: makeListSecretsHandler, tableAccess: "read", secretAccess: "metadata" },
  { id: "GetSecret", method: "GET", path: "/v1/secrets/{name}", entry: "functions/http/handlers/get-secret.ts", make: makeGetSecretHandler, tableAccess: "read", secretAccess: "metadata" },
  { id: "DeleteSecret", method: "DELETE", path: "/v1/secrets/{name}", entry: "functions/http/handlers/delete-secret.ts", make: makeDeleteSecretHandler, tableAccess: "readwrite", secretAccess: "metadata" },
  // The /v1/org* family (and /v1/usage) share one Lambda: CloudFormation's 500-resource limit.
  { id: "GetOrgModel", method: "GET", path: "/v1/org/model", entry: "functions/http/handlers/org-usage-entry.ts", group: "Org", make: makeGetOrgModelHandler, tableAccess: "read" },
  { id: "PutOrgModel", method: "PUT", path: "/v1/org/model", entry: "functions/http/handlers/org-usage-entry.ts", group: "Org", make: makePutOrgModelHandler, tableAccess: "readwrite", secretAccess: "metadata" },
  // Usage, limits and credits (API.md v1.1): one Lambda for the family.
  { id: "GetOrg", method: "GET", path: "/v1/org", entry: "functions/http/handlers/org-usage-entry.ts", group: "Org", make: makeGetOrgHandler, tableAccess: "read" },
  { id: "PutOrgLimits", method: "PUT", path: "/v1/org/limits", entry: "functions/http/handlers/org-usage-entry.ts", group: "Org", make: makePutOrgLimitsHandler, tableAccess: "readwrite" },
  { id: "GetUsage", method: "GET", path: "/v1/usage", entry: "functions/http/handlers/org-usage-entry.ts", group: "Org", make: makeGetUsageHandler, tableAccess: "read" },
  // Repositories and prebuilds (API.md v1.1). Secret references are checked (metadata reads only).
  { id: "CreateRepo", method: "POST", path: "/v1/repos", entry: "functions/http/handlers/repos-entry.ts", group: "Repos", make: makeCreateRepoHandler, tableAccess: "readwrite", secretAccess: "metadata" },
  { id: "ListRepos", method: "GET", path: "/v1/repos", entry: "functions/http/handlers/repos-entry.ts", group: "Repos", make: makeListReposHandler, tableAccess: "read" },
  { id: "GetRepo", method: "GET", path: "/v1/repos/{id}", entry: "functions/http/handlers/repos-entry.ts", group: "Repos", make: makeGetRepoHandler, tableAccess: "read" },
  { id: "PatchRepo", method: "PATCH", path: "/v1/repos/{id}", entry: "functions/http/handlers/repos-entry.ts", group: "Repos", make: makePatchRepoHandler, tableAccess: "readwrite", secretAccess: "metadata" },
  { id: "DeleteRepo", method: "DELETE", path: "/v1/repos/{id}", entry: "functions/http/handlers/delete-repo.ts", make: makeDeleteRepoHandler, tableAccess: "readwrite", providerAccess: true },
  { id: "RefreshRepo", method: "POST", path: "/v1/repos/{id}/refresh", entry: "functions/http/handlers/repos-entry.ts", group: "Repos", make: makeRefreshRepoHandler, tableAccess: "readwrite", startsBuilds: true },
  { id: "CreatePrebuild", method: "POST", path: "/v1/prebuilds", entry: "functions/http/handlers/prebuilds-entry.ts", group: "Prebuilds", make: makeCreatePrebuildHandler, tableAccess: "readwrite" },
  { id: "ListPrebuilds", method: "GET", path: "/v1/prebuilds", entry: "functions/http/handlers/prebuilds-entry.ts", group: "Prebuilds", make: makeListPrebuildsHandler, tableAccess: "read" },
  { id: "GetPrebuild", method: "GET", path: "/v1/prebuilds/{id}", entry: "functions/http/handlers/prebuilds-entry.ts", group: "Prebuilds", make: makeGetPrebuildHandler, tableAccess: "read" },
  { id: "PatchPrebuild", method: "PATCH", path: "/v1/prebuilds/{id}", entry: "functions/http/handlers/prebuilds-entry.ts", group: "Prebuilds", make: makePatchPrebuildHandler, tableAccess: "readwrite" },
  { id: "DeletePrebuild", method: "DELETE", path: "/v1/prebuilds/{id}", entry: "functions/http/handlers/delete-prebuild.ts", make: makeDeletePrebuildHandler, tableAccess: "readwrite", providerAccess: true },
  { id: "CreatePrebuildBuild", method: "POST", path: "/v1/prebuilds/{id}/builds", entry: "functions/http/handlers/prebuilds-entry.ts", group: "Prebuilds", make: makeCreatePrebuildBuildHandler, tableAccess: "readwrite", startsBuilds: true },
  { id: "ListPrebuildBuilds", method: "GET", path: "/v1/prebuilds/{id}/builds", entry: "functions/http/handlers/prebuilds-entry.ts", group: "Prebuilds", make: makeListPrebuildBuildsHandler, tableAccess: "read" },
  // Called by sandboxes (their sidecar signs with the session's sandbox key), never by people.
  { id: "SandboxGitCredential", method: "POST", path: "/v1/sandbox/git-credential", entry: "functions/http/handlers/sandbox-git-credential.ts", make: makeSandboxGitCredentialHandler, tableAccess: "read", verifiesSandboxes: true, secretAccess: "decrypt" },
  { id: "SandboxEnvValues", method: "POST", path: "/v1/sandbox/env-values", entry: "functions/http/handlers/sandbox-env-values.ts", make: makeSandboxEnvValuesHandler, tableAccess: "read", verifiesSandboxes: true, secretAccess: "decrypt" },
  // The agent's own tools (issue 25 §4), through the sidecar: functions/agent-tools/agent-tools.ts.
  { id: "SandboxSaveSnapshot", method: "POST", path: "/v1/sandbox/snapshots", entry: "functions/http/handlers/sandbox-agent-tools-entry.ts", group: "SandboxAgentTools", make: makeSandboxSaveSnapshotHandler, tableAccess: "read", verifiesSandboxes: true, startsFlows: ["snapshot"] },
  { id: "SandboxSnapshotStatus", method: "GET", path: "/v1/sandbox/snapshots/{execution}", entry: "functions/http/handlers/sandbox-agent-tools-entry.ts", group: "SandboxAgentTools", make: makeSandboxSnapshotStatusHandler, tableAccess: "read", verifiesSandboxes: true },
  { id: "SandboxServiceCommands", method: "PUT", path: "/v1/sandbox/service-commands", entry: "functions/http/handlers/sandbox-agent-tools-entry.ts", group: "SandboxAgentTools", make: makeSandboxServiceCommandsHandler, tableAccess: "readwrite", verifiesSandboxes: true },
  { id: "SandboxEnvFiles", method: "PUT", path: "/v1/sandbox/env-files", entry: "functions/http/handlers/sandbox-agent-tools-entry.ts", group: "SandboxAgentTools", make: makeSandboxEnvFilesHandler, tableAccess: "readwrite", verifiesSandboxes: true },
  { id: "SandboxEnvRequest", method: "POST", path: "/v1/sandbox/env-requests", entry: "functions/http/handlers/sandbox-agent-tools-entry.ts", group: "SandboxAgentTools", make: makeSandboxEnvRequestHandler, tableAccess: "readwrite", verifiesSandboxes: true, secretAccess: "metadata", pushesToClients: true },
  { id: "SandboxVerification", method: "POST", path: "/v1/sandbox/verifications", entry: "functions/http/handlers/sandbox-agent-tools-entry.ts", group: "SandboxAgentTools", make: makeSandboxVerificationHandler, tableAccess: "readwrite", verifiesSandboxes: true, pushesToClients: true },
];

/**
 * A path segment percent-decoded, or as received when its encoding is malformed
 * (`%E0%A4%A`): the route's parameter schema then refuses it with a 400 naming the parameter,
 * as it refuses any other value that is not an id.
 */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** Matches a concrete path against a route path; returns the path parameters or null. */
export function matchRoutePath(routePath: string, actual: string): Record<string, string> | null {
  const want = routePath.split("/");
  const got = actual.split("/");
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i] ?? "";
    const g = got[i] ?? "";
    if (w.startsWith("{") && w.endsWith("}")) {
      if (!g) return null;
      params[w.slice(1, -1)] = decodePathSegment(g);
    } else if (w !== g) {
      return null;
    }
  }
  return params;
}

/**
 * The definition the Lambda serving `route` is built from: the route's own, or for a route group
 * one definition with the group's id and the union of its routes' needs (the grants of every
 * route it serves). The stack builds functions from this, and the infra tests check grants by it.
 */
export function servingRoute(route: HttpRouteDefinition): HttpRouteDefinition {
  if (!route.group) return route;
  const routes = HTTP_ROUTES.filter((r) => r.group === route.group);
  const any = (flag: (r: HttpRouteDefinition) => unknown): boolean => routes.some((r) => Boolean(flag(r)));
  const secretAccess = [...new Set(routes.flatMap((r) => (r.secretAccess ? [r.secretAccess] : [])))];
  if (secretAccess.length > 1) throw new Error(`route group ${route.group} mixes secret access ${secretAccess.join(", ")}`);
  const startsFlows = [...new Set(routes.flatMap((r) => r.startsFlows ?? []))];
  return {
    id: route.group,
    method: route.method,
    path: route.path,
    entry: route.entry,
    group: route.group,
    make: route.make,
    tableAccess: any((r) => r.tableAccess === "readwrite") ? "readwrite" : any((r) => r.tableAccess === "read") ? "read" : "none",
    ...(startsFlows.length > 0 ? { startsFlows } : {}),
    ...(secretAccess[0] ? { secretAccess: secretAccess[0] } : {}),
    ...(any((r) => r.providerAccess) ? { providerAccess: true } : {}),
    ...(any((r) => r.startsBuilds) ? { startsBuilds: true } : {}),
    ...(any((r) => r.agentAccess) ? { agentAccess: true } : {}),
    ...(any((r) => r.armsSchedules) ? { armsSchedules: true } : {}),
    ...(any((r) => r.sandboxAccess) ? { sandboxAccess: true } : {}),
    ...(any((r) => r.verifiesSandboxes) ? { verifiesSandboxes: true } : {}),
    ...(any((r) => r.pushesToClients) ? { pushesToClients: true } : {}),
  };
}
