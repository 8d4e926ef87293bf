/**
 * Flow step `provision` (seed 000 §2 `ensureRuntimeReady`, §5 resume, §6 migration): bring up
 * the sandbox and the coding-agent session in it.
 *
 * - `ensure-runtime` calls the provider's idempotent `ensureSandbox`: a retry after a crash
 *   recovers the sandbox the first attempt created instead of creating a second one;
 * - `migrate` always creates a fresh sandbox from the snapshot just taken.
 *
 * Every sandbox of the session (first boot, restore, migration) gets the session's settings
 * (sessionSandboxOpts): the model and its key (session over org over deployment default), the
 * system prompt, service commands, SSH key, trigger context, git identity, and where its sidecar
 * asks for git credentials and env-file values. The model key is the only secret in the create
 * call (the agent needs it in its environment); git tokens and env values are fetched on demand.
 *
 * If anything fails after a new sandbox exists, the step terminates that sandbox before it
 * fails, so a retry or the failure path never leaves one running that nothing references.
 */
import type { CreateSandboxOpts, SandboxProvider } from "../../ports/sandbox-provider";
import { chainKeys, fallbackChain, resolveModel, type ChainKey, type ResolvedModel } from "../../domain/agent-settings";
import type { SessionRecord } from "../../domain/session";
import type { FlowDeps } from "../flow-deps";
import type { Config } from "../../config/config";
import { resolveSnapshot, type SnapshotResolutionInput } from "../../domain/snapshot-resolution";
import { resolveRestoreSource } from "../../domain/restore-source";
import { SessionSettingsError } from "../../domain/errors";
import { builtSnapshotUsable } from "../../domain/repos-prebuilds";
import { errorForLog } from "../../observability/logger";
import { flowStep, sessionOf } from "../step";
import { SANDBOX_KEY_ENV } from "../../../sandbox/shared/access-token";
import { stepEntry } from "../lambda-entry";
import { awsProviders } from "../../providers/aws-providers";
import { agentEndpointForKey } from "../../agent/agent-endpoint";
import type { FlowDocument, ProvisionResult } from "../flow-document";
import { CarryError, STEP_ERRORS, toStepError } from "../step-errors";
import { commitFlow } from "./commit";
import { discardCreated } from "./discard";

export const makeProvisionStep = flowStep("provision", async (doc, deps) => {
  const started = Date.now();
  const result = await provisionSandbox(doc, deps);
  if (doc.flow !== "ensure-runtime") return result;
  return { ...result, committed: await commitInProcess(doc, { ...result, ms: Date.now() - started }, deps) };
});

/**
 * ensure-runtime has no Commit state (issue 15: one billed transition less per start and per
 * resume): its Provision commits `running` and finishes in the same invocation, through the
 * Commit step's own code (`commitFlow`). A finish that did not complete leaves through
 * `FinishIncomplete` as Commit's does (the provision result carried too). A commit that did not
 * land (superseded: `LeaseLost`, `StaleWrite`, `InvalidTransition`, `SessionNotFound`; or failed)
 * discards the sandbox this provision created, as the Discard state did after Commit, and leaves
 * through `Discarded` with the document for Finish (`superseded` or `failure`, `discarded`).
 */
async function commitInProcess(doc: FlowDocument, provision: ProvisionResult, deps: FlowDeps): Promise<Record<string, unknown>> {
  const withProvision: FlowDocument = { ...doc, provision };
  try {
    return await commitFlow(withProvision, deps);
  } catch (err) {
    if (err instanceof CarryError) throw new CarryError(err.name, err.key, err.carried, { ...err.extra, provision });
    const stepError = toStepError(err);
    const superseded = (SUPERSEDED as readonly string[]).includes(stepError.name);
    deps.logger.warn("in-process commit did not land: discarding the provisioned sandbox", { sessionId: doc.sessionId, execution: doc.execution, errorName: stepError.name, error: errorForLog(err) });
    const discardStarted = Date.now();
    const discarded = await discardCreated(withProvision, deps).catch((discardErr: unknown) => {
      deps.logger.error("could not discard the provisioned sandbox", { sessionId: doc.sessionId, error: errorForLog(discardErr) });
      return { terminated: null };
    });
    const caught = { Error: stepError.name, Cause: stepError.message };
    throw new CarryError(STEP_ERRORS.discarded, "discarded", { ...discarded, ms: Date.now() - discardStarted }, { provision, ...(superseded ? { superseded: caught } : { failure: caught }) });
  }
}

/** The errors Commit's Catch treats as a superseded flow (the ASL's list). */
const SUPERSEDED = [STEP_ERRORS.leaseLost, STEP_ERRORS.staleWrite, STEP_ERRORS.invalidTransition, STEP_ERRORS.sessionNotFound] as const;

async function provisionSandbox(doc: FlowDocument, deps: FlowDeps) {
  // The record Begin's lease take returned: nothing else changes it while the flow holds the lease (issue 15).
  const session = await sessionOf(doc, deps);
  const provider: SandboxProvider = await deps.provider(session.provider);
  const migrating = doc.flow === "migrate";
  // issue 22 §3: the session's snapshot while it is valid, its durable filesystem snapshot after.
  const restore = migrating ? null : resolveRestoreSource(session, deps.now());
  const sessionSnapshotId = migrating ? (doc.snapshot?.snapshotId ?? null) : (restore?.snapshotId ?? null);
  // seed 003 §6.5: session > prebuild > repo (Modal, single repo at the root) > base. The base
  // itself is the provider's own (MODAL_BASE_SNAPSHOT_ID, the E2B template, the local image).
  const layers = resolveSnapshot({
    provider: session.provider,
    repos: session.repos,
    sessionSnapshotId,
    ...(sessionSnapshotId ? {} : await builtLayers(session, deps)),
  });
  // issue 14 §2: a freshly booted sandbox gets the next key epoch, so a key leaked from an earlier
  // sandbox stops working once this one is committed; one that resumes its processes keeps the
  // key its sidecar already holds.
  const currentEpoch = session.sandboxKeyEpoch ?? 0;
  const boots = !(provider.keepsProcesses?.(layers.snapshotId) ?? false);
  const newEpoch = boots ? currentEpoch + 1 : currentEpoch;
  const sandboxKey = await deps.sandboxKeys.sandboxKey(session.id, newEpoch);
  const model = await sessionModel(session, doc, deps);
  const opts = {
    ...sessionSandboxOpts(session, model, deps.config),
    envVars: { SESSION_ID: session.id, [SANDBOX_KEY_ENV]: sandboxKey, ...(await modelKeyEnv(session, model, deps)) },
    snapshotId: layers.snapshotId,
    baseSnapshotId: layers.baseSnapshotId,
    snapshotHasDeps: layers.snapshotHasDeps,
    currentSandboxId: migrating ? null : session.sandboxId,
    // A prebuild or repo snapshot was not built from this session: it is pulled up to date on
    // every restore, whatever the session-snapshot cadence says.
    ...(layers.layer === "prebuild" || layers.layer === "repo" ? { gitFreshness: { enabled: true, cadenceSeconds: 0 } } : {}),
  };
  const result = migrating ? { ...(await provider.createSandbox(opts)), recovered: false } : await provider.ensureSandbox(opts);
  try {
    // The session's own sandbox, recovered alive, still holds the current epoch's key; a sandbox
    // created for this provision (now, or by an earlier attempt of it) holds the new one.
    const epoch = result.recovered && result.sandboxId === session.sandboxId ? currentEpoch : newEpoch;
    const key = epoch === newEpoch ? sandboxKey : await deps.sandboxKeys.sandboxKey(session.id, epoch);
    // Its OpenCode's password derives from that key.
    const codingAgentSessionId = await deps.agent.ensureSession(agentEndpointForKey(result.tunnelUrl, key), session.codingAgentSessionId);
    return {
      sandboxId: result.sandboxId,
      tunnelUrl: result.tunnelUrl,
      previewUrl: result.previewUrl,
      expiresAt: result.expiresAt,
      recovered: result.recovered,
      codingAgentSessionId,
      sandboxKeyEpoch: epoch,
      // Recovered: the sandbox kept the layer it started from (unknown here).
      layer: result.recovered ? null : layers.layer,
      startedFrom: result.recovered ? null : (layers.snapshotId ?? layers.baseSnapshotId),
    };
  } catch (err) {
    if (!result.recovered) {
      await provider.terminate(session.id, result.sandboxId).catch((cleanupErr: unknown) => {
        deps.logger.error("could not terminate the sandbox of a failed provision", { sessionId: session.id, sandboxId: result.sandboxId, error: errorForLog(cleanupErr) });
      });
    }
    throw err;
  }
}

/**
 * The built layers a session may start from: its prebuild's last good snapshot (when built on the
 * session's provider) and, for a single stored repository, that repository's snapshot. A build
 * in progress never shows here: only a recorded (succeeded) snapshot does.
 */
async function builtLayers(session: SessionRecord, deps: FlowDeps): Promise<Pick<SnapshotResolutionInput, "prebuild" | "repoSnapshot">> {
  const out: Pick<SnapshotResolutionInput, "prebuild" | "repoSnapshot"> = {};
  if (session.prebuildId) {
    const prebuild = await deps.catalog.getPrebuild(session.orgId, session.prebuildId);
    const snap = prebuild?.snapshot;
    if (snap && snap.provider === session.provider && builtSnapshotUsable(snap, deps.now())) out.prebuild = { snapshotId: snap.id, status: "ready" };
  }
  const [only, ...rest] = session.repos;
  if (only?.repoId && rest.length === 0) {
    const snap = (await deps.catalog.getRepo(session.orgId, only.repoId))?.snapshot;
    if (snap && builtSnapshotUsable(snap, deps.now())) out.repoSnapshot = { snapshotId: snap.id, status: "ready", provider: snap.provider };
  }
  return out;
}

/** The model the session resolves to: its own, else its org's (as Begin read it with the org's limits, else read now). */
async function sessionModel(session: SessionRecord, doc: FlowDocument, deps: FlowDeps): Promise<ResolvedModel> {
  if (session.model) return resolveModel(session.model, null);
  const carried = doc.begin?.orgModel;
  return resolveModel(null, carried !== undefined ? carried : await deps.orgSettings.getModel(session.orgId));
}

/** Everything but the env vars and snapshot facts: plain settings, no secret among them. */
export function sessionSandboxOpts(session: SessionRecord, model: ResolvedModel, config: Config): Omit<CreateSandboxOpts, "envVars"> {
  return {
    sessionId: session.id,
    repos: session.repos,
    sessionType: session.sessionType,
    envFiles: session.envFiles,
    ...agentConfigOf(session, model),
    ...(session.systemPrompt ? { systemPrompt: session.systemPrompt } : {}),
    serviceCommands: session.serviceCommands,
    autoStartServices: session.serviceCommands.length > 0,
    ...(session.sshPublicKey ? { sshPublicKey: session.sshPublicKey } : {}),
    ...(session.triggerContext ? { triggerContext: session.triggerContext } : {}),
    ...(session.gitIdentity ? { gitIdentity: session.gitIdentity } : {}),
    ...(config.CONTROL_PLANE_URL ? { controlPlaneUrl: config.CONTROL_PLANE_URL.replace(/\/+$/, "") } : {}),
    gitFreshness: { enabled: config.SANDBOX_GIT_PULL_ON_RESTORE, cadenceSeconds: config.SANDBOX_GIT_PULL_CADENCE_SECONDS },
  };
}

/** The model and its failover chain (seed 004): the provider hands the deployment's key to each of their providers that has no org secret. */
function agentConfigOf(session: SessionRecord, model: ResolvedModel): Pick<CreateSandboxOpts, "agentConfig"> {
  const fallbackModelIds = session.fallbackModels;
  if (model.source === "default" && fallbackModelIds.length === 0) return {};
  return { agentConfig: { ...(model.source === "default" ? {} : { modelId: model.modelId }), ...(fallbackModelIds.length > 0 ? { fallbackModelIds } : {}) } };
}

/**
 * The model keys the sandbox's agent needs, from the org secrets the session's (or org's) model
 * and its fallbacks name: `{ANTHROPIC_API_KEY: ..., OPENAI_API_KEY: ...}`, one per provider of
 * the chain (the main model's secret first: domain/agent-settings.ts `chainKeys`). A provider no
 * model of the chain names a secret for uses the deployment's own key. A secret deleted since the
 * session was created fails the boot with its name (never its value).
 */
async function modelKeyEnv(session: SessionRecord, model: ResolvedModel, deps: FlowDeps): Promise<Record<string, string>> {
  const main = model.source === "default" ? [] : [model.keySecret ? { id: model.modelId, apiKeySecret: model.keySecret } : { id: model.modelId }];
  const named = chainKeys([...main, ...fallbackChain(session)]).filter((k): k is ChainKey & { keySecret: string } => k.keySecret !== null);
  if (named.length === 0) return {};
  const values = await deps.secrets.reveal(session.orgId, [...new Set(named.map((k) => k.keySecret))]);
  const env: Record<string, string> = {};
  for (const key of named) {
    const value = values[key.keySecret];
    if (value === undefined) throw new SessionSettingsError(`the model key secret "${key.keySecret}" no longer exists in the session's organization`);
    env[key.keyEnv] = value;
  }
  return env;
}

export const handler = stepEntry(makeProvisionStep, awsProviders);
