/**
 * The relay as a service in AWS (ECS Fargate, entry: ./main.ts): `RELAY_WORKERS` relays, each in
 * its own worker thread (./workers.ts) with the AWS runtime composed from the environment
 * (functions/composition), an owner id unique to this task and worker, and its share of
 * `RELAY_MAX_SESSIONS`; and, on the main thread, a small HTTP health endpoint for the container
 * health check (`{ok, heldSessions}`, summed over the workers; 503 while draining) and the
 * HeldStreams gauge. The local runtime does not use this: it runs `StreamingRelay` in-process with
 * its own adapters.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import type { Logger } from "@aws-lambda-powertools/logger";
import * as z from "zod";
import { composeAwsRuntime, nudgeQueueUrl } from "../composition/aws";
import { slackSecrets } from "../composition/slack-aws";
import { composeAwsAutomations } from "../composition/automations-aws";
import { turnSettled } from "../automations/automation-runs";
import { composeSlackProgress, observedPush } from "../composition/slack-progress";
import { ConfigError, parseConfig } from "../config/config";
import { errorForLog } from "../observability/logger";
import { publishHeldStreams } from "./held-streams-metric";
import { SqsNudgeSource, sqsClient } from "../adapters/aws/sqs-relay-nudge";
import { StreamingRelay } from "./relay";
import { DEFAULT_HEARTBEAT_TIMEOUT_MS } from "./session-stream";
import { RelayWorkers, siblingsChannel, type ServedRelay } from "./workers";

const positive = (fallback: number) => z.coerce.number().positive().finite().default(fallback);

/** The relay's own settings (the table and endpoints come from the shared configuration). */
export const RelayEnv = z.object({
  RELAY_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  RELAY_LEASE_TTL_SECONDS: positive(30),
  RELAY_SCAN_INTERVAL_SECONDS: positive(60),
  /** The pause between two long polls of the nudge queue (a receive itself waits up to 20 s for a nudge). */
  RELAY_NUDGE_POLL_MS: z.coerce.number().int().positive().default(250),
  /** Streams the whole process holds, split evenly over its workers. */
  RELAY_MAX_SESSIONS: z.coerce.number().int().positive().default(10000),
  /**
   * Relays in this process, one per worker thread (bench 5c: at 10,000 streams one heap's
   * collector was the fan-out tail; with 4 × 2,500 the quiet and heartbeat-round p99 was under
   * 20 ms in 5 of 6 runs, where one process's was 30-36 ms; a takeover's is not, README).
   */
  RELAY_WORKERS: z.coerce.number().int().min(1).max(64).default(4),
  RELAY_HEARTBEAT_TIMEOUT_SECONDS: positive(DEFAULT_HEARTBEAT_TIMEOUT_MS / 1_000),
  /** `false`: no HeldStreams metric (tests, or a relay without CloudWatch access). */
  RELAY_PUBLISH_METRICS: z.enum(["true", "false"]).default("true"),
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

export interface RelayService {
  workers: RelayWorkers<RelayWorkerData>;
  healthPort: number;
  /** SIGTERM: health turns 503, every worker drains (streams closed, heartbeat retired), the server closes. Resolves with the workers' counters summed. */
  shutdown(): Promise<Record<string, number>>;
}

/** What a worker starts its relay from (cloneable: it crosses to the worker thread). */
export interface RelayWorkerData {
  env: Record<string, string | undefined>;
  ownerId: string;
  maxSessions: number;
  /** This worker's place among the process's `count` (its siblings, functions/ports/relay.ts). */
  index: number;
  count: number;
}

/**
 * Starts the workers (each running `workerScript`, the module that calls `serveRelayWorker` with
 * `startRelayWorker`: ./main.ts, the image's bundle), then the health endpoint and the gauge.
 */
export async function startRelayService(env: Record<string, string | undefined>, logger: Logger, options: { workerScript: URL }): Promise<RelayService> {
  const config = parseConfig(env);
  const relayEnv = parseRelayEnv(env);
  const ownerId = await resolveOwnerId(env);
  const count = relayEnv.RELAY_WORKERS;
  const workers = new RelayWorkers<RelayWorkerData>({
    count,
    script: options.workerScript,
    // One owner id per worker, kept across a restart (a new heartbeat epoch ends the old one's claims).
    data: (index) => ({ env, ownerId: count === 1 ? ownerId : `${ownerId}-w${index}`, maxSessions: Math.ceil(relayEnv.RELAY_MAX_SESSIONS / count), index, count }),
    logger,
  });
  await workers.start();
  let draining = false;
  const health = createHealthServer(() => ({ ok: !draining, heldSessions: workers.heldSessions() }));
  await new Promise<void>((resolve, reject) => {
    health.once("error", reject);
    health.listen(relayEnv.RELAY_HEALTH_PORT, () => resolve());
  });
  const metric = relayEnv.RELAY_PUBLISH_METRICS === "false" ? null : publishHeldStreams(() => workers.heldSessions(), logger, { namespace: config.POWERTOOLS_METRICS_NAMESPACE });
  logger.info("relay started", { ownerId, workers: count, healthPort: (health.address() as AddressInfo).port });
  return {
    workers,
    healthPort: (health.address() as AddressInfo).port,
    shutdown: async () => {
      draining = true;
      metric?.stop();
      let counters: Record<string, number> = {};
      try {
        counters = await workers.drain();
      } catch (err) {
        logger.error("relay drain failed", { error: errorForLog(err) });
      }
      await new Promise<void>((resolve) => health.close(() => resolve()));
      return counters;
    },
  };
}

/** In a worker thread: the AWS runtime composed from the environment and one relay started with it. */
export async function startRelayWorker(data: RelayWorkerData, logger: Logger): Promise<ServedRelay & { relay: StreamingRelay }> {
  const { env, ownerId } = data;
  const config = parseConfig(env);
  const relayEnv = parseRelayEnv(env);
  // The shared composition (functions/composition): one DynamoDB client, the same stores and ports as the Lambdas.
  const rt = composeAwsRuntime(config, env, {
    logger,
    // The relay never provisions, reads secret values or opens connections.
    provider: (type) => Promise.reject(new Error(`the relay builds no sandbox providers (asked for ${type})`)),
    secretKeys: { wrap: () => Promise.reject(new Error("the relay reads no secret values")), unwrap: () => Promise.reject(new Error("the relay reads no secret values")) },
    afterConnect: () => Promise.reject(new Error("the relay opens no connections")),
  });
  // Slack (issue 17): the relay posts Slack sessions' answers and status to their threads.
  // The token is read on the first Slack post; a session's type is read once per relay (one GetItem).
  if (env.SLACK_SECRET_ARN) {
    const botToken = async () => (await slackSecrets(env)).botToken;
    const progress = composeSlackProgress({ doc: rt.doc, tableName: config.TABLE_NAME, sessions: rt.stores.sessions, botToken, apiUrl: config.SLACK_API_URL, logger, now: () => new Date() });
    rt.relayDeps.push = observedPush(rt.relayDeps.push, progress);
  }
  // Automations (issue 18): a run ends from its prompt's turn, which completes here.
  if (env.AUTOMATIONS_SCHEDULE_GROUP) {
    const automations = composeAwsAutomations(rt, env);
    rt.relayDeps.turnSettled = (sessionId) => turnSettled(automations.runDeps(rt.httpDeps), sessionId);
  }
  const queueUrl = nudgeQueueUrl(env);
  if (!queueUrl) logger.warn("no RELAY_NUDGE_QUEUE_URL: this relay learns of sessions from its scan only");
  const siblings = data.count > 1 ? siblingsChannel(data.index, data.count) : null;
  const relay = new StreamingRelay(
    // Nudges arrive on the nudge queue (adapters/aws/sqs-relay-nudge.ts), long-polled: no table reads.
    { ...rt.relayDeps, ...(queueUrl ? { nudges: new SqsNudgeSource(sqsClient, queueUrl) } : {}), ...(siblings ? { siblings } : {}) },
    {
      ownerId,
      leaseTtlSeconds: relayEnv.RELAY_LEASE_TTL_SECONDS,
      scanIntervalMs: relayEnv.RELAY_SCAN_INTERVAL_SECONDS * 1000,
      nudgePollMs: relayEnv.RELAY_NUDGE_POLL_MS,
      heartbeatTimeoutMs: relayEnv.RELAY_HEARTBEAT_TIMEOUT_SECONDS * 1000,
      maxSessions: data.maxSessions,
    },
  );
  relay.start();
  logger.info("relay worker started", { ownerId, maxSessions: data.maxSessions });
  return {
    relay,
    heldSessions: () => relay.heldSessions().length,
    drain: async () => {
      try {
        await relay.drain();
      } catch (err) {
        logger.error("relay drain failed", { ownerId, error: errorForLog(err) });
      }
      siblings?.close();
      rt.doc.destroy();
      return { ...relay.counters };
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
