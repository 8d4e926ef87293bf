/**
 * PUT /v1/secrets/{name} (API Gateway HTTP API route; API.md "Secrets"), admin only: creates the
 * org's secret or replaces its value (rotation: `createdAt` stays, `updatedAt` moves). The value
 * is envelope-encrypted before it is written (functions/secrets/) and never comes back: the
 * answer is the metadata. An omitted description keeps the stored one; null clears it.
 */
import * as z from "zod";
import { MAX_SECRET_VALUE_BYTES } from "../../secrets/envelope-cipher";
import { refineSingleLine } from "../../domain/text";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { requireAdmin } from "../session-access";
import { SecretPathParams } from "../secret-references";

export const PutSecretBody = z
  .object({
    value: z
      .string()
      .min(1)
      .max(MAX_SECRET_VALUE_BYTES)
      // Messages name the limit, never the value.
      .refine((v) => Buffer.byteLength(v, "utf8") <= MAX_SECRET_VALUE_BYTES, `must be at most ${MAX_SECRET_VALUE_BYTES} bytes (UTF-8)`),
    description: z.string().max(500).superRefine(refineSingleLine).nullable().optional(),
  })
  .strict();

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
