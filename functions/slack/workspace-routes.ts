/**
 * `PUT|GET|DELETE /v1/slack/workspace` (API.md "Slack"): binds a Slack team to the caller's org
 * (*admin*; a team bound to another org: 409), shows it (404 when none), unbinds it (204).
 * `defaultRepo` is `<owner>/<repo>` or a git URL, stored as the clone URL.
 */
import * as z from "zod";
import { ConflictError, NotFoundError, ValidationError } from "../domain/errors";
import { httpRoute, type HttpDeps, type HttpHandler } from "../http/http-handler";
import { requireAdmin, requirePrincipal } from "../http/session-access";
import { repoUrlProblem } from "../http/request-fields";
import type { SlackStore, SlackWorkspace } from "../ports/slack";
import { repoUrlOf } from "./command-text";

export const PutWorkspaceBody = z
  .object({
    teamId: z.string().regex(/^[TE][A-Z0-9]{2,30}$/, "must be a Slack team id (T... or E...)"),
    defaultRepo: z.string().min(1).max(2048).nullable().optional(),
  })
  .strict();

function view(w: SlackWorkspace) {
  return { teamId: w.teamId, defaultRepo: w.defaultRepo, createdAt: w.createdAt, updatedAt: w.updatedAt };
}

export function makePutSlackWorkspaceHandler(store: SlackStore): (deps: HttpDeps) => HttpHandler {
  return httpRoute({ name: "PutSlackWorkspace", auth: true, body: PutWorkspaceBody }, async ({ body, principal }, deps) => {
    const who = requireAdmin(principal);
    let defaultRepo: string | null = null;
    if (body.defaultRepo) {
      defaultRepo = repoUrlOf(body.defaultRepo);
      const problem = defaultRepo ? repoUrlProblem(defaultRepo) : "must be <owner>/<repo> or a git URL";
      if (problem || !defaultRepo) throw new ValidationError(`body.defaultRepo: ${problem ?? "must be <owner>/<repo> or a git URL"}`);
    }
    const bound = await store.bindWorkspace({ teamId: body.teamId, orgId: who.orgId, defaultRepo, now: deps.now() });
    if (bound === "conflict") throw new ConflictError(`Slack team ${body.teamId} is bound to another org`);
    deps.logger.info("slack workspace bound", { teamId: body.teamId, orgId: who.orgId });
    return { status: 200, body: { workspace: view(bound) } };
  });
}

export function makeGetSlackWorkspaceHandler(store: SlackStore): (deps: HttpDeps) => HttpHandler {
  return httpRoute({ name: "GetSlackWorkspace", auth: true }, async ({ principal }) => {
    const who = requirePrincipal(principal);
    const workspace = await store.workspaceOfOrg(who.orgId);
    if (!workspace) throw new NotFoundError("no Slack workspace is bound to this org");
    return { status: 200, body: { workspace: view(workspace) } };
  });
}

export function makeDeleteSlackWorkspaceHandler(store: SlackStore): (deps: HttpDeps) => HttpHandler {
  return httpRoute({ name: "DeleteSlackWorkspace", auth: true }, async ({ principal }) => {
    const who = requireAdmin(principal);
    const workspace = await store.workspaceOfOrg(who.orgId);
    if (!workspace) throw new NotFoundError("no Slack workspace is bound to this org");
    await store.unbindWorkspace(workspace.teamId, who.orgId);
    return { status: 204 };
  });
}
