import { describe, expect, it } from "vitest";
import { envFileValues, matchCredentialRepo, OrgSecretGitCredentials, repoLocation } from "../../functions/sandbox-access/git-credentials";
import type { RepoSpec } from "../../functions/domain/session";

const REPOS: RepoSpec[] = [
  { url: "https://github.com/acme/app.git", credential: "APP_TOKEN" },
  { url: "https://github.com/acme/lib", credential: "LIB_TOKEN" },
  { url: "https://gitlab.example:8443/team/svc.git", credential: "GL_TOKEN" },
  { url: "https://github.com/acme/public.git" },
  { url: "git@github.com:acme/ssh.git" },
];

describe("repoLocation", () => {
  it("normalizes host case, trailing slashes and .git; refuses non-http(s)", () => {
    expect(repoLocation("https://GitHub.com/acme/app.git/")).toEqual({ protocol: "https", host: "github.com", path: "acme/app" });
    expect(repoLocation("http://127.0.0.1:9000/repo.git")).toEqual({ protocol: "http", host: "127.0.0.1:9000", path: "repo" });
    expect(repoLocation("git@github.com:acme/ssh.git")).toBeNull();
    expect(repoLocation("file:///tmp/x")).toBeNull();
  });
});

describe("matchCredentialRepo", () => {
  it("matches protocol, host and path exactly, with or without .git", () => {
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "github.com", path: "acme/app.git" })?.credential).toBe("APP_TOKEN");
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "GITHUB.COM", path: "acme/lib.git" })?.credential).toBe("LIB_TOKEN");
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "gitlab.example:8443", path: "team/svc" })?.credential).toBe("GL_TOKEN");
  });

  it("gives nothing for another repo, another protocol, a repo without a credential", () => {
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "github.com", path: "acme/other.git" })).toBeNull();
    expect(matchCredentialRepo(REPOS, { protocol: "http", host: "github.com", path: "acme/app.git" })).toBeNull();
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "github.com", path: "acme/public.git" })).toBeNull();
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "gitlab.example", path: "team/svc" })).toBeNull();
  });

  it("without a path: the host's only credential, never a guess between several", () => {
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "gitlab.example:8443" })?.credential).toBe("GL_TOKEN");
    expect(matchCredentialRepo(REPOS, { protocol: "https", host: "github.com" })).toBeNull();
  });
});

describe("credential and env values from org secrets", () => {
  const secrets = {
    asked: [] as string[][],
    reveal(orgId: string, names: readonly string[]) {
      this.asked.push([orgId, ...names]);
      const all: Record<string, string> = { APP_TOKEN: "ghp_app", DB: "postgres://x", LOG_LEVEL: "debug" };
      return Promise.resolve(Object.fromEntries(names.filter((n) => all[n] !== undefined).map((n) => [n, all[n] as string])));
    },
  };

  it("a PAT as the password of x-access-token, valid for the TTL; null when the secret is gone", async () => {
    const now = new Date("2026-11-23T10:00:00Z");
    const source = new OrgSecretGitCredentials(secrets, 900);
    expect(await source.credentialFor({ orgId: "o", repo: { url: "https://h/a", credential: "APP_TOKEN" }, now })).toEqual({
      username: "x-access-token",
      password: "ghp_app",
      expiresAt: new Date("2026-11-23T10:15:00Z"),
    });
    expect(await source.credentialFor({ orgId: "o", repo: { url: "https://h/a", credential: "GONE" }, now })).toBeNull();
  });

  it("each env key reads the secret it names, else the secret of its own name; unheld keys are left out", async () => {
    const values = await envFileValues(secrets, "o", [
      { keys: [{ name: "DATABASE_URL", secret: "DB" }, { name: "LOG_LEVEL" }] },
      { keys: [{ name: "MISSING" }, { name: "DATABASE_URL", secret: "DB" }] },
    ]);
    expect(values).toEqual({ DATABASE_URL: "postgres://x", LOG_LEVEL: "debug" });
    expect(secrets.asked.at(-1)).toEqual(["o", "DB", "LOG_LEVEL", "MISSING"]);
    expect(await envFileValues(secrets, "o", [])).toEqual({});
  });
});
