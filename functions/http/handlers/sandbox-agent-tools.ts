/**
 * The routes the agent's own tools reach through the sandbox's sidecar (issue 25 §4; the
 * logic: functions/agent-tools/agent-tools.ts). Like the credential routes
 * (./sandbox-credentials.ts) they are called by a sandbox, never by a person: the sidecar signs
 * each call with the session's sandbox key (`auth: "sandbox"`), so a sandbox can only act on its
 * own session. Bodies are validated like any API input (400 naming the field, 413 over the size
 * limit); a stopped session's sandbox is refused (409).
 *
 * - POST /v1/sandbox/snapshots `{message?}` -> 202 `{snapshot: {execution, status: "pending"}}`:
 *   starts the `snapshot` flow (409 unless the session is running);
 * - GET /v1/sandbox/snapshots/{execution} -> 200 `{snapshot: {execution, status, snapshotId,
 *   message}}`: `pending` until the flow's audit event exists, then its outcome (`committed` with
 *   the snapshot id, `failed`, `skipped`, `superseded`);
 * - PUT /v1/sandbox/service-commands `{commands}` -> 200 `{serviceCommands, savedTo}`;
 * - PUT /v1/sandbox/env-files `{files}` -> 200 `{envFiles, savedTo}` (key names only);
 * - POST /v1/sandbox/env-requests `{keys, reason?}` -> 202 `{envRequest: {id, keys, reason}}`;
 * - POST /v1/sandbox/verifications `{folder, summary, files, truncated, services}` -> 202
 *   `{verification: {id}}`.
 */
import * as z from "zod";
import { NotFoundError } from "../../domain/errors";
import type { SessionRecord } from "../../domain/session";
import { SaveSnapshotRequest } from "../../../sandbox/shared/agent-tool-requests";
import {
  AGENT_ACTOR,
  EnvFilesBody,
  EnvRequestBody,
  ServiceCommandsBody,
  VerificationBody,
  agentSnapshotStatus,
  persistEnvFiles,
  persistServiceCommands,
  reportVerification,
  requestEnvVariables,
  requireNotStopped,
} from "../../agent-tools/agent-tools";
import { httpRoute, type HttpDeps } from "../http-handler";
import { requireStatus, startSessionFlow } from "../session-actions";

async function callingSession(deps: HttpDeps, sessionId: string | null): Promise<SessionRecord> {
  if (!sessionId) throw new Error("route declared auth: sandbox but has no session");
  const session = await deps.sessions.getSession(sessionId);
  if (!session) throw new NotFoundError(`session ${sessionId} not found`);
  return session;
}

/** Step Functions execution names: what `executionName` produces for a snapshot flow. */
const ExecutionParams = z.object({ execution: z.string().regex(/^snapshot-[A-Za-z0-9_-]{1,71}$/, "must be a snapshot execution name") });

export const makeSandboxSaveSnapshotHandler = httpRoute(
  { name: "SandboxSaveSnapshot", auth: "sandbox", body: SaveSnapshotRequest },
  async ({ body, sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    requireStatus(session, ["running"], "save a snapshot");
    const started = await startSessionFlow(deps, session, "snapshot", AGENT_ACTOR, "agent");
    deps.logger.info("agent snapshot requested", { sessionId: session.id, execution: started.executionName, joined: !started.started, message: body.message ?? null });
    return { status: 202, body: { snapshot: { execution: started.executionName, status: "pending" } } };
  },
);

export const makeSandboxSnapshotStatusHandler = httpRoute(
  { name: "SandboxSnapshotStatus", auth: "sandbox", params: ExecutionParams },
  async ({ params, sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    return { status: 200, body: { snapshot: await agentSnapshotStatus(deps, session, params.execution) } };
  },
);

export const makeSandboxServiceCommandsHandler = httpRoute(
  { name: "SandboxServiceCommands", auth: "sandbox", body: ServiceCommandsBody },
  async ({ body, sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    const savedTo = await persistServiceCommands(deps, session, body.commands);
    return { status: 200, body: { serviceCommands: body.commands, savedTo } };
  },
);

export const makeSandboxEnvFilesHandler = httpRoute(
  { name: "SandboxEnvFiles", auth: "sandbox", body: EnvFilesBody },
  async ({ body, sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    const savedTo = await persistEnvFiles(deps, session, body.files);
    return { status: 200, body: { envFiles: body.files, savedTo } };
  },
);

export const makeSandboxEnvRequestHandler = httpRoute(
  { name: "SandboxEnvRequest", auth: "sandbox", body: EnvRequestBody },
  async ({ body, sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    requireNotStopped(session, "request environment variables");
    return { status: 202, body: { envRequest: await requestEnvVariables(deps, session, body) } };
  },
);

export const makeSandboxVerificationHandler = httpRoute(
  { name: "SandboxVerification", auth: "sandbox", body: VerificationBody },
  async ({ body, sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    return { status: 202, body: { verification: await reportVerification(deps, session, body) } };
  },
);
