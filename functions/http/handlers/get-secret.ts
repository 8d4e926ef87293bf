/**
 * GET /v1/secrets/{name} (API Gateway HTTP API route; API.md "Secrets"): one secret's metadata,
 * never its value. Any role; the caller's org only: another org's secret is as unknown as a
 * missing one (404).
 */
import { NotFoundError } from "../../domain/errors";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";
import { SecretPathParams } from "../secret-references";

export const makeGetSecretHandler = httpRoute(
  { name: "GetSecret", auth: true, params: SecretPathParams },
  async ({ params, principal }, deps) => {
    const secret = await deps.secrets.get(requirePrincipal(principal).orgId, params.name);
    if (!secret) throw new NotFoundError(`secret ${params.name} not found`);
    return { status: 200, body: { secret } };
  },
);

export const handler = lambdaEntry(makeGetSecretHandler);
