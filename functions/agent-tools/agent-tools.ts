/**
 * What the control plane does for the agent's own tools (issue 25 §4), called by the
 * sandbox-authenticated routes (http/handlers/sandbox-agent-tools.ts) that the sandbox's sidecar
 * calls when OpenCode runs a tool (sandbox/boot/opencode-files.ts):
 *
 * - `save_snapshot`: the `snapshot` flow, the same one `POST /v1/sessions/{id}/snapshot` starts;
 *   its execution's audit event says when it committed and which snapshot it took;
 * - `save_service_commands`, `save_env_files`: saved on the session (the next boot starts and
 *   generates them) through `persistServiceCommands` / `persistEnvFiles`, the one place that will
 *   also save them on the session's repository or prebuild once those exist;
 * - `request_env_variables`: an `env.requested` frame to the session's clients and an entry in its
 *   audit log; values never pass through here (the user stores them as org secrets);
 * - `verify`: the agent's report (its summary, the evidence files it lists, the services' state)
 *   as a `verification.reported` frame to the session's clients and an audit entry.
 *
 * Everything the sandbox sends is parsed like API input (sandbox/shared/agent-tool-requests.ts
 * for the shape, the session rules here on top): the sandbox is untrusted.
 */
import type * as z from "zod";
import { posix } from "node:path";
import { repoDirInWorkspace } from "../builds/build-plan";
import { ConflictError } from "../domain/errors";
import type { RepoCatalog, RepoChanges } from "../ports/repo-catalog";
import { newSortableId } from "../domain/ids";
import { API_WORKSPACE_ROOT, SessionEnvFiles, type SessionRecord } from "../domain/session";
import type { ServiceCommand } from "../domain/agent-settings";
import { multiLineProblem, workspacePathTextProblem } from "../domain/text";
import { OutsideWorkspaceError, resolveInsideWorkspaceLexically } from "../../sandbox/shared/workspace-path";
import {
  RequestEnvVariablesRequest,
  VerificationReport,
  SaveEnvFilesRequest,
  SaveServiceCommandsRequest,
} from "../../sandbox/shared/agent-tool-requests";
import type { ClientPush } from "../ports/client-push";
import type { OrgSecretStore } from "../ports/org-secrets";
import type { ConnectionRegistry, LifecycleEvent, LifecycleEventLog } from "../ports/session-items";
import type { SessionSettingsStore } from "../ports/session-settings";
import { broadcast } from "../services/broadcast";
import type { Logger } from "@aws-lambda-powertools/logger";

/** Who the audit log names for what the agent did. */
export const AGENT_ACTOR = "agent";

/**
 * How far back the snapshot status looks for its execution's event: the event is stamped when
 * the flow began, which for an execution the request joined can be before the request, by at
 * most the lease wait of a flow (Begin retries LeaseBusy for a few minutes).
 */
export const SNAPSHOT_EVENT_WINDOW_MS = 15 * 60_000;

/** Why `path` is not a workspace-relative path that stays inside the workspace, or null. */
function workspacePathProblem(path: string): string | null {
  const problem = workspacePathTextProblem(path) ?? (path.startsWith("/") ? "must be relative to the workspace" : null);
  if (problem) return problem;
  try {
    resolveInsideWorkspaceLexically(API_WORKSPACE_ROOT, path);
    return null;
  } catch (err) {
    if (err instanceof OutsideWorkspaceError) return "must stay inside the workspace";
    throw err;
  }
}

/** The session's rules on top of the tool's shape: what `POST /v1/sessions` accepts for `serviceCommands`. */
export const ServiceCommandsBody = SaveServiceCommandsRequest.extend({
  commands: SaveServiceCommandsRequest.shape.commands.superRefine((commands, ctx) => {
    commands.forEach((c, i) => {
      const text = multiLineProblem(c.command);
      if (text) ctx.addIssue({ code: "custom", path: [i, "command"], message: text });
      const cwd = c.cwd === undefined ? null : workspacePathProblem(c.cwd);
      if (cwd) ctx.addIssue({ code: "custom", path: [i, "cwd"], message: cwd });
    });
  }),
}).strict();

/** The session's env-file rules (paths inside the workspace, each once, names only) on top of the tool's shape. */
export const EnvFilesBody = SaveEnvFilesRequest.extend({
  files: SaveEnvFilesRequest.shape.files.pipe(SessionEnvFiles),
}).strict();

export const EnvRequestBody = RequestEnvVariablesRequest;
export type EnvRequestBody = z.infer<typeof RequestEnvVariablesRequest>;

export function requireNotStopped(session: SessionRecord, action: string): void {
  if (session.status === "stopped") throw new ConflictError(`session is stopped: cannot ${action}`, { context: { sessionId: session.id } });
}

export interface AgentToolDeps {
  sessionSettings: SessionSettingsStore;
  /** The session's registered repository, when it names one by id, gets the save too. */
  catalog: Pick<RepoCatalog, "updateRepo">;
  events: LifecycleEventLog;
  connections: ConnectionRegistry;
  push: ClientPush;
  secrets: Pick<OrgSecretStore, "existing">;
  logger: Logger;
  now: () => Date;
}

/**
 * Where a save landed: always the session (its next boot); also the session's registered
 * repository (`repos: [{repoId}]`, issue 24) when the session has exactly one repo and it was
 * named by id, so the repository's next build and every later session naming it get it. A
 * prebuild holds no service commands or env files of its own (its repos do), so it is never a
 * target; a session started from a prebuild saves to its repo when it has exactly one.
 */
export type SavedTo = "session" | "repo";

async function audit(deps: AgentToolDeps, session: SessionRecord, kind: string, message: string): Promise<string> {
  const now = deps.now();
  const id = newSortableId("agt", now);
  const event: LifecycleEvent = {
    eventId: id,
    sessionId: session.id,
    at: now.toISOString(),
    flow: kind,
    outcome: "committed",
    from: session.status,
    to: session.status,
    reason: AGENT_ACTOR,
    actor: AGENT_ACTOR,
    execution: id,
    sandboxId: session.sandboxId,
    previousSandboxId: null,
    message: message.slice(0, 500),
    timings: {},
  };
  await deps.events.append(event);
  return id;
}

/**
 * Saves the service commands the agent found (its `save_service_commands` tool): on the session,
 * so its next boot defines and starts them. The one place a repository or prebuild the session
 * came from will be updated too, once sessions reference those (API.md "Repositories and prebuilds").
 */
export async function persistServiceCommands(deps: AgentToolDeps, session: SessionRecord, commands: ServiceCommand[]): Promise<SavedTo[]> {
  requireNotStopped(session, "save service commands");
  await deps.sessionSettings.saveAgentSettings(session.id, { serviceCommands: commands });
  const toRepo = await saveOnRepo(deps, session, (dir) => {
    const rebased = commands.map((c) => ({ ...c, cwd: posix.relative(dir, posix.normalize(c.cwd ?? ".")) || "." }));
    // A command that runs outside the repository's directory is the session's, not the repo's.
    return rebased.every((c) => !c.cwd.startsWith("..")) ? { serviceCommands: rebased.map((c) => (c.cwd === "." ? omitCwd(c) : c)) } : null;
  });
  await audit(deps, session, "agent:save_service_commands", `saved service commands: ${commands.map((c) => c.name).join(", ")}${toRepo ? ` (also on repo ${toRepo})` : ""}`);
  return toRepo ? ["session", "repo"] : ["session"];
}

/** Saves the env-file spec (paths and key names, never values) the same way as the service commands. */
export async function persistEnvFiles(deps: AgentToolDeps, session: SessionRecord, files: SessionEnvFiles): Promise<SavedTo[]> {
  requireNotStopped(session, "save env files");
  await deps.sessionSettings.saveAgentSettings(session.id, { envFiles: files });
  const toRepo = await saveOnRepo(deps, session, (dir) => {
    const rebased = files.map((f) => ({ ...f, path: posix.relative(dir, posix.normalize(f.path)) }));
    return rebased.every((f) => f.path !== "" && !f.path.startsWith("..")) ? { envFiles: rebased } : null;
  });
  await audit(deps, session, "agent:save_env_files", `saved env files: ${files.map((f) => `${f.path} (${f.keys.map((k) => k.name).join(", ")})`).join("; ")}${toRepo ? ` (also on repo ${toRepo})` : ""}`);
  return toRepo ? ["session", "repo"] : ["session"];
}

function omitCwd(c: ServiceCommand): ServiceCommand {
  return { name: c.name, command: c.command };
}

/**
 * Saves `changes(dir)` on the session's one registered repository (`dir`: its directory relative
 * to the workspace; the repo stores paths relative to its own directory). Null changes: the save
 * reaches outside the repo, so it stays the session's. Returns the repo id saved to, else null.
 */
async function saveOnRepo(deps: AgentToolDeps, session: SessionRecord, changes: (dir: string) => RepoChanges | null): Promise<string | null> {
  const [only, ...rest] = session.repos;
  if (!only?.repoId || rest.length > 0) return null;
  const change = changes(repoDirInWorkspace(only));
  if (!change) return null;
  const saved = await deps.catalog.updateRepo(session.orgId, only.repoId, change, deps.now());
  return saved ? saved.id : null;
}

export interface EnvRequest {
  id: string;
  keys: { name: string; required: boolean; description: string | null; available: boolean }[];
  reason: string | null;
}

/**
 * The agent asks the user for environment variables (its `request_env_variables` tool): every
 * client of the session gets an `env.requested` frame and the audit log records it. A key is
 * `available` when the org already has a secret of that name (the user has nothing to do for it).
 */
export async function requestEnvVariables(deps: AgentToolDeps, session: SessionRecord, body: EnvRequestBody): Promise<EnvRequest> {
  requireNotStopped(session, "request environment variables");
  const existing = await deps.secrets.existing(
    session.orgId,
    body.keys.map((k) => k.name),
  );
  const keys = body.keys.map((k) => ({ name: k.name, required: k.required ?? true, description: k.description ?? null, available: existing.has(k.name) }));
  const missing = keys.filter((k) => !k.available).map((k) => k.name);
  const id = await audit(
    deps,
    session,
    "agent:request_env_variables",
    `asked the user for ${keys.map((k) => k.name).join(", ")}${missing.length < keys.length ? ` (already org secrets: ${keys.filter((k) => k.available).map((k) => k.name).join(", ")})` : ""}${body.reason ? `: ${body.reason}` : ""}`,
  );
  const request: EnvRequest = { id, keys, reason: body.reason ?? null };
  const sent = await broadcast(deps, session.id, { type: "env.requested", requestId: id, keys, reason: request.reason });
  deps.logger.info("env variables requested", { sessionId: session.id, keys: keys.map((k) => k.name), clients: sent });
  return request;
}

export const VerificationBody = VerificationReport;

/**
 * The agent asks for its work to be reviewed (its `verify` tool): the clients of the session get
 * the report (`verification.reported`), the audit log an `agent:verify` entry. The evidence files
 * are listed by the sidecar (names and sizes); their contents stay in the sandbox.
 */
export async function reportVerification(deps: AgentToolDeps, session: SessionRecord, report: VerificationReport): Promise<{ id: string }> {
  requireNotStopped(session, "report a verification");
  const services = report.services.map((s) => `${s.name} ${s.status}${s.exitCode === null ? "" : ` (exit ${s.exitCode})`}`).join(", ");
  const id = await audit(
    deps,
    session,
    "agent:verify",
    `verification reported: ${report.files.length}${report.truncated ? "+" : ""} evidence file(s)${report.folder ? ` in ${report.folder}` : ""}; services: ${services || "none"}`,
  );
  const sent = await broadcast(deps, session.id, { type: "verification.reported", requestId: id, ...report });
  deps.logger.info("verification reported", { sessionId: session.id, files: report.files.length, clients: sent });
  return { id };
}

/** What the snapshot status route answers for one execution. */
export interface AgentSnapshotStatus {
  execution: string;
  status: "pending" | LifecycleEvent["outcome"];
  snapshotId: string | null;
  message: string | null;
}

export async function agentSnapshotStatus(deps: Pick<AgentToolDeps, "events" | "now">, session: SessionRecord, execution: string): Promise<AgentSnapshotStatus> {
  const event = await deps.events.findByExecution(session.id, execution, new Date(deps.now().getTime() - SNAPSHOT_EVENT_WINDOW_MS));
  if (!event) return { execution, status: "pending", snapshotId: null, message: null };
  return { execution, status: event.outcome, snapshotId: event.snapshotId ?? null, message: event.message };
}
