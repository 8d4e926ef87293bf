import { DynamoDBClient, CreateTableCommand, DescribeTableCommand, ResourceNotFoundException, DynamoDBDocumentClient } from "./dynamodb-sdk";
import { TABLE_DEFINITION } from "./table-layout";

export interface DynamoOptions {
  /** Set for dynalite / DynamoDB Local; unset in AWS. */
  endpoint?: string;
  region?: string;
}

/** The document client every store adapter shares: removes undefined, keeps numbers native. */
export function createDocumentClient(options: DynamoOptions = {}): DynamoDBDocumentClient {
  const client = new DynamoDBClient({
    ...(options.endpoint
      ? {
          endpoint: options.endpoint,
          region: options.region ?? "us-east-1",
          credentials: { accessKeyId: "local", secretAccessKey: "local" },
        }
      : options.region
        ? { region: options.region }
        : {}),
  });
  return DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertEmptyValues: false },
  });
}

/** Creates the table from `TABLE_DEFINITION` if it does not exist (local runtime and tests only). */
export async function ensureTable(doc: DynamoDBDocumentClient, tableName: string): Promise<void> {
  try {
    await doc.send(new DescribeTableCommand({ TableName: tableName }));
    return;
  } catch (err) {
    if (!(err instanceof ResourceNotFoundException)) throw err;
  }
  const attrs = new Set<string>([TABLE_DEFINITION.partitionKey, TABLE_DEFINITION.sortKey]);
  for (const g of TABLE_DEFINITION.globalSecondaryIndexes) {
    attrs.add(g.partitionKey);
    if (g.sortKey) attrs.add(g.sortKey);
  }
  await doc.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [...attrs].map((name) => ({ AttributeName: name, AttributeType: "S" })),
      KeySchema: [
        { AttributeName: TABLE_DEFINITION.partitionKey, KeyType: "HASH" },
        { AttributeName: TABLE_DEFINITION.sortKey, KeyType: "RANGE" },
      ],
      GlobalSecondaryIndexes: TABLE_DEFINITION.globalSecondaryIndexes.map((g) => ({
        IndexName: g.indexName,
        KeySchema: [{ AttributeName: g.partitionKey, KeyType: "HASH" }, ...(g.sortKey ? [{ AttributeName: g.sortKey, KeyType: "RANGE" as const }] : [])],
        Projection: g.projection ? { ProjectionType: "INCLUDE", NonKeyAttributes: [...g.projection] } : { ProjectionType: "ALL" },
      })),
    }),
  );
  // dynalite keeps a new table CREATING for `createTableMs`; wait until ACTIVE (bounded).
  for (let i = 0; i < 200; i++) {
    const d = await doc.send(new DescribeTableCommand({ TableName: tableName }));
    if (d.Table?.TableStatus === "ACTIVE") return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`table ${tableName} did not become ACTIVE`);
}
