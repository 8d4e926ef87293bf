/**
 * The sidecar as the sandbox's credential broker (issue 23): git asks (through the CLI's
 * credential helper and the in-sandbox socket) for the credential of `protocol://host/path`,
 * and the broker answers from memory or from the control plane. Credentials live in this
 * process's memory only: never on disk, in git's config or in anyone's environment.
 *
 * A credential is served from the cache until `CREDENTIAL_REFRESH_MARGIN_MS` before it expires,
 * then asked for again, so a rotated org token reaches a long-running sandbox and git never
 * holds one that expires mid-push. "No credential" (404) is not cached: a credential the org
 * adds later works on the next ask. Env values are never cached (org secrets are the source of
 * truth each time `env apply` runs).
 */
import type { ControlPlaneClient, GitCredential, GitCredentialRequest } from "./control-plane-client";

/** Refetch this long before a credential's `expiresAt`. */
export const CREDENTIAL_REFRESH_MARGIN_MS = 60_000;

export function credentialCacheKey(request: GitCredentialRequest): string {
  return `${request.protocol}://${request.host}/${request.path ?? ""}`;
}

/** Until when (epoch ms, exclusive) a credential may be served from the cache; null: never cached. */
export function cacheableUntil(credential: GitCredential): number | null {
  return credential.expiresAt === null ? null : credential.expiresAt - CREDENTIAL_REFRESH_MARGIN_MS;
}

export interface BrokeredCredential {
  credential: GitCredential | null;
  /** Served from memory (no control-plane call). */
  cached: boolean;
}

export class CredentialBroker {
  private readonly cache = new Map<string, { credential: GitCredential; until: number }>();
  /** One control-plane call per key at a time: git may ask twice in quick succession. */
  private readonly inFlight = new Map<string, Promise<GitCredential | null>>();

  constructor(
    private readonly client: Pick<ControlPlaneClient, "gitCredential" | "envValues">,
    private readonly now: () => number = Date.now,
  ) {}

  async gitCredential(request: GitCredentialRequest): Promise<BrokeredCredential> {
    const key = credentialCacheKey(request);
    const hit = this.cache.get(key);
    if (hit && this.now() < hit.until) return { credential: hit.credential, cached: true };
    if (hit) this.cache.delete(key);
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.client.gitCredential(request).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    const credential = await pending;
    const until = credential ? cacheableUntil(credential) : null;
    if (credential && until !== null && this.now() < until) this.cache.set(key, { credential, until });
    return { credential, cached: false };
  }

  envValues(): Promise<Record<string, string>> {
    return this.client.envValues();
  }

  /** Forgets every credential (the sidecar is closing). */
  clear(): void {
    this.cache.clear();
  }
}
