/**
 * The agent's saved session settings (ports/session-settings.ts) on the session item: one
 * conditional UpdateCommand that sets only those attributes. The version, `updatedAt` (part of the
 * status index's sort key) and the lifecycle fields are left alone, so a save racing a flow's
 * commit changes nothing the commit checks, and the commit (which sets only its own fields)
 * never undoes a save.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { ConflictError, NotFoundError } from "../domain/errors";
import type { AgentSessionSettings, SessionSettingsStore } from "../ports/session-settings";
import { GetCommand, UpdateCommand } from "./dynamodb-sdk";
import { conditions, isConditionFailure } from "./item-lease";
import { keys } from "./table-layout";

export class DynamoSessionSettingsStore implements SessionSettingsStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async saveAgentSettings(sessionId: string, settings: AgentSessionSettings): Promise<void> {
    const fields = Object.entries(settings).filter(([, v]) => v !== undefined);
    if (fields.length === 0) return;
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keys.session(sessionId),
          UpdateExpression: `SET ${fields.map((_, i) => `#f${i} = :f${i}`).join(", ")}`,
          ConditionExpression: conditions({
            exists: "attribute_exists(PK)",
            // A stopped session never boots again: a late save from its dying sandbox is refused.
            notStopped: "#status <> :stopped",
          }),
          ExpressionAttributeNames: { "#status": "status", ...Object.fromEntries(fields.map(([name], i) => [`#f${i}`, name])) },
          ExpressionAttributeValues: { ":stopped": "stopped", ...Object.fromEntries(fields.map(([, value], i) => [`:f${i}`, value])) },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const stored = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.session(sessionId), ConsistentRead: true }));
      if (!stored.Item) throw new NotFoundError(`session ${sessionId} not found`, { cause: err });
      throw new ConflictError("session is stopped: its settings can no longer change", { cause: err, context: { sessionId } });
    }
  }
}
