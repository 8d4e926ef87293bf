/**
 * A build sandbox's identity (issue 24): the provider sees the build id where a session id would
 * be (its Modal name and tag, its E2B metadata, the local registry), and the sandbox gets a
 * sandbox key of its own, derived from the control plane's master key for the build id, exactly
 * as a session's is for the session id (sandbox/shared/access-token.ts). So a build sandbox's
 * sidecar signs its calls back like a session's does, and the control plane's git-credential
 * route (`auth: "sandbox"`, routes that opt in with `buildSandboxes`) resolves the credentials of
 * that build's repositories, and only while the build runs.
 *
 * A build sandbox boots once and is never restored, so its key has one epoch (0); build ids
 * (`bld_...`) and session ids (`ses_...`) never collide, so neither do their keys.
 *
 * Pure apart from the keyring it is handed.
 */
import type { SandboxKeyring } from "../config/sandbox-keyring";
import { BuildId, type BuildRecord } from "../domain/repos-prebuilds";

/** The only key epoch of a build sandbox. */
export const BUILD_SANDBOX_KEY_EPOCH = 0;

/**
 * How long a build may run at most: the builder state machine's own timeout in AWS
 * (infra/snapshot-builder.ts), above its worst path (provision and setup at Lambda's maximum for
 * every attempt their retriers allow). A build still `running` after it died without finishing;
 * its sandbox is no longer protected from the orphan sweeper.
 */
export const BUILD_MAX_RUNNING_SECONDS = 3 * 3600;

/** Whether a listed sandbox's owner id (its "session id") is a build's. */
export function isBuildId(id: string | null | undefined): id is string {
  return typeof id === "string" && BuildId.safeParse(id).success;
}

/** The build sandbox's key: what its sidecar holds and signs access tokens with. */
export function buildSandboxKey(keyring: SandboxKeyring, buildId: string): Promise<string> {
  return keyring.sandboxKey(buildId, BUILD_SANDBOX_KEY_EPOCH);
}

/** A build that is still running at `now` (not ended, and younger than BUILD_MAX_RUNNING_SECONDS). Pure. */
export function buildStillRunning(build: Pick<BuildRecord, "status" | "startedAt">, now: Date): boolean {
  return build.status === "running" && now.getTime() - Date.parse(build.startedAt) < BUILD_MAX_RUNNING_SECONDS * 1000;
}
