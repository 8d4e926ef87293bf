/**
 * Provider credentials in AWS: one Secrets Manager secret (PROVIDER_SECRET_ARN) holding a JSON
 * object such as `{"MODAL_TOKEN_ID": "...", "E2B_API_KEY": "..."}`, read once per container on
 * first use and merged over the environment. Values never reach logs or errors: a bad secret is
 * reported by its shape only. The Secrets Manager SDK is loaded with the secret
 * (functions/adapters/aws/sdk-client.ts).
 */
import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as z from "zod";
import { secretsManagerClient } from "../adapters/aws/sdk-client";

const SecretShape = z.record(z.string(), z.string());

let cached: Promise<Record<string, string | undefined>> | undefined;

export function providerEnvironment(env: Readonly<Record<string, string | undefined>>, client?: SecretsManagerClient): Promise<Record<string, string | undefined>> {
  cached ??= load(env, client).catch((err: unknown) => {
    cached = undefined; // a transient failure must not poison the container
    throw err;
  });
  return cached;
}

async function load(env: Readonly<Record<string, string | undefined>>, client: SecretsManagerClient | undefined): Promise<Record<string, string | undefined>> {
  const arn = env.PROVIDER_SECRET_ARN;
  if (!arn) return { ...env };
  const [secrets, { GetSecretValueCommand }] = await Promise.all([client ?? secretsManagerClient(), import("@aws-sdk/client-secrets-manager")]);
  const out = await secrets.send(new GetSecretValueCommand({ SecretId: arn }));
  let parsed: unknown;
  try {
    parsed = JSON.parse(out.SecretString ?? "");
  } catch {
    throw new Error("invalid configuration: the PROVIDER_SECRET_ARN secret is not a JSON object");
  }
  const values = SecretShape.safeParse(parsed);
  if (!values.success) throw new Error("invalid configuration: the PROVIDER_SECRET_ARN secret must map names to string values");
  return { ...env, ...values.data };
}

/** Tests only: forget the cached secret. */
export function resetProviderEnvironment(): void {
  cached = undefined;
}
