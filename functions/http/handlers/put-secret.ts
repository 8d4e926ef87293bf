/**
 * PUT /v1/secrets/{name} (API Gateway HTTP API route; API.md "Secrets"), admin only: creates the
 * org's secret or replaces its value (rotation: `createdAt` stays, `updatedAt` moves). The value
 * is envelope-encrypted before it is written (functions/secrets/) and never comes back: the
 * answer is the metadata. An omitted description keeps the stored one; null clears it.
 */
import { PutSecretBody } from "../../contract/requests";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireAdmin } from "../session-access";
import { SecretPathParams } from "../secret-references";

export { PutSecretBody };

export const makePutSecretHandler = httpRoute(
  { name: "PutSecret", auth: true, params: SecretPathParams, body: PutSecretBody },
  async ({ params, body, principal }, deps) => {
    const caller = requireAdmin(principal);
    const secret = await deps.secrets.put({
      orgId: caller.orgId,
      name: params.name,
      value: body.value,
      ...(body.description !== undefined ? { description: body.description } : {}),
      now: deps.now(),
    });
    return { status: 200, body: { secret } };
  },
);

export const handler = lambdaEntry(makePutSecretHandler);
