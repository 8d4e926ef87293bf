/**
 * The snapshot builder's steps (statemachines/builds/snapshot-builder.asl.json; API.md
 * "Repositories and prebuilds"; seed 003 "Snapshot Layering"): boot a sandbox from the base with
 * the target's repos cloned, run its setup commands, verify its services start, snapshot it,
 * record the snapshot on the prebuild or repo (deleting the one it supersedes), and terminate
 * the build sandbox on every path. A failed build keeps its (redacted, bounded) log.
 *
 * The build sandbox belongs to no session: the provider sees the build id where a session id
 * would be, and the sandbox gets a key of its own (build-sandbox.ts) and the control-plane URL,
 * so its sidecar fetches the git credentials of the build's repositories like a session's does
 * (POST /v1/sandbox/git-credential), only while the build runs. Nothing here is specific to a
 * provider: the steps use the port's create, exec, snapshot, deleteSnapshot and terminate only.
 */
import { ProviderError } from "../domain/errors";
import { boundedLog } from "../domain/repos-prebuilds";
import type { ExecResult, SandboxProvider } from "../ports/sandbox-provider";
import { errorForLog } from "../observability/logger";
import { redactSecrets } from "../observability/redact-secrets";
import type { FlowDeps } from "../flows/flow-deps";
import type { StepFactory } from "../flows/step";
import { toStepError } from "../flows/step-errors";
import { deleteSnapshotOrRecord } from "../flows/snapshot-retirement";
import { BuildDocument } from "./build-document";
import { loadBuildPlan } from "./build-start";
import { buildSandboxKey } from "./build-sandbox";
import { SANDBOX_KEY_ENV } from "../../sandbox/shared/access-token";

/** A setup command or service verification that failed: the build fails (no retry). */
export const BUILD_COMMAND_FAILED = "BuildCommandFailed";
/** The build, its target or its repos are gone: the build fails (no retry). */
export const BUILD_TARGET_GONE = "BuildTargetGone";

class BuildStepError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

function buildStep<R extends object>(name: string, run: (doc: BuildDocument, deps: FlowDeps) => Promise<R>): StepFactory {
  return (deps) => async (event) => {
    const started = Date.now();
    const doc = BuildDocument.parse(event);
    const log = { step: name, buildId: doc.buildId, target: `${doc.target.kind}:${doc.target.id}`, execution: doc.execution };
    try {
      const result = await run(doc, deps);
      deps.logger.info("build step done", { ...log, ms: Date.now() - started });
      return { ...result, ms: Date.now() - started };
    } catch (err) {
      const named = err instanceof BuildStepError ? err : toStepError(err);
      deps.logger.warn("build step failed", { ...log, errorName: named.name, error: errorForLog(err) });
      throw named;
    }
  };
}

async function buildOf(doc: BuildDocument, deps: FlowDeps) {
  const build = await deps.catalog.getBuild(doc.orgId, doc.target, doc.buildId);
  if (!build) throw new BuildStepError(BUILD_TARGET_GONE, `build ${doc.buildId} not found`);
  return build;
}

/** Boots the build sandbox from the base layer with the target's repos cloned. */
export const makeBuildProvisionStep = buildStep("build-provision", async (doc, deps) => {
  const build = await buildOf(doc, deps);
  const plan = await loadBuildPlan(deps.catalog, doc.orgId, doc.target);
  if ("missing" in plan) throw new BuildStepError(BUILD_TARGET_GONE, plan.missing);
  const provider = await deps.provider(build.provider);
  // A retry starts clean: whatever an earlier attempt of this build left (a Lambda that timed out
  // mid-boot) is terminated first, so it neither runs on as an orphan nor collides with the new
  // sandbox's name (Modal names sandboxes after the build id, unique per app).
  await provider.terminate(build.id, null);
  const controlPlaneUrl = deps.config.CONTROL_PLANE_URL?.replace(/\/+$/, "");
  const result = await provider.createSandbox({
    sessionId: build.id,
    repos: plan.repos,
    // The build's own sandbox key: OpenCode's tunnel takes only its password (Modal and E2B tunnels
    // are public), and the sidecar signs its credential requests with it.
    envVars: { SESSION_ID: build.id, [SANDBOX_KEY_ENV]: await buildSandboxKey(deps.sandboxKeys, build.id) },
    snapshotId: null,
    baseSnapshotId: null,
    sessionType: "setup",
    ...(controlPlaneUrl ? { controlPlaneUrl } : {}),
  });
  await deps.catalog.setBuildSandbox(doc.orgId, doc.target, build.id, result.sandboxId);
  return { sandboxId: result.sandboxId };
});

/** `sh -c` a service command in its own process group, and report whether it is up (or exited 0) after `seconds`. */
export function serviceProbeScript(command: string, seconds: number): string {
  const quoted = `'${command.replace(/'/g, `'\\''`)}'`;
  const ticks = Math.max(1, Math.ceil(seconds * 10));
  return [
    `log=$(mktemp)`,
    `setsid sh -c ${quoted} >"$log" 2>&1 &`,
    `pid=$!`,
    `i=0`,
    `while [ $i -lt ${ticks} ]; do`,
    `  if ! kill -0 $pid 2>/dev/null; then wait $pid; code=$?; tail -n 20 "$log"; echo "exited with code $code"; rm -f "$log"; exit $code; fi`,
    `  sleep 0.1; i=$((i+1))`,
    `done`,
    `tail -n 20 "$log"`,
    `kill -TERM -- -$pid 2>/dev/null; kill -TERM $pid 2>/dev/null`,
    `echo "running after ${seconds}s"`,
    `rm -f "$log"`,
  ].join("\n");
}

function outputLines(result: ExecResult): string[] {
  return `${result.stdout}\n${result.stderr}`
    .split("\n")
    .map((l) => redactSecrets(l.trimEnd()))
    .filter((l) => l.length > 0);
}

async function exec(provider: SandboxProvider, sandboxId: string, script: string, cwd: string, timeoutMs: number): Promise<ExecResult> {
  if (!provider.execCommand) throw new ProviderError(provider.type, "execCommand", "this provider cannot run commands in a sandbox, so it cannot build snapshots");
  return provider.execCommand(sandboxId, ["sh", "-c", script], { cwd, timeoutMs });
}

/** Runs the setup commands in order, then checks every service command starts; the log goes to the build item. */
export const makeBuildSetupStep = buildStep("build-setup", async (doc, deps) => {
  const sandboxId = doc.provision?.sandboxId;
  if (!sandboxId) throw new Error("build document has no sandbox");
  const build = await buildOf(doc, deps);
  const plan = await loadBuildPlan(deps.catalog, doc.orgId, doc.target);
  if ("missing" in plan) throw new BuildStepError(BUILD_TARGET_GONE, plan.missing);
  const provider = await deps.provider(build.provider);
  const log: string[] = [];
  const save = () => deps.catalog.setBuildLog(doc.orgId, doc.target, build.id, boundedLog(log));
  const timeoutMs = deps.config.BUILD_COMMAND_TIMEOUT_SECONDS * 1000;
  try {
    for (const step of plan.setup) {
      log.push(`$ ${redactSecrets(step.command)}  (in ${step.cwd})`);
      const result = await exec(provider, sandboxId, step.command, step.cwd, timeoutMs);
      log.push(...outputLines(result));
      if (result.exitCode !== 0) throw new BuildStepError(BUILD_COMMAND_FAILED, `setup command failed with exit code ${result.exitCode}: ${redactSecrets(step.command).slice(0, 200)}`);
    }
    for (const service of plan.services) {
      log.push(`service ${service.name}: ${redactSecrets(service.command)}  (in ${service.cwd ?? "."})`);
      const seconds = deps.config.BUILD_SERVICE_VERIFY_SECONDS;
      const result = await exec(provider, sandboxId, serviceProbeScript(service.command, seconds), service.cwd ?? ".", timeoutMs + seconds * 1000);
      log.push(...outputLines(result));
      if (result.exitCode !== 0) throw new BuildStepError(BUILD_COMMAND_FAILED, `service ${service.name} did not start (exit code ${result.exitCode})`);
    }
  } finally {
    await save();
  }
  return { commands: plan.setup.length, services: plan.services.length };
});

/**
 * Snapshots the build sandbox and records it on the target when no newer build's snapshot is
 * there yet; then deletes the snapshot that lost (the superseded one, or this one when a newer
 * build won), keeping exactly the last good snapshot. A build in progress never touched the
 * target's snapshot, so sessions used the previous one meanwhile.
 */
export const makeBuildCaptureStep = buildStep("build-capture", async (doc, deps) => {
  const sandboxId = doc.provision?.sandboxId;
  if (!sandboxId) throw new Error("build document has no sandbox");
  const build = await buildOf(doc, deps);
  const provider = await deps.provider(build.provider);
  const { snapshotId, expiresAt } = await provider.snapshot(build.id, sandboxId);
  const builtAt = deps.now().toISOString();
  // A snapshot with a lifetime (Modal images under MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS) records it:
  // provision never starts a session from it once expired, and the scheduled rebuild replaces it.
  const outcome = await deps.catalog.recordSnapshot(doc.orgId, doc.target, {
    id: snapshotId,
    builtAt,
    buildId: build.id,
    startedAt: build.startedAt,
    provider: build.provider,
    ...(typeof expiresAt === "number" ? { expiresAt: new Date(expiresAt).toISOString() } : {}),
  });
  const stale = outcome.recorded ? (outcome.previous?.id ?? null) : snapshotId;
  const deleted: string[] = [];
  if (stale && !(outcome.recorded && stale === snapshotId) && (await deleteSnapshotOrRecord(deps, provider, { provider: build.provider, snapshotId: stale, sessionId: null }))) deleted.push(stale);
  await deps.catalog.finishBuild(doc.orgId, doc.target, build.id, {
    status: "succeeded",
    endedAt: builtAt,
    snapshotId,
    error: outcome.recorded ? null : "a newer build's snapshot was recorded first; this one was discarded",
    timings: timingsOf(doc),
  });
  return { snapshotId, recorded: outcome.recorded, deleted };
});

function timingsOf(doc: BuildDocument): Record<string, number> {
  const out: Record<string, number> = {};
  if (doc.provision) out.provision = doc.provision.ms;
  if (doc.setup) out.setup = doc.setup.ms;
  return out;
}

/** The failure path: the build is `failed` with the error's message (redacted); its log stays. */
export const makeBuildFailStep = buildStep("build-fail", async (doc, deps) => {
  const message = redactSecrets(doc.failure?.Cause ?? doc.failure?.Error ?? "the build failed").slice(0, 1000);
  await deps.catalog.finishBuild(doc.orgId, doc.target, doc.buildId, { status: "failed", endedAt: deps.now().toISOString(), snapshotId: null, error: message, timings: timingsOf(doc) });
  return {};
});

/** Every path ends here: the build sandbox is terminated (idempotent; the one the build recorded when provision died midway). */
export const makeBuildTerminateStep = buildStep("build-terminate", async (doc, deps) => {
  const build = await deps.catalog.getBuild(doc.orgId, doc.target, doc.buildId);
  const sandboxId = doc.provision?.sandboxId ?? build?.sandboxId ?? null;
  if (!build) return { sandboxId: null };
  const provider = await deps.provider(build.provider);
  await provider.terminate(build.id, sandboxId);
  return { sandboxId };
});
