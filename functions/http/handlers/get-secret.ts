/**
 * GET /v1/secrets/{name} (API Gateway HTTP API route; API.md "Secrets"): one secret's metadata,
 * never its value. Any role; the caller's org only: another org's secret is as unknown as a
 * missing one (404).
 */
import * as z from "zod";
import { NotFoundError } from "../../domain/errors";
import { SECRET_NAME_PATTERN } from "../../ports/org-secrets";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requirePrincipal } from "../session-access";

export const SecretPathParams = z
  .object({ name: z.string().regex(SECRET_NAME_PATTERN, "must match [A-Za-z_][A-Za-z0-9_]{0,127} (letters, digits and '_', not starting with a digit)") })
  .strict();

export const makeGetSecretHandler = httpRoute(
  { name: "GetSecret", auth: true, params: SecretPathParams },
  async ({ params, principal }, deps) => {
    const secret = await deps.secrets.get(requirePrincipal(principal).orgId, params.name);
    if (!secret) throw new NotFoundError(`secret ${params.name} not found`);
    return { status: 200, body: { secret } };
  },
);

export const handler = lambdaEntry(makeGetSecretHandler);
