/**
 * Org secrets over DynamoDB (dynalite locally). Key layout: ./table-layout.ts (`ORG#<orgId>` /
 * `SECRET#<name>`). The value is stored only as an envelope (functions/secrets/envelope-cipher.ts):
 * AES-256-GCM under a per-secret data key that the `SecretKeyWrapper` (KMS in AWS) wraps, bound
 * to the org and name. Metadata reads project the envelope away and never call the wrapper.
 *
 * Nothing here logs or throws a value: errors name the org and the secret, never what it holds.
 */
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { DeleteCommand, GetCommand, QueryCommand, UpdateCommand } from "./dynamodb-sdk";
import * as z from "zod";
import { InternalError, ValidationError } from "../domain/errors";
import { SECRET_NAME_PATTERN, type OrgSecretStore, type SecretMetadata } from "../ports/org-secrets";
import type { SecretKeyWrapper } from "../ports/secret-key-wrapper";
import { SecretEnvelope, openSecret, sealSecret } from "../secrets/envelope-cipher";
import { keys } from "./table-layout";
import { BATCH_GET_LIMIT, batchGetItems } from "./batch-requests";

const StoredMetadata = z.object({
  name: z.string(),
  description: z.string().nullable().default(null),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const StoredSecret = StoredMetadata.extend({ envelope: SecretEnvelope });

/** `name` is a DynamoDB reserved word; the projection of a metadata read (no envelope). */
const METADATA_PROJECTION = { ProjectionExpression: "#name, description, createdAt, updatedAt", ExpressionAttributeNames: { "#name": "name" } } as const;


function toMetadata(item: Record<string, unknown>): SecretMetadata {
  const { name, description, createdAt, updatedAt } = StoredMetadata.parse(item);
  return { name, description, createdAt, updatedAt };
}

function checkName(name: string): void {
  if (!SECRET_NAME_PATTERN.test(name)) throw new ValidationError("name: must match [A-Za-z_][A-Za-z0-9_]{0,127}", "invalid_secret_name");
}

/** Distinct names that can exist: a name that breaks the pattern names no secret. */
function lookupNames(names: readonly string[]): string[] {
  return [...new Set(names)].filter((n) => SECRET_NAME_PATTERN.test(n));
}

export class DynamoOrgSecretStore implements OrgSecretStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly wrapper: SecretKeyWrapper,
  ) {}

  async put(input: { orgId: string; name: string; value: string; description?: string | null; now: Date }): Promise<SecretMetadata> {
    checkName(input.name);
    const context = { orgId: input.orgId, name: input.name };
    const envelope = await sealSecret(this.wrapper, input.value, context);
    const now = input.now.toISOString();
    // One write, no read first: createdAt only when the item is new (rotation keeps it); an
    // omitted description keeps the stored one, null clears it. Concurrent puts: the last wins.
    const description = input.description === undefined ? "description = if_not_exists(description, :null)" : "description = :description";
    const out = await this.doc.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: keys.secret(input.orgId, input.name),
        UpdateExpression: `SET #name = :name, envelope = :envelope, updatedAt = :now, createdAt = if_not_exists(createdAt, :now), ${description}`,
        ExpressionAttributeNames: { "#name": "name" },
        ExpressionAttributeValues: {
          ":name": input.name,
          ":envelope": envelope,
          ":now": now,
          ...(input.description === undefined ? { ":null": null } : { ":description": input.description }),
        },
        ReturnValues: "ALL_NEW",
      }),
    );
    if (!out.Attributes) throw new InternalError(`secret ${input.name}: the write returned no item`);
    return toMetadata(out.Attributes);
  }

  async get(orgId: string, name: string): Promise<SecretMetadata | null> {
    if (!SECRET_NAME_PATTERN.test(name)) return null;
    const out = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: keys.secret(orgId, name), ...METADATA_PROJECTION }));
    return out.Item ? toMetadata(out.Item) : null;
  }

  async list(orgId: string): Promise<SecretMetadata[]> {
    const items: SecretMetadata[] = [];
    let cursor: Record<string, unknown> | undefined;
    do {
      const out = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
          ExpressionAttributeValues: { ":pk": keys.secret(orgId, "").PK, ":prefix": keys.secretPrefix },
          ...METADATA_PROJECTION,
          ...(cursor ? { ExclusiveStartKey: cursor } : {}),
        }),
      );
      for (const item of out.Items ?? []) items.push(toMetadata(item));
      cursor = out.LastEvaluatedKey;
    } while (cursor);
    return items;
  }

  async delete(orgId: string, name: string): Promise<boolean> {
    if (!SECRET_NAME_PATTERN.test(name)) return false;
    // The old item tells whether anything was there, in the same call (no read-then-delete race).
    const out = await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keys.secret(orgId, name), ReturnValues: "ALL_OLD" }));
    return out.Attributes !== undefined;
  }

  async existing(orgId: string, names: readonly string[]): Promise<Set<string>> {
    const items = await this.batchGet(orgId, lookupNames(names), { ProjectionExpression: "#name", ExpressionAttributeNames: { "#name": "name" } });
    return new Set(items.map((item) => String(item.name)));
  }

  async reveal(orgId: string, names: readonly string[]): Promise<Record<string, string>> {
    const items = await this.batchGet(orgId, lookupNames(names), {});
    const entries = await Promise.all(
      items.map(async (item): Promise<[string, string]> => {
        const stored = StoredSecret.safeParse(item);
        if (!stored.success) throw new InternalError(`secret ${String(item.name)} of org ${orgId}: stored item is malformed`);
        return [stored.data.name, await openSecret(this.wrapper, stored.data.envelope, { orgId, name: stored.data.name })];
      }),
    );
    // fromEntries defines own properties: a secret named `__proto__` stays a plain entry.
    return Object.fromEntries(entries);
  }

  /** Items for the given names of one org, in chunks of 100 (batch-requests.ts retries unprocessed keys). */
  private async batchGet(
    orgId: string,
    names: readonly string[],
    projection: { ProjectionExpression?: string; ExpressionAttributeNames?: Record<string, string> },
  ): Promise<Record<string, unknown>[]> {
    const found: Record<string, unknown>[] = [];
    for (let i = 0; i < names.length; i += BATCH_GET_LIMIT) {
      const chunk = names.slice(i, i + BATCH_GET_LIMIT).map((name) => keys.secret(orgId, name));
      found.push(...(await batchGetItems(this.doc, this.tableName, chunk, `org ${orgId} secrets`, projection)));
    }
    return found;
  }

}
