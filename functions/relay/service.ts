/**
 * The relay as a service in AWS (ECS Fargate, entry: ./main.ts): AWS adapters built once from
 * the environment, an owner id unique to this task, the relay started, and a small HTTP health
 * endpoint for the container health check (`{ok, heldSessions}`; 503 while draining). The local
 * runtime does not use this: it runs `StreamingRelay` in-process with its own adapters.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { ApiGatewayManagementApiClient } from "@aws-sdk/client-apigatewaymanagementapi";
import { SFNClient } from "@aws-sdk/client-sfn";
import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { lifecycleSchedulerFromEnv } from "../adapters/aws/eventbridge-lifecycle-scheduler";
import type { Logger } from "@aws-lambda-powertools/logger";
import * as z from "zod";
import { ApiGatewayClientPush } from "../adapters/aws/apigw-client-push";
import { SfnFlowRunner, stateMachineArnsFromEnv } from "../adapters/aws/sfn-flow-runner";
import { OpenCodeAgentClient } from "../agent/opencode-agent-client";
import { ConfigError, parseConfig } from "../config/config";
import { keyringFromEnv, sessionKeyEpochs } from "../config/sandbox-keyring";
import { errorForLog } from "../observability/logger";
import type { ClientPush } from "../ports/client-push";
import { createDocumentClient } from "../store/dynamo-client";
import { DynamoRelayLeaseStore } from "../store/dynamo-relay-store";
import { DynamoConnectionRegistry, DynamoPromptQueue } from "../store/dynamo-session-items";
import { DynamoSessionStore } from "../store/dynamo-session-store";
import { DynamoTranscriptStore } from "../store/dynamo-transcript";
import { publishHeldStreams } from "./held-streams-metric";
import { StreamingRelay } from "./relay";

const positive = (fallback: number) => z.coerce.number().positive().finite().default(fallback);

/** The relay's own settings (the table and endpoints come from the shared configuration). */
export const RelayEnv = z.object({
  RELAY_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  RELAY_LEASE_TTL_SECONDS: positive(30),
  RELAY_SCAN_INTERVAL_SECONDS: positive(5),
  RELAY_MAX_SESSIONS: z.coerce.number().int().positive().default(1000),
  RELAY_HEARTBEAT_TIMEOUT_SECONDS: positive(45),
  /** The WebSocket API's management endpoint; without it there is nobody to push to. */
  WS_MANAGEMENT_ENDPOINT: z.url().optional(),
});
export type RelayEnv = z.infer<typeof RelayEnv>;

export function parseRelayEnv(env: Record<string, string | undefined>): RelayEnv {
  const parsed = RelayEnv.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  }
  return parsed.data;
}

const TaskMetadata = z.object({ TaskARN: z.string().min(1) });

/**
 * This process's lease owner id: the ECS task id when the task metadata endpoint answers
 * (stable in logs and the console), else host name and pid. The pid keeps two processes on one
 * host apart either way.
 */
export async function resolveOwnerId(env: Record<string, string | undefined>, fetchImpl: typeof fetch = fetch): Promise<string> {
  const uri = env.ECS_CONTAINER_METADATA_URI_V4;
  if (uri) {
    try {
      const res = await fetchImpl(`${uri}/task`, { signal: AbortSignal.timeout(2_000) });
      const parsed = TaskMetadata.safeParse(await res.json());
      const taskId = parsed.success ? parsed.data.TaskARN.split("/").at(-1) : undefined;
      if (taskId) return `task-${taskId}-${process.pid}`;
    } catch {
      // Fall through: the host name is unique enough for a task without metadata.
    }
  }
  return `${hostname()}-${process.pid}`;
}

/** Without a WebSocket API there is nobody to push to. */
const noPush: ClientPush = { send: () => Promise.resolve("gone"), disconnect: () => Promise.resolve("gone") };

export interface RelayService {
  relay: StreamingRelay;
  healthPort: number;
  /** SIGTERM: health turns 503, the relay drains (streams closed, leases released), the server closes. */
  shutdown(): Promise<void>;
}

export async function startRelayService(env: Record<string, string | undefined>, logger: Logger): Promise<RelayService> {
  const config = parseConfig(env);
  const relayEnv = parseRelayEnv(env);
  const doc = createDocumentClient(config.DYNAMODB_ENDPOINT ? { endpoint: config.DYNAMODB_ENDPOINT } : {});
  const ownerId = await resolveOwnerId(env);
  const sessions = new DynamoSessionStore(doc, config.TABLE_NAME);
  const relay = new StreamingRelay(
    {
      sessions,
      prompts: new DynamoPromptQueue(doc, config.TABLE_NAME),
      flows: new SfnFlowRunner(new SFNClient({}), stateMachineArnsFromEnv(env)),
      agent: new OpenCodeAgentClient(),
      sandboxKeys: keyringFromEnv(env, undefined, sessionKeyEpochs(sessions)),
      connections: new DynamoConnectionRegistry(doc, config.TABLE_NAME),
      push: relayEnv.WS_MANAGEMENT_ENDPOINT ? new ApiGatewayClientPush(new ApiGatewayManagementApiClient({ endpoint: relayEnv.WS_MANAGEMENT_ENDPOINT })) : noPush,
      transcript: new DynamoTranscriptStore(doc, config.TABLE_NAME),
      relayLeases: new DynamoRelayLeaseStore(doc, config.TABLE_NAME),
      scheduler: lifecycleSchedulerFromEnv(env, () => new SchedulerClient({})),
      config,
      logger,
      now: () => new Date(),
    },
    {
      ownerId,
      leaseTtlSeconds: relayEnv.RELAY_LEASE_TTL_SECONDS,
      scanIntervalMs: relayEnv.RELAY_SCAN_INTERVAL_SECONDS * 1000,
      heartbeatTimeoutMs: relayEnv.RELAY_HEARTBEAT_TIMEOUT_SECONDS * 1000,
      maxSessions: relayEnv.RELAY_MAX_SESSIONS,
    },
  );
  let draining = false;
  const health = createHealthServer(() => ({ ok: !draining, heldSessions: relay.heldSessions().length }));
  await new Promise<void>((resolve, reject) => {
    health.once("error", reject);
    health.listen(relayEnv.RELAY_HEALTH_PORT, () => resolve());
  });
  relay.start();
  const metric = env.RELAY_PUBLISH_METRICS === "false" ? null : publishHeldStreams(() => relay.heldSessions().length, logger);
  logger.info("relay started", { ownerId, healthPort: (health.address() as AddressInfo).port });
  return {
    relay,
    healthPort: (health.address() as AddressInfo).port,
    shutdown: async () => {
      draining = true;
      metric?.stop();
      try {
        await relay.drain();
      } catch (err) {
        logger.error("relay drain failed", { error: errorForLog(err) });
      }
      await new Promise<void>((resolve) => health.close(() => resolve()));
      doc.destroy();
    },
  };
}

/** Any request: 200 `{ok: true, heldSessions}`, or 503 once draining. */
export function createHealthServer(status: () => { ok: boolean; heldSessions: number }): Server {
  return createServer((_req, res) => {
    const body = status();
    res.writeHead(body.ok ? 200 : 503, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  });
}
