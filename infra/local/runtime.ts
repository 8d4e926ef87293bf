/**
 * The local embedded runtime (ARCHITECTURE.md §6): dynalite (in memory, or on disk under
 * DATA_DIR), the table created from the same definition as the CDK stack, a development API
 * token, and the HTTP API serving the same Lambda handlers. Tests start it the same way.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { AddressInfo } from "node:net";
import dynalite from "dynalite";
import { parseConfig, type Config } from "../../functions/config/config";
import { newApiToken, newSessionId } from "../../functions/domain/ids";
import type { Principal } from "../../functions/domain/principal";
import type { HttpDeps } from "../../functions/http/http-handler";
import { createLogger } from "../../functions/observability/logger";
import { createMetrics } from "../../functions/observability/metrics";
import { createDocumentClient, ensureTable } from "../../functions/store/dynamo-client";
import { DynamoApiTokenStore, DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { startLocalHttpServer } from "./local-http-server";

export const LOCAL_TABLE_NAME = "sandbox-control-plane";
export const DEV_PRINCIPAL: Principal = { userId: "dev-user", orgId: "dev-org" };

export interface LocalRuntimeOptions {
  /** HTTP port; 0 picks a free one. */
  port?: number;
  host?: string;
  /** Persist DynamoDB data here; in memory when unset. */
  dataDir?: string;
  /** Fixes the development token instead of generating one. */
  devApiToken?: string;
  /** Environment overrides (timing constants etc.), parsed like the Lambda configuration. */
  env?: Record<string, string | undefined>;
  now?: () => Date;
}

export interface LocalRuntime {
  url: string;
  wsUrl: string | null;
  devApiToken: string;
  config: Config;
  deps: HttpDeps;
  /** Adds another API token (tests use one per org). */
  addApiToken(principal: Principal, token?: string): Promise<string>;
  close(): Promise<void>;
}

export async function startLocalRuntime(options: LocalRuntimeOptions = {}): Promise<LocalRuntime> {
  const dynamo = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(options.dataDir ? { path: ensureDir(path.join(options.dataDir, "dynamodb")) } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    dynamo.once("error", reject);
    dynamo.listen(0, "127.0.0.1", () => resolve());
  });
  const endpoint = `http://127.0.0.1:${(dynamo.address() as AddressInfo).port}`;
  const config = parseConfig({
    ...options.env,
    TABLE_NAME: LOCAL_TABLE_NAME,
    DYNAMODB_ENDPOINT: endpoint,
  });
  const doc = createDocumentClient({ endpoint });
  await ensureTable(doc, LOCAL_TABLE_NAME);

  const tokens = new DynamoApiTokenStore(doc, LOCAL_TABLE_NAME);
  const now = options.now ?? (() => new Date());
  const devApiToken = options.devApiToken ?? newApiToken();
  await tokens.putToken(devApiToken, { ...DEV_PRINCIPAL, name: "development token" }, now());

  const deps: HttpDeps = {
    sessions: new DynamoSessionStore(doc, LOCAL_TABLE_NAME),
    tokens,
    config,
    now,
    newSessionId,
    logger: createLogger("sandbox-control-plane-local"),
    metrics: createMetrics(),
  };
  const http = await startLocalHttpServer(deps, options.port ?? 0, options.host ?? "127.0.0.1");
  const url = `http://${options.host ?? "127.0.0.1"}:${http.port}`;

  return {
    url,
    wsUrl: config.WS_URL || null,
    devApiToken,
    config,
    deps,
    addApiToken: async (principal, token = newApiToken()) => {
      await tokens.putToken(token, principal, now());
      return token;
    },
    close: async () => {
      await http.close();
      doc.destroy();
      await new Promise<void>((resolve) => dynamo.close(() => resolve()));
    },
  };
}

function ensureDir(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}
