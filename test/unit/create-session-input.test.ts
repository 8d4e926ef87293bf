/**
 * Bad input at the door (issue 14 §4): `POST /v1/sessions` refuses what the boot would fail on
 * later (paths leaving the workspace, by the boot's own `repoDir` and `env apply` checks), what
 * would leak (credentials in repo URLs) and what is not printable text or unbounded, with a 400
 * naming the field; nothing is stored and no prompt is queued. Also `null` and other non-object
 * bodies on any route, and malformed percent-encoding in a path parameter.
 */
import { describe, expect, it } from "vitest";
import { createSessionHarness } from "../support/create-session-harness";
import { HTTP_ROUTES, matchRoutePath } from "../../functions/http/routes";


const harness = createSessionHarness;

const REPO = "https://github.com/acme/app.git";
const env = (path: string) => ({ envFiles: [{ path, keys: [{ name: "A" }] }] });

describe("POST /v1/sessions: bad input is a 400 naming the field, and nothing is stored", () => {
  const cases: { name: string; body: unknown; field: string; mentions?: string; secret?: string }[] = [
    // Credentials in repository URLs: refused, never echoed.
    { name: "user:password in an https URL", body: { repos: [{ url: "https://alice:s3cret-pw@github.com/acme/app.git" }] }, field: "body.repos.0.url", mentions: "credentials", secret: "s3cret-pw" },
    { name: "a token as the user of an https URL", body: { repos: [{ url: "https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/acme/app.git" }] }, field: "body.repos.0.url", secret: "ghp_abcdefghijklmnopqrstuvwxyz0123456789" },
    { name: "user-info on the second repo", body: { repos: [{ url: REPO }, { url: "http://x-access-token:tok-999@git.example.com/a/b" }] }, field: "body.repos.1.url", secret: "tok-999" },
    { name: "a password in an ssh URL", body: { repos: [{ url: "ssh://git:hunter2-pw@github.com/acme/app.git" }] }, field: "body.repos.0.url", mentions: "password", secret: "hunter2-pw" },
    // The boot's own repoDir check.
    { name: "workspacePath leaving the workspace", body: { repos: [{ url: REPO, workspacePath: "../../../../tmp/x" }] }, field: "body.repos.0.workspacePath", mentions: "inside the workspace" },
    { name: "workspacePath absolute", body: { repos: [{ url: REPO, workspacePath: "/tmp/x" }] }, field: "body.repos.0.workspacePath", mentions: "relative" },
    { name: "a URL whose last segment is ..", body: { repos: [{ url: "https://github.com/acme/.." }] }, field: "body.repos.0.url", mentions: "inside the workspace" },
    { name: "workspacePath into a .git directory", body: { repos: [{ url: REPO, workspacePath: "app/.git/hooks" }] }, field: "body.repos.0.workspacePath", mentions: ".git" },
    { name: "two repos cloned into one directory", body: { repos: [{ url: REPO }, { url: "https://gitlab.com/other/app.git" }] }, field: "body.repos.1.workspacePath", mentions: "same directory" },
    { name: "a branch with a newline", body: { repos: [{ url: REPO, branch: "main\nx" }] }, field: "body.repos.0.branch" },
    { name: "a repo URL with a bidi override", body: { repos: [{ url: "https://github.com/acme/\u202eppa.git" }] }, field: "body.repos.0.url", mentions: "invisible" },
    { name: "too many repos", body: { repos: Array.from({ length: 11 }, (_, i) => ({ url: `https://github.com/acme/r${i}.git` })) }, field: "body.repos" },
    // Env file paths: the checks `env apply` makes, printable text, no .git segments, bounded.
    { name: "env path with NUL", body: env("app/.env\u0000x"), field: "body.envFiles.0.path", mentions: "printable" },
    { name: "env path with a newline", body: env("app/.env\nx"), field: "body.envFiles.0.path", mentions: "printable" },
    { name: "env path .", body: env("."), field: "body.envFiles.0.path", mentions: "name a file" },
    { name: "env path app/", body: env("app/"), field: "body.envFiles.0.path", mentions: "name a file" },
    { name: "env path app/..", body: env("app/.."), field: "body.envFiles.0.path", mentions: "name a file" },
    { name: "env path .git/config", body: env(".git/config"), field: "body.envFiles.0.path", mentions: ".git" },
    { name: "env path .git/hooks/pre-commit", body: env("app/.git/hooks/pre-commit"), field: "body.envFiles.0.path", mentions: ".git" },
    { name: "env path .GIT in another case", body: env("app/.GIT/config"), field: "body.envFiles.0.path", mentions: ".git" },
    { name: "env path of 5,000 characters", body: env("a".repeat(5000)), field: "body.envFiles.0.path", mentions: "at most" },
    { name: "env file with too many keys", body: { envFiles: [{ path: ".env", keys: Array.from({ length: 201 }, (_, i) => ({ name: `K${i}` })) }] }, field: "body.envFiles.0.keys", mentions: "at most 200" },
    { name: "env key name of 5,000 characters", body: { envFiles: [{ path: ".env", keys: [{ name: "K".repeat(5000) }] }] }, field: "body.envFiles.0.keys.0.name", mentions: "at most" },
    // Titles and other text.
    { name: "title with NUL", body: { title: "fix\u0000it" }, field: "body.title", mentions: "printable" },
    { name: "title with U+202E", body: { title: "fix \u202etset eht" }, field: "body.title", mentions: "invisible" },
    { name: "title with a zero-width space", body: { title: "fix\u200bit" }, field: "body.title", mentions: "invisible" },
    { name: "title with a newline inside", body: { title: "fix\nit" }, field: "body.title", mentions: "printable" },
    { name: "title with a lone surrogate", body: { title: "fix \ud800 it" }, field: "body.title", mentions: "Unicode" },
    { name: "prebuildId with a control character", body: { prebuildId: "pb\u0007" }, field: "body.prebuildId", mentions: "printable" },
    { name: "initialPrompt with NUL", body: { initialPrompt: "hi\u0000there" }, field: "body.initialPrompt", mentions: "control" },
    { name: "systemPrompt with an escape character", body: { systemPrompt: "be \u001b[31mred" }, field: "body.systemPrompt", mentions: "control" },
    { name: "service cwd leaving the workspace", body: { serviceCommands: [{ name: "web", command: "npm start", cwd: "../../etc" }] }, field: "body.serviceCommands.0.cwd" },
    { name: "service command with NUL", body: { serviceCommands: [{ name: "web", command: "npm\u0000start" }] }, field: "body.serviceCommands.0.command", mentions: "control" },
    { name: "ssh key comment with NUL", body: { sshPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBBBB me\u0000x" }, field: "body.sshPublicKey" },
    // Issue 25: failover chain and permission policy.
    { name: "a fallback model that is not provider/model", body: { fallbackModels: ["gpt"] }, field: "body.fallbackModels.0.id", mentions: "provider/model" },
    { name: "a fallback model whose key secret is not a secret name", body: { fallbackModels: [{ id: "openai/gpt-4o", apiKeySecret: "no such name" }] }, field: "body.fallbackModels.0.apiKeySecret" },
    { name: "two fallbacks of one provider naming different key secrets", body: { fallbackModels: [{ id: "openai/gpt-4o", apiKeySecret: "A" }, { id: "openai/gpt-5", apiKeySecret: "B" }] }, field: "body.fallbackModels", mentions: "share one key" },
    { name: "a fallback model of an unknown provider", body: { fallbackModels: ["acme/m1"] }, field: "body.fallbackModels.0", mentions: "provider must be one of" },
    { name: "the same fallback model twice", body: { fallbackModels: ["dev/echo-backup", "dev/echo-backup"] }, field: "body.fallbackModels", mentions: "at most once" },
    { name: "too many fallback models", body: { fallbackModels: ["openai/a", "openai/b", "openai/c", "openai/d", "openai/e", "openai/f"] }, field: "body.fallbackModels" },
    { name: "an unknown permission policy", body: { permissionPolicy: "never" }, field: "body.permissionPolicy" },
  ];

  for (const c of cases) {
    it(`${c.name} -> 400 ${c.field}`, async () => {
      const h = harness();
      const res = await h.post({ initialPrompt: "start", ...(c.body as object) });
      expect(res.status).toBe(400);
      expect(res.body.error?.code).toBe("invalid_request");
      expect(res.body.error?.message.startsWith(`${c.field}: `)).toBe(true);
      if (c.mentions) expect(res.body.error?.message).toContain(c.mentions);
      if (c.secret) expect(res.text).not.toContain(c.secret);
      expect(h.stored).toEqual([]);
      expect(h.enqueued).toEqual([]);
    });
  }
});

describe("POST /v1/sessions: what stays accepted", () => {
  const good: { name: string; body: unknown }[] = [
    { name: "ssh URL with a user name", body: { repos: [{ url: "ssh://git@github.com/acme/app.git" }] } },
    { name: "scp-like git@host:path", body: { repos: [{ url: "git@github.com:acme/app.git" }] } },
    { name: "workspacePath '.' (the workspace itself) and nested dirs", body: { repos: [{ url: REPO, workspacePath: "." }, { url: "https://github.com/acme/lib.git", workspacePath: "vendor/lib" }] } },
    { name: "a .github directory is not .git", body: env(".github/.env") },
    { name: "dotfiles and a path through ..", body: env("app/../.env.local") },
    { name: "titles in any script, with emoji", body: { title: "Ré-parer le bug — 修复 🐛 עברית" } },
    { name: "prompts with newlines, tabs and RTL marks", body: { initialPrompt: "line 1\n\tindented\r\nשלום\u200f" } },
    { name: "a failover chain and the ask policy", body: { fallbackModels: ["openai/gpt-4o", "dev/echo-backup"], permissionPolicy: "ask" } },
  ];
  for (const c of good) {
    it(`${c.name} -> 201`, async () => {
      const h = harness();
      const res = await h.post(c.body);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(h.stored).toHaveLength(1);
    });
  }
});

describe("bodies that are not JSON objects", () => {
  for (const raw of ["null", "[]", "42", '"text"', "true"]) {
    it(`${raw} -> 400 "body: must be a JSON object", nothing stored`, async () => {
      const h = harness();
      const res = await h.postRaw(raw);
      expect(res.status).toBe(400);
      expect(res.body.error?.message).toMatch(/^body: must be a JSON object/);
      expect(h.stored).toEqual([]);
    });
  }

  it("an empty body still means {}", async () => {
    const h = harness();
    expect((await h.postRaw("")).status).toBe(201);
  });
});

describe("path parameters with malformed percent-encoding", () => {
  it("match the route with the segment as received, never throw", () => {
    const route = HTTP_ROUTES.find((r) => r.id === "GetSession");
    if (!route) throw new Error("no GetSession route");
    expect(() => matchRoutePath(route.path, "/v1/sessions/%E0%A4%A")).not.toThrow();
    expect(matchRoutePath(route.path, "/v1/sessions/%E0%A4%A")).toEqual({ id: "%E0%A4%A" });
    expect(matchRoutePath(route.path, "/v1/sessions/ses%5Fx")).toEqual({ id: "ses_x" });
  });
});
