/**
 * GET and PUT /v1/org/model: the org's default agent model and the org secret holding its
 * provider key. A session's own `model` overrides it; with neither, sandboxes use the deployment
 * default (its own Anthropic key, else the development model). PUT is admin-only and checks that
 * the named secret exists; `{"model": null}` clears the default. Sandboxes already running keep
 * their model; the next boot (resume, restore, migration) reads the new one. `fallbackModels` is
 * the org's default failover chain, copied into sessions created without their own.
 */
import * as z from "zod";
import { SupportedAgentModel, chainKeyConflict, fallbackModelList } from "../../domain/agent-settings";
import { ValidationError } from "../../domain/errors";
import { MAX_FALLBACK_MODELS } from "../../domain/session";
import { httpRoute } from "../http-handler";
import { requireAdmin, requirePrincipal } from "../session-access";
import { requireSecretsExist } from "../secret-references";

/**
 * `fallbackModels`: the org's default failover chain (seed 004; API.md is silent, so it lives
 * beside the default model): sessions created without their own `fallbackModels` copy it.
 * Omitted in a PUT: the stored chain is kept; `[]` clears it.
 */
export const OrgModelBody = z.object({ model: SupportedAgentModel.nullable(), fallbackModels: fallbackModelList(MAX_FALLBACK_MODELS).optional() }).strict();

export const makeGetOrgModelHandler = httpRoute({ name: "GetOrgModel", auth: true }, async ({ principal }, deps) => {
  const who = requirePrincipal(principal);
  const [model, fallbackModels] = await Promise.all([deps.orgSettings.getModel(who.orgId), deps.orgSettings.getFallbackModels(who.orgId)]);
  return { status: 200, body: { model, fallbackModels } };
});

export const makePutOrgModelHandler = httpRoute({ name: "PutOrgModel", auth: true, body: OrgModelBody }, async ({ principal, body }, deps) => {
  const who = requirePrincipal(principal);
  requireAdmin(who);
  const fallbackModels = body.fallbackModels ?? (await deps.orgSettings.getFallbackModels(who.orgId));
  const conflict = chainKeyConflict([...(body.model ? [body.model] : []), ...fallbackModels]);
  if (conflict) throw new ValidationError(`body.fallbackModels: ${conflict}`);
  const refs = [
    ...(body.model?.apiKeySecret ? [{ field: "body.model.apiKeySecret", name: body.model.apiKeySecret }] : []),
    ...(body.fallbackModels ?? []).flatMap((m, i) => (m.apiKeySecret ? [{ field: `body.fallbackModels.${i}.apiKeySecret`, name: m.apiKeySecret }] : [])),
  ];
  if (refs.length > 0) await requireSecretsExist(deps.secrets, who.orgId, refs);
  await deps.orgSettings.putModel(who.orgId, body.model, deps.now());
  if (body.fallbackModels) await deps.orgSettings.putFallbackModels(who.orgId, body.fallbackModels, deps.now());
  deps.logger.info("org model set", { orgId: who.orgId, modelId: body.model?.id ?? null, fallbackModels: fallbackModels.map((m) => m.id) });
  return { status: 200, body: { model: body.model, fallbackModels } };
});
