/** An org's settings: today its default agent model (API: `GET | PUT /v1/org/model`). */
import type { AgentModel } from "../domain/agent-settings";

export interface OrgSettingsStore {
  /** The org's default model, or null when it has none (sessions then use the deployment default). */
  getModel(orgId: string): Promise<AgentModel | null>;
  /** Sets (or with null clears) the org's default model. */
  putModel(orgId: string, model: AgentModel | null, now: Date): Promise<void>;
}
