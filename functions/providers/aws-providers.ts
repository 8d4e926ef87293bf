/**
 * Sandbox providers in AWS, built on first use from the provider secret. Only the entries whose
 * code calls a provider import this module (and so bundle the provider SDKs): the sandbox flow
 * steps, the sweeper and the sidecar access route. Every other entry gets `noProviders`
 * (functions/composition/lambda.ts), and a bundle without Modal, E2B, gRPC and protobuf.
 */
import type { ProviderBinding } from "../composition/lambda";
import { providerEnvironment } from "../config/provider-secrets";
import { createSandboxProvider } from "./provider-factory";

/** Providers built on first use from the provider secret; a failed build is retried by the next call. */
export const awsProviders: ProviderBinding = (config, env) => {
  const providers = new Map<Parameters<ReturnType<ProviderBinding>>[0], ReturnType<ReturnType<ProviderBinding>>>();
  return (type) => {
    let p = providers.get(type);
    if (!p) {
      p = providerEnvironment(env).then((providerEnv) => createSandboxProvider(type, { sandboxTimeoutSeconds: config.SANDBOX_TIMEOUT_SECONDS, env: providerEnv, ...(config.LOCAL_SANDBOX_DIR ? { localDataDir: config.LOCAL_SANDBOX_DIR } : {}) }));
      p.catch(() => providers.delete(type));
      providers.set(type, p);
    }
    return p;
  };
};
