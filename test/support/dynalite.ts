/** Starts dynalite in this process on an ephemeral port and creates the project table. */
import dynalite from "dynalite";
import type { AddressInfo } from "node:net";
import type { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { createDocumentClient, ensureTable } from "../../functions/store/dynamo-client";

export interface TestTable {
  endpoint: string;
  tableName: string;
  doc: DynamoDBDocumentClient;
  close(): Promise<void>;
}

export async function startTestTable(tableName = `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`): Promise<TestTable> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;
  const doc = createDocumentClient({ endpoint });
  await ensureTable(doc, tableName);
  return {
    endpoint,
    tableName,
    doc,
    close: async () => {
      doc.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
