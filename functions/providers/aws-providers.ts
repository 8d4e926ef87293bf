/**
 * Sandbox providers in AWS, built on first use from the provider secret. Only the entries whose
 * code calls a provider import this module (and so bundle the provider SDKs): the sandbox flow
 * steps, the sweeper and the sidecar access route. Every other entry gets `noProviders`
 * (functions/flows/lambda-entry.ts), and a bundle without Modal, E2B, gRPC and protobuf.
 */
import type { Config } from "../config/config";
import { providerEnvironment } from "../config/provider-secrets";
import type { ProviderType } from "../domain/session";
import type { SandboxProvider } from "../ports/sandbox-provider";
import { createSandboxProvider } from "./provider-factory";

/** Providers built on first use from the provider secret; a failed build is retried by the next call. */
export function awsProviders(config: Config): (type: ProviderType) => Promise<SandboxProvider> {
  const providers = new Map<ProviderType, Promise<SandboxProvider>>();
  return (type) => {
    let p = providers.get(type);
    if (!p) {
      p = providerEnvironment().then((env) => createSandboxProvider(type, { sandboxTimeoutSeconds: config.SANDBOX_TIMEOUT_SECONDS, env, ...(config.LOCAL_SANDBOX_DIR ? { localDataDir: config.LOCAL_SANDBOX_DIR } : {}) }));
      p.catch(() => providers.delete(type));
      providers.set(type, p);
    }
    return p;
  };
}
