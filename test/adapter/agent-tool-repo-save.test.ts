/**
 * The agent's `save_service_commands` / `save_env_files` (issue 25 §4) on a session that names a
 * registered repository by id (issue 24): the save lands on the session and on that repository,
 * with paths made relative to the repository's own directory, so its next build and every later
 * session naming it start the services. Dynalite, the real stores.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { persistEnvFiles, persistServiceCommands, type AgentToolDeps } from "../../functions/agent-tools/agent-tools";
import type { RepoRecord } from "../../functions/domain/repos-prebuilds";
import type { SessionRecord } from "../../functions/domain/session";
import { capturingLogger } from "../support/capturing-logger";
import { DynamoRepoCatalog } from "../../functions/store/dynamo-repo-catalog";
import { DynamoLifecycleEventLog } from "../../functions/store/dynamo-session-items";
import { DynamoSessionSettingsStore } from "../../functions/store/dynamo-session-settings";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

const ORG = "org-a";
let table: TestTable;
let sessions: DynamoSessionStore;
let catalog: DynamoRepoCatalog;
let deps: AgentToolDeps;

function repo(id: string): RepoRecord {
  const at = T0.toISOString();
  return { id, orgId: ORG, url: `https://github.com/acme/${id}.git`, defaultBranch: null, credential: null, setupCommands: [], serviceCommands: [{ name: "old", command: "echo old" }], envFiles: [], snapshot: null, latestBuild: null, createdAt: at, updatedAt: at };
}

async function runningSession(repos: SessionRecord["repos"]): Promise<SessionRecord> {
  const created = buildSession({ orgId: ORG, repos });
  await sessions.createSession(created);
  return sessions.transition(created, "running", new Date(T0.getTime() + 1000), { sandboxId: "sb-1" });
}

beforeAll(async () => {
  table = await startTestTable();
  sessions = new DynamoSessionStore(table.doc, table.tableName);
  catalog = new DynamoRepoCatalog(table.doc, table.tableName);
  deps = {
    sessionSettings: new DynamoSessionSettingsStore(table.doc, table.tableName),
    events: new DynamoLifecycleEventLog(table.doc, table.tableName),
    catalog,
    // Not used by the two saves.
    connections: {} as AgentToolDeps["connections"],
    push: {} as AgentToolDeps["push"],
    secrets: {} as AgentToolDeps["secrets"],
    logger: capturingLogger().logger,
    now: () => new Date(T0.getTime() + 2000),
  };
});
afterAll(async () => table.close());

describe("agent saves reach the session's registered repository", () => {
  it("service commands and env files land on the repo too, relative to the repo's directory", async () => {
    await catalog.createRepo(repo("repo_app"));
    const session = await runningSession([{ url: "https://github.com/acme/repo_app.git", repoId: "repo_app", workspacePath: "app" }]);
    const savedTo = await persistServiceCommands(deps, session, [
      { name: "web", command: "npm run dev", cwd: "app" },
      { name: "api", command: "npm run api", cwd: "app/server" },
    ]);
    expect(savedTo).toEqual(["session", "repo"]);
    expect((await catalog.getRepo(ORG, "repo_app"))?.serviceCommands).toEqual([
      { name: "web", command: "npm run dev" },
      { name: "api", command: "npm run api", cwd: "server" },
    ]);
    // The session keeps the workspace-relative form its own boot uses.
    expect((await sessions.getSession(session.id))?.serviceCommands).toEqual([
      { name: "web", command: "npm run dev", cwd: "app" },
      { name: "api", command: "npm run api", cwd: "app/server" },
    ]);

    const files = [{ path: "app/.env", format: "dotenv" as const, keys: [{ name: "DATABASE_URL", required: true }] }];
    expect(await persistEnvFiles(deps, session, files)).toEqual(["session", "repo"]);
    expect((await catalog.getRepo(ORG, "repo_app"))?.envFiles).toEqual([{ ...files[0], path: ".env" }]);
  });

  it("a save that reaches outside the repo's directory, or a session of two repos or none by id, stays the session's", async () => {
    await catalog.createRepo(repo("repo_two"));
    const one = await runningSession([{ url: "https://github.com/acme/repo_two.git", repoId: "repo_two", workspacePath: "two" }]);
    expect(await persistServiceCommands(deps, one, [{ name: "root", command: "make", cwd: "." }])).toEqual(["session"]);
    expect((await catalog.getRepo(ORG, "repo_two"))?.serviceCommands).toEqual([{ name: "old", command: "echo old" }]);

    const two = await runningSession([
      { url: "https://github.com/acme/repo_two.git", repoId: "repo_two", workspacePath: "two" },
      { url: "https://github.com/acme/other.git", workspacePath: "other" },
    ]);
    expect(await persistServiceCommands(deps, two, [{ name: "web", command: "npm start", cwd: "two" }])).toEqual(["session"]);
    const byUrl = await runningSession([{ url: "https://github.com/acme/repo_two.git" }]);
    expect(await persistServiceCommands(deps, byUrl, [{ name: "web", command: "npm start" }])).toEqual(["session"]);
    expect((await catalog.getRepo(ORG, "repo_two"))?.serviceCommands).toEqual([{ name: "old", command: "echo old" }]);
  });
});
