/**
 * GET and PUT /v1/org/model: the org's default agent model and the org secret holding its
 * provider key. A session's own `model` overrides it; with neither, sandboxes use the deployment
 * default (its own Anthropic key, else the development model). PUT is admin-only and checks that
 * the named secret exists; `{"model": null}` clears the default. Sandboxes already running keep
 * their model; the next boot (resume, restore, migration) reads the new one.
 */
import * as z from "zod";
import { SupportedAgentModel } from "../../domain/agent-settings";
import { httpRoute } from "../http-handler";
import { requireAdmin, requirePrincipal } from "../session-access";
import { requireSecretsExist } from "../secret-references";

export const OrgModelBody = z.object({ model: SupportedAgentModel.nullable() }).strict();

export const makeGetOrgModelHandler = httpRoute({ name: "GetOrgModel", auth: true }, async ({ principal }, deps) => {
  const who = requirePrincipal(principal);
  return { status: 200, body: { model: await deps.orgSettings.getModel(who.orgId) } };
});

export const makePutOrgModelHandler = httpRoute({ name: "PutOrgModel", auth: true, body: OrgModelBody }, async ({ principal, body }, deps) => {
  const who = requirePrincipal(principal);
  requireAdmin(who);
  if (body.model?.apiKeySecret) {
    await requireSecretsExist(deps.secrets, who.orgId, [{ field: "body.model.apiKeySecret", name: body.model.apiKeySecret }]);
  }
  await deps.orgSettings.putModel(who.orgId, body.model, deps.now());
  deps.logger.info("org model set", { orgId: who.orgId, modelId: body.model?.id ?? null });
  return { status: 200, body: { model: body.model } };
});
