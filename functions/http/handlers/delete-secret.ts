/**
 * DELETE /v1/secrets/{name} (API Gateway HTTP API route; API.md "Secrets"), admin only: 204, or
 * 404 when the org has no such secret. Sessions that name it can no longer get its value.
 */
import { NotFoundError } from "../../domain/errors";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireAdmin } from "../session-access";
import { SecretPathParams } from "../secret-references";

export const makeDeleteSecretHandler = httpRoute(
  { name: "DeleteSecret", auth: true, params: SecretPathParams },
  async ({ params, principal }, deps) => {
    const caller = requireAdmin(principal);
    if (!(await deps.secrets.delete(caller.orgId, params.name))) throw new NotFoundError(`secret ${params.name} not found`);
    return { status: 204 };
  },
);

export const handler = lambdaEntry(makeDeleteSecretHandler);
