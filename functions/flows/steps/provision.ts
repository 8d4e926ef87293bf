/**
 * Flow step `provision` (seed 000 §2 `ensureRuntimeReady`, §5 resume, §6 migration): bring up
 * the sandbox and the coding-agent session in it.
 *
 * - `ensure-runtime` calls the provider's idempotent `ensureSandbox`: a retry after a crash
 *   recovers the sandbox the first attempt created instead of creating a second one;
 * - `migrate` always creates a fresh sandbox from the snapshot just taken.
 *
 * If anything fails after a new sandbox exists, the step terminates that sandbox before it
 * fails, so a retry or the failure path never leaves one running that nothing references.
 */
import type { SandboxProvider } from "../../ports/sandbox-provider";
import { resolveSnapshot } from "../../domain/snapshot-resolution";
import { NotFoundError } from "../../domain/errors";
import { errorForLog } from "../../observability/logger";
import { flowStep } from "../step";
import { SANDBOX_KEY_ENV } from "../../../sandbox/shared/access-token";
import { stepEntry } from "../lambda-entry";
import { agentEndpointForKey } from "../../agent/agent-endpoint";

export const makeProvisionStep = flowStep("provision", async (doc, deps) => {
  const session = await deps.sessions.getSession(doc.sessionId);
  if (!session) throw new NotFoundError(`session ${doc.sessionId} not found`);
  const provider: SandboxProvider = await deps.provider(session.provider);
  const migrating = doc.flow === "migrate";
  const layers = resolveSnapshot({
    provider: session.provider,
    repos: session.repos,
    sessionSnapshotId: migrating ? (doc.snapshot?.snapshotId ?? null) : session.snapshotId,
  });
  const opts = {
    sessionId: session.id,
    repos: session.repos,
    envVars: { SESSION_ID: session.id, [SANDBOX_KEY_ENV]: await deps.sandboxKeys.sandboxKey(session.id) },
    snapshotId: layers.snapshotId,
    baseSnapshotId: layers.baseSnapshotId,
    snapshotHasDeps: layers.snapshotHasDeps,
    sessionType: session.sessionType,
    envFiles: session.envFiles,
    currentSandboxId: migrating ? null : session.sandboxId,
  };
  const result = migrating ? { ...(await provider.createSandbox(opts)), recovered: false } : await provider.ensureSandbox(opts);
  try {
    // The key the sandbox got as SIDECAR_TOKEN: its OpenCode's password derives from it.
    const codingAgentSessionId = await deps.agent.ensureSession(agentEndpointForKey(result.tunnelUrl, opts.envVars[SANDBOX_KEY_ENV]), session.codingAgentSessionId);
    return {
      sandboxId: result.sandboxId,
      tunnelUrl: result.tunnelUrl,
      expiresAt: result.expiresAt,
      recovered: result.recovered,
      codingAgentSessionId,
    };
  } catch (err) {
    if (!result.recovered) {
      await provider.terminate(session.id, result.sandboxId).catch((cleanupErr: unknown) => {
        deps.logger.error("could not terminate the sandbox of a failed provision", { sessionId: session.id, sandboxId: result.sandboxId, error: errorForLog(cleanupErr) });
      });
    }
    throw err;
  }
});

export const handler = stepEntry(makeProvisionStep);
