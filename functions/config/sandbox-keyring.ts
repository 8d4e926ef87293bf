/**
 * The control plane's sandbox keys (sandbox/shared/access-token.ts): one master key, from which
 * every session's sandbox key (the sandbox's `SIDECAR_TOKEN`) is derived.
 *
 * - AWS: a generated Secrets Manager secret (SANDBOX_ACCESS_KEY_SECRET_ARN, a plain string),
 *   read once per container on first use;
 * - local and tests: SANDBOX_ACCESS_KEY directly (the local runtime generates one).
 *
 * The master key and the keys derived from it never reach logs, errors or API responses.
 */
import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { deriveSandboxKey } from "../../sandbox/shared/access-token";

export interface SandboxKeyring {
  /** The session's sandbox key: what its sandboxes get as `SIDECAR_TOKEN`. */
  sandboxKey(sessionId: string): Promise<string>;
}

/** A keyring over a master key that is already in memory. */
export function staticKeyring(masterKey: string): SandboxKeyring {
  deriveSandboxKey(masterKey, "probe"); // fails fast on a key that is too short
  return { sandboxKey: (sessionId) => Promise.resolve(deriveSandboxKey(masterKey, sessionId)) };
}

/** A keyring whose master key is loaded once, on first use; a failed load is retried by the next call. */
export function lazyKeyring(load: () => Promise<string>): SandboxKeyring {
  let master: Promise<string> | undefined;
  return {
    async sandboxKey(sessionId) {
      master ??= load().catch((err: unknown) => {
        master = undefined;
        throw err;
      });
      return deriveSandboxKey(await master, sessionId);
    },
  };
}

export function keyringFromEnv(env: Record<string, string | undefined>, client: () => SecretsManagerClient = () => new SecretsManagerClient({})): SandboxKeyring {
  const direct = env.SANDBOX_ACCESS_KEY;
  if (direct) return staticKeyring(direct);
  const arn = env.SANDBOX_ACCESS_KEY_SECRET_ARN;
  if (!arn) {
    return lazyKeyring(() => Promise.reject(new Error("invalid configuration: neither SANDBOX_ACCESS_KEY nor SANDBOX_ACCESS_KEY_SECRET_ARN is set")));
  }
  return lazyKeyring(async () => {
    const out = await client().send(new GetSecretValueCommand({ SecretId: arn }));
    const value = out.SecretString ?? "";
    if (value.length < 32) throw new Error("invalid configuration: the SANDBOX_ACCESS_KEY_SECRET_ARN secret must be a string of at least 32 characters");
    return value;
  });
}
