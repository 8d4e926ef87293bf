/**
 * The I/O behind each boot step kind (boot-plan.ts decides which steps run). Children get the
 * boot's own environment (the session's env vars and secrets arrive there) plus the step's. The
 * sandbox key is not in that environment (sandbox/shared/sandbox-key-file.ts): the boot holds it
 * in memory and only the sidecar receives it, on its stdin, so it is in no process's
 * `/proc/<pid>/environ`. OpenCode (and so the agent's shell), Caddy, git and the CLI run code that
 * must not hold it; a CLI step that calls the sidecar gets a short-lived access token signed with
 * it instead, and a stray `SIDECAR_TOKEN` in the boot's environment reaches no child.
 */
import { constants } from "node:fs";
import { access, appendFile, mkdir, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { mintAccessToken, SANDBOX_KEY_ENV } from "../shared/access-token";
import { metadataAfterPull, shouldPullOnRestore, type SessionMetadata } from "../../functions/domain/git-freshness";
import { CLONE_TIMEOUT_MS, type BootStep, type FileOp } from "./boot-plan";
import type { StepExecutor, StepOutcome } from "./boot-runner";
import type { ProcessTable, RunResult } from "./processes";
import { runToCompletion } from "./processes";
import { configArgs, minimalGitEnv, SAFE_GIT_CONFIG, safeGitArgs } from "../shared/safe-git";
import { httpProbe, waitUntilReady } from "./readiness";

/** A CLI step's access token outlives the step's own timeout by this much. */
const ACCESS_TOKEN_SLACK_SECONDS = 60;

export interface ExecutorDeps {
  /** The boot's environment, inherited by every child (minus any `SIDECAR_TOKEN`, see above). */
  env: NodeJS.ProcessEnv;
  /** The sandbox key the boot took from its key file; undefined: the sidecar refuses every caller. */
  sandboxKey?: string;
  /** Epoch milliseconds, for the access tokens CLI steps get; default `Date.now`. */
  now?: () => number;
  processes: ProcessTable;
  sleep: (ms: number) => Promise<void>;
  /** An HTTP probe; a wait step's `headers` (OpenCode's password) are passed in `init`. */
  fetch: (url: string, init?: { headers?: Record<string, string> }) => Promise<{ ok: boolean; status?: number }>;
}

const GIT_PULL_TIMEOUT_MS = 120_000;
const TAIL = 800;

async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

async function nonEmptyDir(path: string): Promise<boolean> {
  try {
    return (await readdir(path)).length > 0;
  } catch {
    return false;
  }
}

function tail(text: string): string {
  const t = text.trim();
  return t.length > TAIL ? `...${t.slice(-TAIL)}` : t;
}

function failure(what: string, r: RunResult): Error {
  return new Error(`${what} exited ${r.exitCode}: ${tail(r.stderr) || tail(r.stdout)}`);
}

async function applyFileOp(op: FileOp): Promise<void> {
  switch (op.op) {
    case "mkdir":
      await mkdir(op.path, { recursive: true });
      return;
    case "write":
      await mkdir(dirname(op.path), { recursive: true });
      await writeFile(op.path, op.content, op.mode === undefined ? {} : { mode: op.mode });
      return;
    case "append-line": {
      await mkdir(dirname(op.path), { recursive: true });
      const current = await readFile(op.path, "utf8").catch(() => "");
      if (current.split("\n").includes(op.line)) return;
      const sep = current === "" || current.endsWith("\n") ? "" : "\n";
      await appendFile(op.path, `${sep}${op.line}\n`, op.mode === undefined ? {} : { mode: op.mode });
      return;
    }
    case "symlink":
      await mkdir(dirname(op.path), { recursive: true });
      await rm(op.path, { force: true, recursive: true });
      await symlink(op.target, op.path);
      return;
    case "remove":
      await rm(op.path, { force: true, recursive: true });
      return;
  }
}

async function readMetadata(path: string): Promise<SessionMetadata | null> {
  try {
    const parsed = JSON.parse(await readFile(path, "utf8")) as Partial<SessionMetadata>;
    if (typeof parsed.sessionId !== "string" || typeof parsed.createdAt !== "number") return null;
    return parsed as SessionMetadata;
  } catch {
    return null;
  }
}

async function writeMetadata(path: string, metadata: SessionMetadata): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify(metadata, null, 2)}\n`);
}

/** The boot's environment without any `SIDECAR_TOKEN`, and that value (never used as the key). */
export function confineSandboxKey(env: NodeJS.ProcessEnv): { inherited: NodeJS.ProcessEnv; sandboxKey: string | undefined } {
  const { [SANDBOX_KEY_ENV]: sandboxKey, ...inherited } = env;
  return { inherited, sandboxKey: sandboxKey || undefined };
}

export function createStepExecutor(deps: ExecutorDeps): StepExecutor {
  const { inherited } = confineSandboxKey(deps.env);
  const sandboxKey = deps.sandboxKey || undefined;
  const now = deps.now ?? Date.now;
  /** A child's environment: inherited + the step's, with `credential` (if any) as the only `SIDECAR_TOKEN`. */
  const childEnv = (stepEnv: Record<string, string>, credential?: string): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...inherited, ...stepEnv };
    delete env[SANDBOX_KEY_ENV];
    if (credential) env[SANDBOX_KEY_ENV] = credential;
    return env;
  };
  /** A token for this session that lets a CLI step call the sidecar until its timeout (plus slack). */
  const accessTokenFor = (timeoutMs: number): string | undefined => {
    const sid = inherited.SESSION_ID;
    if (!sandboxKey || !sid) return undefined;
    const iat = Math.floor(now() / 1000);
    return mintAccessToken(sandboxKey, { sid, iat, exp: iat + Math.ceil(timeoutMs / 1000) + ACCESS_TOKEN_SLACK_SECONDS });
  };
  /** Git (and the hooks or helpers it may start) gets a minimal environment: no secret reaches it. */
  const gitEnv = (): NodeJS.ProcessEnv => minimalGitEnv(inherited);

  async function clone(step: Extract<BootStep, { kind: "clone" }>): Promise<StepOutcome> {
    // Idempotent (seed 004 step 4): a directory that already has content is kept as it is.
    if (await nonEmptyDir(step.dir)) return { status: "skipped", reason: `${step.dir} already has content` };
    await mkdir(dirname(step.dir), { recursive: true });
    // The whole history unless a depth was asked: the agent works with log, blame and rebase.
    const depth = step.depth === null ? [] : ["--depth", String(step.depth)];
    const attempt = (branch: string | null) =>
      runToCompletion("git", [...configArgs(SAFE_GIT_CONFIG), "clone", "--quiet", ...depth, ...(branch ? ["--branch", branch] : []), "--", step.url, step.dir], {
        env: gitEnv(),
        timeoutMs: CLONE_TIMEOUT_MS,
      });
    const first = await attempt(step.branch);
    let detail: Record<string, unknown> = {};
    if (first.exitCode !== 0) {
      if (!step.branch) throw failure(`git clone ${step.url}`, first);
      // seed 003 §6.2 edge case: a branch that fails to clone falls back to the default branch.
      const fallback = await attempt(null);
      if (fallback.exitCode !== 0) throw failure(`git clone ${step.url}`, fallback);
      detail = { branchFallback: true, branchError: tail(first.stderr) };
    }
    if (step.ref) await checkoutRef(step.dir, step.ref);
    return { status: "ok", ...(Object.keys(detail).length > 0 ? { detail } : {}) };
  }

  /** seed 004 `REPO_REF`: a pinned commit or tag, fetched first when a shallow clone lacks it. */
  async function checkoutRef(dir: string, ref: string): Promise<void> {
    const safety = await safeGitArgs(dir, gitEnv());
    const git = (args: string[]) => runToCompletion("git", ["-C", dir, ...safety, ...args], { env: gitEnv(), timeoutMs: CLONE_TIMEOUT_MS });
    if ((await git(["checkout", "--quiet", "--detach", ref, "--"])).exitCode === 0) return;
    const fetched = await git(["fetch", "--quiet", "origin", ref]);
    if (fetched.exitCode !== 0) throw failure(`git fetch ${ref}`, fetched);
    const checkout = await git(["checkout", "--quiet", "--detach", "FETCH_HEAD", "--"]);
    if (checkout.exitCode !== 0) throw failure(`git checkout ${ref}`, checkout);
  }

  async function gitPull(step: Extract<BootStep, { kind: "git-pull" }>): Promise<StepOutcome> {
    const metadata = await readMetadata(step.metadataPath);
    const pull = shouldPullOnRestore({
      enabled: step.enabled,
      cadenceSeconds: step.cadenceSeconds,
      hasSnapshot: true,
      repoCount: step.dirs.length,
      lastGitFetchAt: metadata?.lastGitFetchAt ?? null,
      now: step.now,
    });
    if (!pull) return { status: "skipped", reason: "cadence not elapsed" };
    const results: boolean[] = [];
    const errors: string[] = [];
    for (const dir of step.dirs) {
      // The repo is the agent's by now (its hooks, filters, fsmonitor): none of them runs.
      const safety = await safeGitArgs(dir, gitEnv());
      const r = await runToCompletion("git", ["-C", dir, ...safety, "pull", "--ff-only", "--quiet"], { env: gitEnv(), timeoutMs: GIT_PULL_TIMEOUT_MS });
      results.push(r.exitCode === 0);
      if (r.exitCode !== 0) errors.push(`${dir}: ${tail(r.stderr)}`);
    }
    // seed 003 §2: the cadence advances only when every pull succeeded.
    if (metadata) {
      const next = metadataAfterPull(metadata, results, step.now);
      if (next !== metadata) await writeMetadata(step.metadataPath, next);
    }
    if (errors.length > 0) throw new Error(`git pull --ff-only failed for ${errors.join("; ")}`);
    return { status: "ok", detail: { pulled: results.length } };
  }

  async function waitHttp(step: Extract<BootStep, { kind: "wait-http" }>): Promise<StepOutcome> {
    if (!deps.processes.has(step.process)) return { status: "skipped", reason: `${step.process} was not started` };
    const get = httpProbe(step.url, (url, init) => deps.fetch(url, init), step.headers);
    const result = await waitUntilReady(
      async () => {
        const exit = deps.processes.exitOf(step.process);
        if (exit) return { ready: false, fatal: true, reason: `exited with ${exit.signal ?? exit.code}` };
        return get();
      },
      { sleep: deps.sleep, budgetMs: step.budgetMs, what: step.process },
    );
    return { status: "ok", detail: { attempts: result.attempts } };
  }

  return async (step) => {
    switch (step.kind) {
      case "clone":
        return clone(step);
      case "write-metadata":
        await writeMetadata(step.path, step.metadata);
        return { status: "ok" };
      case "restore-metadata": {
        const previous = await readMetadata(step.path);
        const next: SessionMetadata = {
          ...step.metadata,
          ...(previous?.lastGitFetchAt !== undefined ? { lastGitFetchAt: previous.lastGitFetchAt } : {}),
        };
        await writeMetadata(step.path, next);
        return { status: "ok", detail: { found: previous !== null } };
      }
      case "files":
        for (const op of step.ops) await applyFileOp(op);
        return { status: "ok", detail: { files: step.ops.length } };
      case "start-dev-model": {
        // Imported only when used: the image never runs the development model.
        const { startDevModelServer } = await import("../dev-model/server");
        const server = await startDevModelServer({ port: step.port, requiredKeySha256: step.requiredKeySha256 });
        deps.processes.onStop(() => server.close());
        return { status: "ok", detail: { url: server.url } };
      }
      case "spawn": {
        if (step.command.requires && !(await exists(step.command.requires))) {
          return { status: "skipped", reason: `${step.command.requires} is not installed` };
        }
        const pid = await deps.processes.start(step.process, step.command.argv, {
          cwd: step.cwd,
          env: childEnv(step.env),
          log: step.log,
          // The sidecar reads its key from stdin (`SIDECAR_TOKEN_FILE=-` in its step env).
          ...(step.process === "sidecar" ? { stdin: sandboxKey ?? "" } : {}),
        });
        return { status: "ok", detail: { pid } };
      }
      case "wait-http":
        return waitHttp(step);
      case "git-pull":
        return gitPull(step);
      case "run": {
        if (step.command.requires && !(await exists(step.command.requires))) {
          return { status: "skipped", reason: `${step.command.requires} is not installed` };
        }
        const [file, ...args] = step.command.argv;
        if (!file) throw new Error("empty command");
        const credential = step.sidecarAccess ? accessTokenFor(step.timeoutMs) : undefined;
        const r = await runToCompletion(file, args, { cwd: step.cwd, env: childEnv(step.env, credential), timeoutMs: step.timeoutMs });
        if (r.exitCode !== 0) throw failure(step.name, r);
        return { status: "ok" };
      }
    }
  };
}
