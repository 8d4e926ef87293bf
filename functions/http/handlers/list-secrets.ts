/**
 * GET /v1/secrets (API Gateway HTTP API route; API.md "Secrets"): the caller's org's secrets'
 * metadata by name, never a value. Any role.
 */
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";

export const makeListSecretsHandler = httpRoute({ name: "ListSecrets", auth: true }, async ({ principal }, deps) => {
  const items = await deps.secrets.list(requirePrincipal(principal).orgId);
  return { status: 200, body: { items } };
});

export const handler = lambdaEntry(makeListSecretsHandler);
