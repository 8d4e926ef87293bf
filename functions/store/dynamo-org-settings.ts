/**
 * Org settings over DynamoDB: one item per org (`ORG#<orgId>` / `SETTINGS`, table-layout.ts).
 * Last write wins: settings are set by an admin, and a session reads them once per boot.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import * as z from "zod";
import { GetCommand, UpdateCommand } from "./dynamodb-sdk";
import { AgentModel } from "../domain/agent-settings";
import type { OrgSettingsStore } from "../ports/org-settings";
import { keys } from "./table-layout";

/** The org's default model from its settings item; a stored value this version cannot read is unset, never a crash of every boot. */
export function orgModelOf(item: Record<string, unknown> | undefined): AgentModel | null {
  const parsed = AgentModel.nullable().safeParse(item?.model ?? null);
  return parsed.success ? parsed.data : null;
}

export class DynamoOrgSettingsStore implements OrgSettingsStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async getModel(orgId: string): Promise<AgentModel | null> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.orgSettings(orgId), ProjectionExpression: "model" }));
    return orgModelOf(out.Item);
  }

  async putModel(orgId: string, model: AgentModel | null, now: Date): Promise<void> {
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: keys.orgSettings(orgId),
        UpdateExpression: model ? "SET #model = :model, updatedAt = :now" : "REMOVE #model SET updatedAt = :now",
        ExpressionAttributeNames: { "#model": "model" },
        ExpressionAttributeValues: { ...(model ? { ":model": model } : {}), ":now": now.toISOString() },
      }),
    );
  }

  async getFallbackModels(orgId: string): Promise<AgentModel[]> {
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.orgSettings(orgId), ProjectionExpression: "fallbackModels" }));
    const parsed = z.array(AgentModel).safeParse(out.Item?.fallbackModels ?? []);
    // As for the model: a stored chain this version cannot read is no chain, never a failed create.
    return parsed.success ? parsed.data : [];
  }

  async putFallbackModels(orgId: string, models: AgentModel[], now: Date): Promise<void> {
    await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: keys.orgSettings(orgId),
        UpdateExpression: models.length > 0 ? "SET fallbackModels = :models, updatedAt = :now" : "REMOVE fallbackModels SET updatedAt = :now",
        ExpressionAttributeValues: { ...(models.length > 0 ? { ":models": models } : {}), ":now": now.toISOString() },
      }),
    );
  }
}
