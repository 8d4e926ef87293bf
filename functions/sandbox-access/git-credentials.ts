/**
 * Git credentials for a session's sandbox (issue 23; seed 003 §6.7 "re-write git credentials
 * before pulling", seed 004 "HTTPS credential helper"). The sandbox never holds a token at rest:
 * git's credential helper asks the sidecar, the sidecar asks the control plane here, and the
 * answer is short-lived (the sidecar caches it until `expiresAt`, then asks again, so a rotated
 * secret reaches a running sandbox without a restart).
 *
 * The source is a port so the kind of credential can change without touching the sandbox:
 * - today `OrgSecretGitCredentials`: the repo's `credential` names an org secret holding a
 *   personal access token, sent as the password of user `x-access-token` (GitHub, GitLab and
 *   Bitbucket all accept a token as the password of that form);
 * - a GitHub App later: a source that reads the app id, private key and installation id (an
 *   org secret or org settings), signs an app JWT, calls
 *   `POST /app/installations/{id}/access_tokens` scoped to the one repository, and returns that
 *   token with GitHub's own `expires_at` (1 h). Same username, same route, same sandbox side.
 */
import type { RepoSpec } from "../domain/session";
import type { OrgSecretStore } from "../ports/org-secrets";

export interface GitCredentialRequest {
  protocol: "http" | "https";
  /** `host[:port]`, as git sends it. */
  host: string;
  /** The repository path (`acme/app.git`); git sends it because the sandbox sets `credential.useHttpPath`. */
  path?: string | undefined;
}

export interface GitCredential {
  username: string;
  password: string;
  expiresAt: Date;
}

export interface GitCredentialSource {
  /** The credential for `repo` (which names one), or null when it no longer resolves. */
  credentialFor(input: { orgId: string; repo: RepoSpec & { credential: string }; now: Date }): Promise<GitCredential | null>;
}

/** How long a sandbox may use a credential before asking again (a PAT itself does not expire). */
export const GIT_CREDENTIAL_TTL_SECONDS = 900;

export class OrgSecretGitCredentials implements GitCredentialSource {
  constructor(
    private readonly secrets: Pick<OrgSecretStore, "reveal">,
    private readonly ttlSeconds = GIT_CREDENTIAL_TTL_SECONDS,
  ) {}

  async credentialFor(input: { orgId: string; repo: RepoSpec & { credential: string }; now: Date }): Promise<GitCredential | null> {
    const values = await this.secrets.reveal(input.orgId, [input.repo.credential]);
    const password = values[input.repo.credential];
    if (password === undefined) return null;
    return { username: "x-access-token", password, expiresAt: new Date(input.now.getTime() + this.ttlSeconds * 1000) };
  }
}

/** `https://Host:443/acme/app.git/` -> `{protocol: "https", host: "host", path: "acme/app"}`; null for non-http(s) URLs. */
export function repoLocation(url: string): { protocol: "http" | "https"; host: string; path: string } | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return null;
  return { protocol: parsed.protocol === "https:" ? "https" : "http", host: parsed.host.toLowerCase(), path: normalizePath(parsed.pathname) };
}

function normalizePath(path: string): string {
  return decodeURIComponent(path)
    .replace(/^\/+|\/+$/g, "")
    .replace(/\.git$/, "");
}

/**
 * The session repo a git request is about, among those that name a credential. With a path the
 * match is exact; without one (a helper configured without `useHttpPath`) it is the host's only
 * credential, and ambiguous hosts get none rather than the wrong one.
 */
export function matchCredentialRepo(repos: readonly RepoSpec[], request: GitCredentialRequest): (RepoSpec & { credential: string }) | null {
  const host = request.host.toLowerCase();
  const candidates = repos.filter((r): r is RepoSpec & { credential: string } => {
    if (!r.credential) return false;
    const at = repoLocation(r.url);
    return at !== null && at.protocol === request.protocol && at.host === host;
  });
  if (request.path !== undefined && request.path !== "") {
    const path = normalizePath(request.path);
    return candidates.find((r) => repoLocation(r.url)?.path === path) ?? null;
  }
  const names = new Set(candidates.map((r) => r.credential));
  return names.size === 1 ? (candidates[0] ?? null) : null;
}

/**
 * The values of a session's env-file keys that its org's secrets hold: each key reads the secret
 * it names, else the secret of its own name. Keys no secret holds are left out (the sandbox's
 * environment or values file may still provide them; a required key nobody provides fails the
 * boot's `env apply`, as before).
 */
export async function envFileValues(
  secrets: Pick<OrgSecretStore, "reveal">,
  orgId: string,
  envFiles: readonly { keys: readonly { name: string; secret?: string | undefined }[] }[],
): Promise<Record<string, string>> {
  const wanted = envFiles.flatMap((f) => f.keys.map((k) => ({ name: k.name, secret: k.secret ?? k.name })));
  if (wanted.length === 0) return {};
  const values = await secrets.reveal(orgId, [...new Set(wanted.map((w) => w.secret))]);
  const out: Record<string, string> = {};
  for (const w of wanted) {
    const value = values[w.secret];
    if (value !== undefined) out[w.name] = value;
  }
  return out;
}
