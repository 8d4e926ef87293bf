/**
 * Provider factory (seed 003 §6.1): the session's stored `provider` picks the implementation,
 * so resume always uses the creator's provider; `DEFAULT_SANDBOX_PROVIDER` applies only to new
 * sessions. Providers are stateless; the SDK modules load only when that provider is used.
 */
import { ValidationError } from "../domain/errors";
import type { ProviderType } from "../domain/session";
import type { SandboxProvider } from "../ports/sandbox-provider";
import { DEPLOYMENT_MODEL_VARS } from "./sandbox-boot";
import { DEV_MODEL_REQUIRED_KEY_ENV } from "./local/opencode-launch";

export interface ProviderSettings {
  /** Local provider: where sandboxes and snapshots live. */
  localDataDir?: string;
  sandboxTimeoutSeconds: number;
  /** Environment handed to providers (LLM keys, provider credentials). Never logged. */
  env: Record<string, string | undefined>;
}

export async function createSandboxProvider(type: ProviderType, settings: ProviderSettings): Promise<SandboxProvider> {
  const env = Object.fromEntries(Object.entries(settings.env).filter((e): e is [string, string] => e[1] !== undefined));
  switch (type) {
    case "local": {
      if (!settings.localDataDir) throw new ValidationError("the local provider needs a data directory");
      const { LocalSandboxProvider } = await import("./local");
      return new LocalSandboxProvider({
        dataDir: settings.localDataDir,
        sandboxTimeoutSeconds: settings.sandboxTimeoutSeconds,
        env: pick(env, [...DEPLOYMENT_MODEL_VARS, DEV_MODEL_REQUIRED_KEY_ENV]),
      });
    }
    case "modal": {
      const { ModalSandboxProvider, createModalSdk, parseModalSandboxBackend } = await import("./modal/modal-provider");
      const tokenId = env.MODAL_TOKEN_ID;
      const tokenSecret = env.MODAL_TOKEN_SECRET;
      if (!tokenId || !tokenSecret) throw new ValidationError("modal provider: MODAL_TOKEN_ID and MODAL_TOKEN_SECRET are not configured");
      // Chosen here, never by the SDK's ambient MODAL_SANDBOX_V2 (modal-provider.ts header).
      const sandboxBackend = parseModalSandboxBackend(env.MODAL_SANDBOX_BACKEND);
      return new ModalSandboxProvider(createModalSdk({ tokenId, tokenSecret, sandboxBackend }), {
        appName: env.MODAL_APP_NAME ?? "sandbox-control-plane",
        sandboxBackend,
        timeoutSeconds: settings.sandboxTimeoutSeconds,
        modelEnv: pick(env, DEPLOYMENT_MODEL_VARS),
        ...(env.MODAL_BASE_IMAGE ? { baseImage: env.MODAL_BASE_IMAGE } : {}),
        ...(env.MODAL_BASE_SNAPSHOT_ID ? { baseSnapshotId: env.MODAL_BASE_SNAPSHOT_ID } : {}),
        filesystemSnapshotTtlSeconds: modalFilesystemSnapshotTtlSeconds(env.MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS),
      });
    }
    case "e2b": {
      const { E2BSandboxProvider, createE2BSdk } = await import("./e2b/e2b-provider");
      const apiKey = env.E2B_API_KEY;
      if (!apiKey) throw new ValidationError("e2b provider: E2B_API_KEY is not configured");
      // No default: E2B's stock "base" template has no boot script (the constructor says more).
      const template = env.E2B_TEMPLATE;
      if (!template) throw new ValidationError("e2b provider: E2B_TEMPLATE is not configured (the template built from sandbox/image, see sandbox/image/README.md)");
      return new E2BSandboxProvider(createE2BSdk({ apiKey }), {
        template,
        timeoutSeconds: settings.sandboxTimeoutSeconds,
        modelEnv: pick(env, DEPLOYMENT_MODEL_VARS),
      });
    }
  }
}

/**
 * `MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS` (issue 22 §3): whole seconds, 0 or unset = kept until
 * the control plane deletes them. Anything else fails the provider's creation naming the variable.
 */
export function modalFilesystemSnapshotTtlSeconds(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === "") return 0;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new ValidationError("modal provider: MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS must be a whole number of seconds (0: keep until deleted)");
  }
  return value;
}

function pick(env: Record<string, string>, names: readonly string[]): Record<string, string> {
  return Object.fromEntries(names.filter((n) => env[n] !== undefined).map((n) => [n, env[n] as string]));
}
