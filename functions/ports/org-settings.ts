/** An org's settings: its default agent model and failover chain (API: `GET | PUT /v1/org/model`). */
import type { AgentModel } from "../domain/agent-settings";

export interface OrgSettingsStore {
  /** The org's default model, or null when it has none (sessions then use the deployment default). */
  getModel(orgId: string): Promise<AgentModel | null>;
  /** Sets (or with null clears) the org's default model. */
  putModel(orgId: string, model: AgentModel | null, now: Date): Promise<void>;
  /** The org's default failover chain (seed 004), for sessions created without `fallbackModels`; `[]` when none. */
  getFallbackModels(orgId: string): Promise<AgentModel[]>;
  /** Replaces the org's default failover chain (`[]` clears it). */
  putFallbackModels(orgId: string, models: AgentModel[], now: Date): Promise<void>;
}
