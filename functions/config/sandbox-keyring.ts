/**
 * The control plane's sandbox keys (sandbox/shared/access-token.ts): one master key, from which
 * every session's sandbox key (the sidecar's credential) is derived, per key epoch.
 *
 * - AWS: a generated Secrets Manager secret (SANDBOX_ACCESS_KEY_SECRET_ARN, a plain string),
 *   read once per container on first use;
 * - local and tests: SANDBOX_ACCESS_KEY directly (the local runtime generates one).
 *
 * A session's current key is its committed `sandboxKeyEpoch`'s (issue 14 §2: each freshly booted
 * sandbox gets a new one), read from the session record by `epochs` on every call, so callers
 * that only know the session id (agent calls, access tokens) always match the sandbox the session
 * points at. Without `epochs` every session is at epoch 0 (the v1 key).
 *
 * The master key and the keys derived from it never reach logs, errors or API responses.
 * The Secrets Manager SDK is loaded with the secret (functions/adapters/aws/sdk-client.ts).
 */
import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { deriveSandboxKey } from "../../sandbox/shared/access-token";
import { secretsManagerClient, type ClientFactory } from "../adapters/aws/sdk-client";
import type { SessionStore } from "../ports/session-store";

export interface SandboxKeyring {
  /** The session's sandbox key at `epoch`, default its current epoch: what its sidecar holds. */
  sandboxKey(sessionId: string, epoch?: number): Promise<string>;
  /** The session's current key epoch (0 for a session stored before epochs, or an unknown one). */
  currentEpoch(sessionId: string): Promise<number>;
}

/** Where a keyring learns a session's current key epoch. */
export type KeyEpochs = (sessionId: string) => Promise<number>;

/** Every session at epoch 0 (v1 keys): tests and tools that never rotate. */
export const v1Epochs: KeyEpochs = () => Promise.resolve(0);

/** The epoch stored on the session record. */
export function sessionKeyEpochs(sessions: Pick<SessionStore, "getSession">): KeyEpochs {
  return async (sessionId) => (await sessions.getSession(sessionId))?.sandboxKeyEpoch ?? 0;
}

function keyring(master: () => Promise<string>, epochs: KeyEpochs): SandboxKeyring {
  return {
    async sandboxKey(sessionId, epoch) {
      const at = epoch ?? (await epochs(sessionId));
      return deriveSandboxKey(await master(), sessionId, at);
    },
    currentEpoch: epochs,
  };
}

/** A keyring over a master key that is already in memory. */
export function staticKeyring(masterKey: string, epochs: KeyEpochs = v1Epochs): SandboxKeyring {
  deriveSandboxKey(masterKey, "probe"); // fails fast on a key that is too short
  return keyring(() => Promise.resolve(masterKey), epochs);
}

/** A keyring whose master key is loaded once, on first use; a failed load is retried by the next call. */
export function lazyKeyring(load: () => Promise<string>, epochs: KeyEpochs = v1Epochs): SandboxKeyring {
  let master: Promise<string> | undefined;
  return keyring(() => {
    master ??= load().catch((err: unknown) => {
      master = undefined;
      throw err;
    });
    return master;
  }, epochs);
}

export function keyringFromEnv(
  env: Record<string, string | undefined>,
  client: ClientFactory<SecretsManagerClient> = secretsManagerClient,
  epochs: KeyEpochs = v1Epochs,
): SandboxKeyring {
  const direct = env.SANDBOX_ACCESS_KEY;
  if (direct) return staticKeyring(direct, epochs);
  const arn = env.SANDBOX_ACCESS_KEY_SECRET_ARN;
  if (!arn) {
    return lazyKeyring(() => Promise.reject(new Error("invalid configuration: neither SANDBOX_ACCESS_KEY nor SANDBOX_ACCESS_KEY_SECRET_ARN is set")), epochs);
  }
  return lazyKeyring(async () => {
    const [secrets, { GetSecretValueCommand }] = await Promise.all([client(), import("@aws-sdk/client-secrets-manager")]);
    const out = await secrets.send(new GetSecretValueCommand({ SecretId: arn }));
    const value = out.SecretString ?? "";
    if (value.length < 32) throw new Error("invalid configuration: the SANDBOX_ACCESS_KEY_SECRET_ARN secret must be a string of at least 32 characters");
    return value;
  }, epochs);
}
