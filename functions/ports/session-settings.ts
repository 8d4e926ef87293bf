/**
 * The session settings the agent may save from inside its sandbox (issue 25 §4: its
 * `save_service_commands` and `save_env_files` tools): what the next boot of the session starts
 * and generates. Not lifecycle state: a save never moves the status, the version or the sandbox,
 * so it can never make a flow's compare-and-set commit fail.
 */
import type { ServiceCommand } from "../domain/agent-settings";
import type { SessionEnvFiles } from "../domain/session";

export interface AgentSessionSettings {
  serviceCommands?: ServiceCommand[];
  envFiles?: SessionEnvFiles;
}

export interface SessionSettingsStore {
  /**
   * Replaces the given settings on the session. `NotFoundError` when it does not exist,
   * `ConflictError` (naming the state) once it is stopped.
   */
  saveAgentSettings(sessionId: string, settings: AgentSessionSettings): Promise<void>;
}
