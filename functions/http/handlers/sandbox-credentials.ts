/**
 * The routes a sandbox calls back on (never a person): its sidecar signs each call with the
 * session's sandbox key (`auth: "sandbox"`), so a sandbox can only ever read its own session's
 * credentials. Values travel only in these responses (over TLS in AWS), and only to the sidecar,
 * which keeps them in memory: they are never logged, stored on the session, or put in the boot
 * spec or the sandbox's environment.
 *
 * - POST /v1/sandbox/git-credential `{protocol, host, path?}` -> `200 {credential: {username,
 *   password, expiresAt}}` for a session repo that names a credential, else 404.
 * - POST /v1/sandbox/env-values `{}` -> `200 {values}`: the session's env-file keys that its
 *   org's secrets hold (`env apply` in the sandbox writes them).
 * A stopped session's sandbox gets nothing (409): it should not be running.
 *
 * A build sandbox (issue 24; functions/builds/build-sandbox.ts) may ask for git credentials too:
 * for the repositories of its own build as stored now, and only while that build runs (409 once
 * it ended, 404 for a build the control plane does not know). It gets no env values.
 */
import * as z from "zod";
import { ConflictError, NotFoundError } from "../../domain/errors";
import type { RepoSpec, SessionRecord } from "../../domain/session";
import { buildStillRunning } from "../../builds/build-sandbox";
import { loadBuildPlan } from "../../builds/build-start";
import { envFileValues, matchCredentialRepo, OrgSecretGitCredentials } from "../../sandbox-access/git-credentials";
import { httpRoute, type HttpDeps } from "../http-handler";

const GitCredentialBody = z
  .object({
    protocol: z.enum(["http", "https"]),
    host: z.string().min(1).max(255),
    path: z.string().max(2048).optional(),
  })
  .strict();

async function callingSession(deps: HttpDeps, sessionId: string | null): Promise<SessionRecord> {
  if (!sessionId) throw new Error("route declared auth: sandbox but has no session");
  const session = await deps.sessions.getSession(sessionId);
  if (!session) throw new NotFoundError(`session ${sessionId} not found`);
  if (session.status === "stopped") throw new ConflictError("session is stopped: its sandbox gets no credentials");
  return session;
}

/** The running build whose sandbox called, with the repositories its plan clones. */
async function callingBuild(deps: HttpDeps, buildId: string): Promise<{ orgId: string; repos: RepoSpec[] }> {
  const build = await deps.catalog.findBuild(buildId);
  if (!build) throw new NotFoundError(`build ${buildId} not found`);
  if (!buildStillRunning(build, deps.now())) throw new ConflictError("the build has ended: its sandbox gets no credentials");
  const plan = await loadBuildPlan(deps.catalog, build.orgId, build.target);
  if ("missing" in plan) throw new ConflictError(plan.missing);
  return { orgId: build.orgId, repos: plan.repos };
}

export const makeSandboxGitCredentialHandler = httpRoute(
  { name: "SandboxGitCredential", auth: "sandbox", buildSandboxes: true, body: GitCredentialBody },
  async ({ body, sandboxSessionId, sandboxBuildId }, deps) => {
    const caller = sandboxBuildId ? await callingBuild(deps, sandboxBuildId) : await callingSession(deps, sandboxSessionId);
    const repo = matchCredentialRepo(caller.repos, body);
    const credential = repo ? await new OrgSecretGitCredentials(deps.secrets).credentialFor({ orgId: caller.orgId, repo, now: deps.now() }) : null;
    if (!credential) throw new NotFoundError(`no credential for ${body.protocol}://${body.host}/${body.path ?? ""}`);
    deps.logger.info("git credential served", { ...(sandboxBuildId ? { buildId: sandboxBuildId } : { sessionId: sandboxSessionId }), host: body.host, credential: repo?.credential });
    return { status: 200, body: { credential: { ...credential, expiresAt: credential.expiresAt.toISOString() } } };
  },
);

export const makeSandboxEnvValuesHandler = httpRoute(
  { name: "SandboxEnvValues", auth: "sandbox", body: z.object({}).strict() },
  async ({ sandboxSessionId }, deps) => {
    const session = await callingSession(deps, sandboxSessionId);
    const values = await envFileValues(deps.secrets, session.orgId, session.envFiles);
    deps.logger.info("env values served", { sessionId: session.id, keys: Object.keys(values) });
    return { status: 200, body: { values } };
  },
);
