/**
 * The boot plan (sandbox/boot/boot-plan.ts) as data: which steps run in which phase for fresh
 * and restored sandboxes, which tools a session type gets, when services start.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bootSecrets, planBoot, planResume, type BootStep, type FileOp } from "../../sandbox/boot/boot-plan";
import { agentAuthorization, deriveAgentPassword } from "../../sandbox/shared/access-token";
import { createStepExecutor } from "../../sandbox/boot/step-executor";
import { ProcessTable } from "../../sandbox/boot/processes";
import { BOOT_SPEC_VERSION, parseBootSpec, type BootLayoutInput, type BootRequestInput, type BootSpec } from "../../sandbox/boot/boot-spec";
import { imageLayout } from "../../sandbox/boot/layout";
import { AGENT_TOOLS, DEFAULT_MODEL_ID } from "../../sandbox/boot/opencode-files";

const NOW = 1_750_000_000_000;
const HOME = "/sb/home";
const WORKSPACE = "/sb/workspace";

function spec(request: Partial<BootRequestInput> = {}, layout: Partial<BootLayoutInput> = {}): BootSpec {
  return parseBootSpec({
    version: BOOT_SPEC_VERSION,
    request: { sessionId: "ses_1", repos: [], restored: false, now: NOW, ...request },
    layout: { home: HOME, workspace: WORKSPACE, logDir: "/sb", opencode: { bin: "opencode", port: 4100, hostname: "127.0.0.1" }, ...layout },
  });
}

const names = (steps: BootStep[]) => steps.map((s) => s.name);
function step<K extends BootStep["kind"]>(steps: BootStep[], name: string): Extract<BootStep, { kind: K }> {
  const found = steps.find((s) => s.name === name);
  if (!found) throw new Error(`no step ${name} in ${names(steps).join(", ")}`);
  return found as Extract<BootStep, { kind: K }>;
}
function writtenPaths(ops: FileOp[]): string[] {
  return ops.filter((o) => o.op === "write").map((o) => o.path);
}
function removedPaths(ops: FileOp[]): string[] {
  return ops.filter((o) => o.op === "remove").map((o) => o.path);
}

const REPOS = [
  { url: "https://github.com/acme/web.git", branch: "main" },
  { url: "git@github.com:acme/api.git", workspacePath: "services/api" },
];

describe("phase 1", () => {
  it("fresh: clones every repo inside the workspace, writes metadata, config, plugin, tools, then starts and waits for OpenCode", () => {
    const { phase1 } = planBoot(spec({ repos: REPOS, systemPrompt: "be brief" }));
    expect(names(phase1)).toEqual([
      "clone web",
      "clone services/api",
      "write metadata",
      "write opencode config",
      "write plugin",
      "write tools",
      "write instructions",
      "start opencode",
      "wait for opencode",
    ]);
    expect(step<"clone">(phase1, "clone web")).toMatchObject({ url: REPOS[0]?.url, branch: "main", dir: `${WORKSPACE}/web` });
    expect(step<"clone">(phase1, "clone services/api")).toMatchObject({ branch: null, dir: `${WORKSPACE}/services/api` });
    expect(step<"write-metadata">(phase1, "write metadata").metadata).toEqual({ sessionId: "ses_1", repoDir: `${WORKSPACE}/web`, createdAt: NOW });
    expect(step<"wait-http">(phase1, "wait for opencode")).toMatchObject({ url: "http://127.0.0.1:4100/session", budgetMs: 30_000, process: "opencode" });
  });

  it("restored: reads the snapshot's metadata instead of cloning, and still starts OpenCode", () => {
    const { phase1 } = planBoot(spec({ repos: REPOS, restored: true }));
    expect(phase1.some((s) => s.kind === "clone")).toBe(false);
    expect(names(phase1).slice(0, 1)).toEqual(["read snapshot metadata"]);
    expect(step<"restore-metadata">(phase1, "read snapshot metadata").metadata.repoDir).toBe(`${WORKSPACE}/web`);
    expect(names(phase1).slice(-2)).toEqual(["start opencode", "wait for opencode"]);
  });

  it("a scratch session (no repos) uses the workspace itself", () => {
    const { phase1 } = planBoot(spec());
    expect(phase1.some((s) => s.kind === "clone")).toBe(false);
    expect(step<"write-metadata">(phase1, "write metadata").metadata.repoDir).toBe(WORKSPACE);
  });

  it("refuses a repo path that leaves the workspace", () => {
    expect(() => planBoot(spec({ repos: [{ url: "https://x/y.git", workspacePath: "../escape" }] }))).toThrow(/leaves the workspace/);
  });

  it("setup-only tools only for setup sessions; other sessions get them removed (a setup snapshot must not leak them)", () => {
    const toolDir = `${HOME}/.config/opencode/tool`;
    const coding = step<"files">(planBoot(spec({ sessionType: "coding" })).phase1, "write tools").ops;
    expect(writtenPaths(coding)).toEqual([`${toolDir}/verify.ts`, `${toolDir}/save_snapshot.ts`, `${toolDir}/request_env_variables.ts`]);
    expect(removedPaths(coding)).toEqual([`${toolDir}/save_service_commands.ts`, `${toolDir}/save_env_files.ts`]);

    const setup = step<"files">(planBoot(spec({ sessionType: "setup" })).phase1, "write tools").ops;
    expect(writtenPaths(setup)).toEqual(AGENT_TOOLS.map((t) => `${toolDir}/${t.name}.ts`));
    expect(removedPaths(setup)).toEqual([]);

    const terminal = step<"files">(planBoot(spec({ sessionType: "terminal" })).phase1, "write tools").ops;
    expect(writtenPaths(terminal)).toEqual(writtenPaths(coding));
  });

  it("the OpenCode config names the dev model when the layout runs it, else the session's model or the default", () => {
    const configOf = (s: BootSpec) => {
      const start = step<"spawn">(planBoot(s).phase1, "start opencode");
      const written = step<"files">(planBoot(s).phase1, "write opencode config").ops.find((o) => o.op === "write" && o.path.endsWith("opencode.json"));
      // The file and OPENCODE_CONFIG_CONTENT are the same config.
      expect(written && written.op === "write" ? JSON.parse(written.content) : null).toEqual(JSON.parse(start.env.OPENCODE_CONFIG_CONTENT ?? "null"));
      return JSON.parse(start.env.OPENCODE_CONFIG_CONTENT ?? "{}") as Record<string, unknown>;
    };
    const dev = configOf(spec({ modelId: "anthropic/x" }, { devModel: { port: 4200 } }));
    expect(dev.model).toBe("dev/echo");
    expect(JSON.stringify(dev.provider)).toContain("http://127.0.0.1:4200/v1");
    expect(configOf(spec({ modelId: "anthropic/claude-opus-4-5" })).model).toBe("anthropic/claude-opus-4-5");
    expect(configOf(spec()).model).toBe(DEFAULT_MODEL_ID);
    const withPrompt = configOf(spec({ systemPrompt: "hi" }));
    expect(withPrompt.instructions).toEqual([`${HOME}/.config/opencode/instructions.md`]);
    expect(configOf(spec()).instructions).toBeUndefined();
  });

  it("OpenCode's config dir is seeded so it never downloads its plugin package; tools resolve zod from the layout's modules", () => {
    const ops = step<"files">(planBoot(spec({}, { toolModules: "/opt/mods" })).phase1, "write opencode config").ops;
    const dir = `${HOME}/.config/opencode`;
    expect(writtenPaths(ops)).toEqual([`${dir}/opencode.json`, `${dir}/package.json`, `${dir}/package-lock.json`]);
    expect(ops).toContainEqual({ op: "mkdir", path: `${dir}/node_modules` });
    expect(ops).toContainEqual({ op: "symlink", path: `${dir}/node_modules/zod`, target: "/opt/mods/zod" });
    const lock = ops.find((o) => o.op === "write" && o.path.endsWith("package-lock.json"));
    const pkg = ops.find((o) => o.op === "write" && o.path.endsWith("/package.json"));
    if (lock?.op !== "write" || pkg?.op !== "write") throw new Error("package files missing");
    const declared = Object.keys((JSON.parse(pkg.content) as { dependencies: object }).dependencies);
    const locked = Object.keys((JSON.parse(lock.content) as { packages: { "": { dependencies: object } } }).packages[""].dependencies);
    expect(locked).toEqual(declared);
  });

  it("SSH key, trigger context and the dev model only when asked for", () => {
    const bare = names(planBoot(spec()).phase1);
    expect(bare).not.toContain("write ssh key");
    expect(bare).not.toContain("write trigger context");
    expect(bare).not.toContain("start dev model");
    const full = planBoot(spec({ sshPublicKey: "ssh-ed25519 AAAA me\n", triggerContext: { source: "slack" } }, { devModel: { port: 4200 } })).phase1;
    expect(step<"files">(full, "write ssh key").ops).toEqual([{ op: "append-line", path: `${HOME}/.ssh/authorized_keys`, line: "ssh-ed25519 AAAA me", mode: 0o600 }]);
    expect(names(full)).toContain("write trigger context");
    // The dev model answers before OpenCode needs it.
    expect(names(full).indexOf("start dev model")).toBeLessThan(names(full).indexOf("start opencode"));
  });
});

describe("git: identity, credential helper, history", () => {
  const image = (request: Partial<BootRequestInput> = {}) =>
    planBoot(parseBootSpec({ version: BOOT_SPEC_VERSION, request: { sessionId: "ses_1", restored: false, now: NOW, ...request }, layout: imageLayout() }));
  const gitConfig = (plan: ReturnType<typeof planBoot>) => {
    const op = step<"files">(plan.phase1, "write git config").ops[0];
    return op && op.op === "write" ? op : null;
  };

  it("writes the user's identity and the sidecar-socket credential helper before any clone, and no token anywhere", () => {
    const plan = image({
      repos: [...REPOS, { url: "https://github.com/acme/private.git", credential: "GH" }],
      controlPlaneUrl: "https://api.example.test",
      gitIdentity: { name: 'Ada "A" Lovelace', email: "ada@example.test" },
    });
    const order = names(plan.phase1);
    expect(order.indexOf("start sidecar")).toBeLessThan(order.indexOf("write git config"));
    expect(order.indexOf("write git config")).toBeLessThan(order.indexOf("clone web"));
    const file = gitConfig(plan);
    expect(file?.path).toBe("/home/user/.gitconfig");
    expect(file?.content).toContain('\tname = "Ada \\"A\\" Lovelace"\n');
    expect(file?.content).toContain('\temail = "ada@example.test"\n');
    // The empty helper resets system helpers; then only ours, which asks the sidecar's socket.
    expect(file?.content).toContain('\thelper =\n\thelper = "!node /opt/sandbox/cli.mjs git-credential --socket /tmp/sandbox/sidecar.sock"\n\tuseHttpPath = true\n');
  });

  it("identity only, without a control plane to ask; nothing at all without either", () => {
    const idOnly = gitConfig(image({ gitIdentity: { name: "a", email: "a@b.c" } }))?.content ?? "";
    expect(idOnly).toContain("[user]");
    expect(idOnly).not.toContain("[credential]");
    expect(names(image().phase1)).not.toContain("write git config");
  });

  it("clones the whole history unless a depth is asked, and pins the ref", () => {
    const plan = image({ repos: [{ url: "https://h/a.git" }, { url: "https://h/b.git", depth: 5, ref: "v1.2.3" }] });
    expect(step<"clone">(plan.phase1, "clone a")).toMatchObject({ depth: null, ref: null });
    expect(step<"clone">(plan.phase1, "clone b")).toMatchObject({ depth: 5, ref: "v1.2.3" });
  });

  it("env apply reads the org's values from the sidecar socket only when there is a control plane", () => {
    const envFiles = [{ path: ".env", keys: [{ name: "A" }] }];
    expect(step<"run">(image({ envFiles }).phase2, "apply env files").env.SIDECAR_SOCKET).toBeUndefined();
    expect(step<"run">(image({ envFiles, controlPlaneUrl: "https://api.example.test" }).phase2, "apply env files").env.SIDECAR_SOCKET).toBe("/tmp/sandbox/sidecar.sock");
  });

  it("OpenCode gets the sidecar socket (its tools call it, issue 25 §4) only when there is a control plane", () => {
    expect(step<"spawn">(image({}).phase1, "start opencode").env.SIDECAR_SOCKET).toBeUndefined();
    expect(step<"spawn">(image({ controlPlaneUrl: "https://api.example.test" }).phase1, "start opencode").env.SIDECAR_SOCKET).toBe("/tmp/sandbox/sidecar.sock");
  });

  it("OpenCode reads no project config: the workspace's ancestors (the host's, on a local sandbox) never configure the agent", () => {
    expect(step<"spawn">(image({}).phase1, "start opencode").env.OPENCODE_DISABLE_PROJECT_CONFIG).toBe("1");
    expect(step<"spawn">(planBoot(spec({}, { devModel: { port: 4200 } })).phase1, "start opencode").env.OPENCODE_DISABLE_PROJECT_CONFIG).toBe("1");
  });

  it("the development model's key: OpenCode's config names the variable, never the value", () => {
    const local = spec({}, { devModel: { port: 4200 } });
    const withKey = planBoot(local, { agentPassword: null, devModelKey: true });
    const config = JSON.parse(step<"spawn">(withKey.phase1, "start opencode").env.OPENCODE_CONFIG_CONTENT ?? "{}") as { provider: { dev: { options: { apiKey: string } } } };
    expect(config.provider.dev.options.apiKey).toBe("{env:DEV_MODEL_API_KEY}");
    const without = JSON.parse(step<"spawn">(planBoot(local).phase1, "start opencode").env.OPENCODE_CONFIG_CONTENT ?? "{}") as typeof config;
    expect(without.provider.dev.options.apiKey).toBe("dev");
  });
});

describe("phase 2", () => {
  const image = (request: Partial<BootRequestInput> = {}) =>
    planBoot(parseBootSpec({ version: BOOT_SPEC_VERSION, request: { sessionId: "ses_1", restored: false, now: NOW, ...request }, layout: imageLayout() }));

  it("in the image: infrastructure services, Caddy, the sidecar, in that order; nothing else by default", () => {
    expect(names(image().phase2)).toEqual([
      "start infrastructure services",
      "start caddy",
      "wait for caddy",
      "write service definitions",
      "start sidecar",
      "wait for sidecar",
    ]);
    const sidecar = step<"spawn">(image().phase2, "start sidecar");
    expect(sidecar.env).toMatchObject({
      SIDECAR_PORT: "4000",
      SIDECAR_HOST: "127.0.0.1",
      WORKSPACE_DIR: "/home/user/workspace",
      CADDY_ADMIN_URL: "http://127.0.0.1:2019",
      SERVICES_FILE: "/home/user/.proliferate/services.json",
      SIDECAR_SOCKET: "/tmp/sandbox/sidecar.sock",
    });
    // The key reaches the sidecar on its stdin at run time (issue 14 §2), never through the plan
    // or an environment.
    expect(sidecar.env.SIDECAR_TOKEN).toBeUndefined();
    expect(sidecar.env.SIDECAR_TOKEN_FILE).toBe("-");
    // No control plane to ask: no URL for the sidecar, no credential helper.
    expect(sidecar.env.CONTROL_PLANE_URL).toBeUndefined();
    expect(names(image().phase1)).not.toContain("write git config");
    const withUrl = step<"spawn">(image({ controlPlaneUrl: "https://api.example.test" }).phase2, "start sidecar");
    expect(withUrl.env.CONTROL_PLANE_URL).toBe("https://api.example.test");
  });

  it("a repo with a credential: the sidecar starts first in phase 1 (git asks it while cloning and pulling), and is waited for in phase 2", () => {
    const repos = [{ url: "https://github.com/acme/private.git", credential: "GH" }];
    for (const restored of [false, true]) {
      const plan = image({ repos, restored, controlPlaneUrl: "https://api.example.test", gitFreshness: { enabled: true, cadenceSeconds: 0 } });
      expect(names(plan.phase1).slice(0, 2)).toEqual(["write service definitions", "start sidecar"]);
      expect(names(plan.phase2)).not.toContain("start sidecar");
      expect(names(plan.phase2)).toContain("wait for sidecar");
    }
    // No control plane to ask: nothing to gain from starting it early.
    expect(names(image({ repos }).phase1)).not.toContain("start sidecar");
  });

  it("service commands start only when the snapshot has the dependencies (and there are commands)", () => {
    const services = [{ name: "web", command: "npm run dev", cwd: "app" }];
    expect(names(image({ serviceCommands: services }).phase2)).not.toContain("start service commands");
    // Commands the session named itself start at every boot.
    expect(names(image({ serviceCommands: services, autoStartServices: true }).phase2).at(-1)).toBe("start service commands");
    expect(names(image({ autoStartServices: true }).phase2)).not.toContain("start service commands");
    expect(names(image({ snapshotHasDeps: true }).phase2)).not.toContain("start service commands");
    const withDeps = image({ snapshotHasDeps: true, serviceCommands: services }).phase2;
    expect(names(withDeps).at(-1)).toBe("start service commands");
    expect(step<"run">(withDeps, "start service commands").command.argv).toEqual(["node", "/opt/sandbox/cli.mjs", "services", "start"]);
    // It calls the sidecar: the executor hands it an access token (never the sandbox key).
    expect(step<"run">(withDeps, "start service commands").sidecarAccess).toBe(true);
    // Defined either way, so the sidecar lists them.
    const defs = step<"files">(image({ serviceCommands: services }).phase2, "write service definitions").ops[0];
    expect(defs && defs.op === "write" ? JSON.parse(defs.content) : null).toEqual(services);
  });

  it("no sidecar or no CLI in the layout: service commands cannot start", () => {
    const local = planBoot(spec({ snapshotHasDeps: true, serviceCommands: [{ name: "web", command: "x" }] }));
    expect(names(local.phase2)).toEqual([]);
  });

  it("env files are applied through the CLI when the request has a spec", () => {
    const envFiles = [{ path: ".env", keys: [{ name: "A" }] }];
    const steps = image({ envFiles }).phase2;
    expect(names(steps)).toContain("apply env files");
    expect(step<"run">(steps, "apply env files").command.argv).toEqual(["node", "/opt/sandbox/cli.mjs", "env", "apply", "--spec", "/home/user/.proliferate/env-spec.json"]);
    expect(step<"run">(steps, "apply env files").sidecarAccess).toBeUndefined();
    expect(names(image().phase2)).not.toContain("apply env files");
  });

  it("git freshness pull first, only for a restored sandbox with repos and the gate enabled", () => {
    const gate = { enabled: true, cadenceSeconds: 3600 };
    expect(names(image({ restored: true, repos: REPOS, gitFreshness: gate }).phase2)[0]).toBe("git freshness pull");
    expect(step<"git-pull">(image({ restored: true, repos: REPOS, gitFreshness: gate }).phase2, "git freshness pull")).toMatchObject({
      dirs: ["/home/user/workspace/web", "/home/user/workspace/services/api"],
      cadenceSeconds: 3600,
      now: NOW,
    });
    expect(names(image({ restored: false, repos: REPOS, gitFreshness: gate }).phase2)).not.toContain("git freshness pull");
    expect(names(image({ restored: true, repos: [], gitFreshness: gate }).phase2)).not.toContain("git freshness pull");
    expect(names(image({ restored: true, repos: REPOS, gitFreshness: { enabled: false, cadenceSeconds: 0 } }).phase2)).not.toContain("git freshness pull");
  });
});

describe("planResume", () => {
  it("is only the git freshness pull, when the gate is enabled", () => {
    expect(names(planResume(spec({ repos: REPOS, gitFreshness: { enabled: true, cadenceSeconds: 0 } })))).toEqual(["git freshness pull"]);
    expect(planResume(spec({ repos: REPOS }))).toEqual([]);
  });
});

describe("parseBootSpec", () => {
  it("names every invalid field and strips unknown ones (an older boot reads a newer spec)", () => {
    expect(() => parseBootSpec({ version: 1, request: { sessionId: "" }, layout: {} })).toThrow(/request\.sessionId.*layout\.home/s);
    const parsed = parseBootSpec({ ...spec(), request: { ...spec().request, addedLater: true } });
    expect(parsed.request).not.toHaveProperty("addedLater");
  });
});

describe("OpenCode's server password", () => {
  const TOKEN = "the-sandbox-key-0123456789abcdefghijklmnop";
  const full = () => spec({ repos: REPOS, snapshotHasDeps: true, serviceCommands: [{ name: "web", command: "npm start" }] }, imageLayout());
  const everyStep = (plan: ReturnType<typeof planBoot>) => [...plan.phase1, ...plan.phase2];

  it("is derived from the sandbox key the boot took from its key file; no key, no password; SIDECAR_TOKEN in the environment is not a key", () => {
    expect(bootSecrets({}, TOKEN)).toEqual({ agentPassword: deriveAgentPassword(TOKEN), devModelKey: false });
    expect(bootSecrets({}, undefined)).toEqual({ agentPassword: null, devModelKey: false });
    expect(bootSecrets({}, "")).toEqual({ agentPassword: null, devModelKey: false });
    expect(bootSecrets({ SIDECAR_TOKEN: TOKEN }, undefined)).toEqual({ agentPassword: null, devModelKey: false });
    expect(bootSecrets({ DEV_MODEL_API_KEY: "k" }, undefined).devModelKey).toBe(true);
  });

  it("with it, OpenCode's spawn env has OPENCODE_SERVER_PASSWORD, its readiness probe the Authorization, and no other step either", () => {
    const password = deriveAgentPassword(TOKEN);
    const plan = planBoot(full(), bootSecrets({}, TOKEN));
    expect(step<"spawn">(plan.phase1, "start opencode").env.OPENCODE_SERVER_PASSWORD).toBe(password);
    expect(step<"wait-http">(plan.phase1, "wait for opencode").headers).toEqual({ authorization: agentAuthorization(password) });
    const holders = everyStep(plan).filter((s) => JSON.stringify(s).includes(password)).map((s) => s.name);
    expect(holders).toEqual(["start opencode"]);
    const withAuth = everyStep(plan).filter((s) => JSON.stringify(s).includes(agentAuthorization(password))).map((s) => s.name);
    expect(withAuth).toEqual(["wait for opencode"]);
    // The sandbox key itself is in no step: the executor hands it to the sidecar on its stdin.
    expect(everyStep(plan).filter((s) => JSON.stringify(s).includes(TOKEN))).toEqual([]);
    // Nothing else changes.
    const without = planBoot(full());
    expect(names(plan.phase1)).toEqual(names(without.phase1));
    expect(names(plan.phase2)).toEqual(names(without.phase2));
  });

  it("the executor probes a wait step with that step's headers only", async () => {
    const plan = planBoot(full(), bootSecrets({}, TOKEN));
    const calls: [string, Record<string, string> | undefined][] = [];
    // Wait steps probe only processes the boot started: stand-ins that live long enough.
    const processes = new ProcessTable();
    const dir = mkdtempSync(join(tmpdir(), "boot-probe-"));
    try {
      for (const id of ["opencode", "sidecar"] as const) await processes.start(id, ["sleep", "30"], { cwd: dir, env: { PATH: process.env.PATH ?? "" }, log: join(dir, `${id}.log`) });
      const execute = createStepExecutor({ env: {}, processes, sleep: async () => undefined, fetch: async (url, init) => (calls.push([url, init?.headers]), { ok: true }) });
      const openCode = step<"wait-http">(plan.phase1, "wait for opencode");
      const sidecar = step<"wait-http">(plan.phase2, "wait for sidecar");
      expect(await execute(openCode)).toMatchObject({ status: "ok" });
      expect(await execute(sidecar)).toMatchObject({ status: "ok" });
      expect(calls).toEqual([
        [openCode.url, { authorization: agentAuthorization(deriveAgentPassword(TOKEN)) }],
        [sidecar.url, undefined],
      ]);
    } finally {
      await processes.stopAll(1_000);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("without it, OpenCode runs without a password and its probe sends no headers (as before)", () => {
    const plan = planBoot(full());
    expect(step<"spawn">(plan.phase1, "start opencode").env).not.toHaveProperty("OPENCODE_SERVER_PASSWORD");
    expect(step<"wait-http">(plan.phase1, "wait for opencode")).not.toHaveProperty("headers");
  });
});
