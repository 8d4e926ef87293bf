/**
 * The local embedded runtime (ARCHITECTURE.md §6): dynalite (in memory, or on disk under
 * DATA_DIR), the table created from the same definition as the CDK stack, a development API
 * token, and the HTTP API serving the same Lambda handlers. Tests start it the same way.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
import dynalite from "dynalite";
import { parseConfig, processEnvironment, type Config } from "../../functions/config/config";
import { composeRuntime, type Runtime } from "../../functions/composition/compose";
import { staticKeyring } from "../../functions/config/sandbox-keyring";
import { newApiToken } from "../../functions/domain/ids";
import type { Principal } from "../../functions/domain/principal";
import type { HttpDeps } from "../../functions/http/http-handler";
import type { NewTokenPrincipal } from "../../functions/ports/session-store";
import { createLogger } from "../../functions/observability/logger";
import { createMetrics } from "../../functions/observability/metrics";
import { createDocumentClient, ensureTable } from "../../functions/store/dynamo-client";
import { revokeApiToken, type RevocationReport } from "../../functions/api-tokens/revoke-api-token";
import { LocalSecretKeyWrapper, SECRETS_MASTER_KEY_BYTES, parseSecretsMasterKey } from "../../functions/secrets/local-key-wrapper";
import { startLocalHttpServer, type LocalExtraRoute } from "./local-http-server";
import { makeOpsSummaryHandler, OPS_SUMMARY_ROUTE } from "../../functions/http/handlers/ops-summary";
import type { OpsSources } from "../../functions/observability/ops-summary";
import { consoleRoutes } from "./console-routes";
import { localApiDocRoutes } from "./local-api-docs";
import { OpenCodeAgentClient } from "../../functions/agent/opencode-agent-client";
import type { FlowDeps } from "../../functions/flows/flow-deps";
import type { AgentClient } from "../../functions/ports/agent-client";
import type { SandboxProvider } from "../../functions/ports/sandbox-provider";
import type { ProviderType } from "../../functions/domain/session";
import { createSandboxProvider } from "../../functions/providers/provider-factory";
import { listSandboxRecords } from "../../functions/providers/local/sandbox-registry";
import { makeScheduleFiredHandler } from "../../functions/schedules/schedule-fired";
import { RecordingMetricsSink } from "../../functions/ports/metrics-sink";
import { errorForLog } from "../../functions/observability/logger";
import { LocalClientPush } from "./local-client-push";
import { LocalFlowRunner } from "./local-flow-runner";
import { LocalBuildRunner } from "./local-build-runner";
import { rebuildStalePrebuilds } from "../../functions/builds/build-start";
import { LocalLifecycleScheduler } from "./local-lifecycle-scheduler";
import { attachLocalWsServer, type LocalWsServer } from "./local-ws-server";
import type { WsDeps } from "../../functions/ws/ws-deps";
import { StreamingRelay } from "../../functions/relay/relay";
import { sweep, type SweepReport } from "../../functions/sweeper/orphan-sweeper";
import { meterRunningSessions, type MeteringReport } from "../../functions/usage/metering-pass";
import { localSlack, type LocalSlack } from "./local-slack";
import { isSlackStatusFrame, slackForwardingPush } from "../../functions/slack/status-forward";
import { composeAutomations, type AutomationComposition } from "../../functions/composition/automations";
import { AUTOMATION_ROUTES, makeAutomationHandlers } from "../../functions/automations/automation-routes";
import { handleAutomationFired, sessionFailed, turnSettled } from "../../functions/automations/automation-runs";
import { SlackOutbox } from "../../functions/slack/outbox";
import { LocalAutomationScheduler } from "./local-automation-scheduler";

export const LOCAL_TABLE_NAME = "sandbox-control-plane";
/** API.md "Roles": the local development token is an admin. */
export const DEV_PRINCIPAL: Principal = { userId: "dev-user", orgId: "dev-org", role: "admin" };

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
  /** Replaces the provider factory (tests wrap the local provider in a fault-injecting one). */
  provider?: (type: ProviderType, defaults: (type: ProviderType) => Promise<SandboxProvider>) => Promise<SandboxProvider>;
  agent?: AgentClient;
  /** The relay's owner id (default "local"). */
  relayOwnerId?: string;
  /** Scales the ASL Retry intervals (tests); real intervals when unset. */
  retryIntervalScale?: number;
}

export interface LocalRuntime {
  url: string;
  wsUrl: string;
  wsDeps: WsDeps;
  devApiToken: string;
  config: Config;
  deps: HttpDeps;
  flowDeps: FlowDeps;
  /** Idle-snapshot, sweeper and flow figures published so far. */
  metrics: RecordingMetricsSink;
  flows: LocalFlowRunner;
  /** The snapshot builder's executions (statemachines/builds/). */
  builds: LocalBuildRunner;
  /** The scheduled prebuild rebuild now (it also runs every PREBUILD_REBUILD_INTERVAL_SECONDS when that is not 0). */
  rebuildPrebuilds(): ReturnType<typeof rebuildStalePrebuilds>;
  scheduler: LocalLifecycleScheduler;
  push: LocalClientPush;
  /** The WebSocket API on `/ws` (tests wait on `settled()` for its handlers). */
  websocket: LocalWsServer;
  /** The in-process streaming relay (replaced by `restartRelay`). */
  relay(): StreamingRelay;
  /**
   * Replaces the relay: `drain` hands its sessions over at once; `crash` dies holding its leases
   * (a successor takes over when they expire, RELAY_LEASE_TTL_SECONDS).
   */
  restartRelay(mode: "drain" | "crash"): Promise<StreamingRelay>;
  /** Where the local provider keeps sandboxes and snapshots. */
  sandboxDir: string;
  /** Slack: its store, worker, queue (`settled()`) and progress tap. */
  slack: LocalSlack;
  /** Automations (API.md "Automations"): their store, timers and notifier. */
  automations: AutomationComposition & { timers: LocalAutomationScheduler };
  /** Runs the orphan sweeper now (it also runs every SWEEPER_INTERVAL_SECONDS); joins a sweep in progress. */
  sweep(): Promise<SweepReport>;
  /** Runs the metering pass now (it also runs every METERING_INTERVAL_SECONDS); joins a pass in progress. */
  meter(): Promise<MeteringReport>;
  /** Adds another API token (tests use one per org); the role defaults to `member`; no expiry unless given. */
  addApiToken(principal: NewTokenPrincipal, token?: string, options?: { expiresAt?: Date }): Promise<string>;
  /**
   * `npm run token:revoke` in process (issue 14 item 5): revokes the token (its id, a prefix of
   * the id, or the token) and closes the WebSocket connections it opened through the local push.
   */
  revokeApiToken(ref: string): Promise<RevocationReport>;
  close(): Promise<void>;
}

/**
 * The local master sandbox key: kept in DATA_DIR (mode 0600) so sandboxes that outlive a
 * restart still accept the keys derived from it; a fresh random key per run otherwise.
 */
function localMasterKey(dataDir: string | undefined): string {
  if (!dataDir) return randomBytes(32).toString("base64url");
  const file = path.join(ensureDir(dataDir), "sandbox-access.key");
  try {
    return readFileSync(file, "utf8").trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const key = randomBytes(32).toString("base64url");
  writeFileSync(file, key, { mode: 0o600, flag: "wx" });
  return key;
}

/**
 * The local secrets master key (the stand-in for the KMS key that wraps each secret's data key):
 * SECRETS_MASTER_KEY when set; else kept in DATA_DIR (mode 0600), so secrets stored before a
 * restart still decrypt; a fresh random key per run otherwise (in-memory secrets die with it).
 */
function localSecretsMasterKey(env: Record<string, string | undefined> | undefined, dataDir: string | undefined): Buffer {
  const configured = env?.SECRETS_MASTER_KEY;
  if (configured) return parseSecretsMasterKey(configured);
  if (!dataDir) return randomBytes(SECRETS_MASTER_KEY_BYTES);
  const file = path.join(ensureDir(dataDir), "secrets.key");
  try {
    return parseSecretsMasterKey(readFileSync(file, "utf8"), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const key = randomBytes(SECRETS_MASTER_KEY_BYTES);
  writeFileSync(file, key.toString("base64"), { mode: 0o600, flag: "wx" });
  return key;
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
  // One document client for the whole runtime (every store shares it).
  const doc = createDocumentClient({ endpoint });
  await ensureTable(doc, LOCAL_TABLE_NAME);

  // The HTTP server listens first (PORT=0 picks a port): the configuration names its own URLs
  // (WS_URL, CONTROL_PLANE_URL), so it is parsed once they are known, then the runtime composed.
  const built: { rt?: Runtime; relay?: StreamingRelay } = {};
  const runtime = (): Runtime => {
    if (!built.rt) throw new Error("local runtime: dependencies not built yet");
    return built.rt;
  };
  const host = options.host ?? "127.0.0.1";
  const slackRef: { current?: LocalSlack } = {};
  // GET /v1/ops/summary (issue 19): the key figures from this process's metrics, served beside the route table.
  const opsRef: { current?: () => Omit<OpsSources, "now"> } = {};
  const opsRoute = (): LocalExtraRoute => ({
    route: OPS_SUMMARY_ROUTE,
    handler: makeOpsSummaryHandler(() => {
      if (!opsRef.current) throw new Error("local runtime: metrics not ready yet");
      return opsRef.current();
    })(runtime().httpDeps),
  });
  const automationRoutes: { current: LocalExtraRoute[] } = { current: [] };
  const consoleFiles = consoleRoutes();
  const http = await startLocalHttpServer(() => runtime().httpDeps, options.port ?? 0, host, () => [...consoleFiles, ...(slackRef.current?.routes ?? []), ...automationRoutes.current, opsRoute(), ...localApiDocRoutes(runtime().httpDeps)]);
  const url = `http://${host}:${http.port}`;
  // The WebSocket API shares the HTTP port.
  const wsUrl = `ws://${host}:${http.port}/ws`;
  let config: Config;
  try {
    config = parseConfig({
      ...options.env,
      TABLE_NAME: LOCAL_TABLE_NAME,
      DYNAMODB_ENDPOINT: endpoint,
      WS_URL: wsUrl,
      // Local sandboxes call back on loopback for their credentials (git tokens, env values).
      CONTROL_PLANE_URL: options.env?.CONTROL_PLANE_URL ?? `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${http.port}`,
    });
  } catch (err) {
    await http.close();
    doc.destroy();
    await new Promise<void>((resolve) => dynamo.close(() => resolve()));
    throw err;
  }

  const now = options.now ?? (() => new Date());
  const devApiToken = options.devApiToken ?? newApiToken();
  const logger = createLogger("sandbox-control-plane-local");
  // Sandboxes live under DATA_DIR (and outlive a restart) or in a temp dir removed on close.
  const sandboxDir = options.dataDir ? ensureDir(path.join(options.dataDir, "sandboxes")) : mkdtempSync(path.join(tmpdir(), "scp-sandboxes-"));
  const providerEnv = options.env ?? processEnvironment();
  const providers = new Map<ProviderType, Promise<SandboxProvider>>();
  const defaultProvider = (type: ProviderType) =>
    createSandboxProvider(type, { localDataDir: sandboxDir, sandboxTimeoutSeconds: config.SANDBOX_TIMEOUT_SECONDS, env: providerEnv });
  const provider = (type: ProviderType): Promise<SandboxProvider> => {
    let p = providers.get(type);
    if (!p) {
      p = options.provider ? options.provider(type, defaultProvider) : defaultProvider(type);
      p.catch(() => providers.delete(type));
      providers.set(type, p);
    }
    return p;
  };
  const push = new LocalClientPush();
  const masterKey = options.env?.SANDBOX_ACCESS_KEY ?? localMasterKey(options.dataDir);
  // Locally the figures stay in memory (the bench reads them); in AWS they are CloudWatch EMF.
  const metrics = new RecordingMetricsSink();
  const startedAt = now();
  // The runner and the scheduler call back into steps whose dependencies include them.
  const flows = new LocalFlowRunner({
    deps: () => runtime().flowDeps,
    logger,
    ...(options.retryIntervalScale !== undefined ? { retryIntervalScale: options.retryIntervalScale } : {}),
  });
  const builds = new LocalBuildRunner({
    deps: () => runtime().flowDeps,
    logger,
    ...(options.retryIntervalScale !== undefined ? { retryIntervalScale: options.retryIntervalScale } : {}),
  });
  const scheduler = new LocalLifecycleScheduler(
    async (event) => {
      if (built.rt) await makeScheduleFiredHandler(built.rt.flowDeps)(event);
    },
    { now, onError: (err, event) => logger.error("schedule target failed", { event, error: errorForLog(err) }) },
  );
  const secretKeys = new LocalSecretKeyWrapper(localSecretsMasterKey(options.env, options.dataDir));
  const rt = composeRuntime(config, {
    doc,
    logger,
    metrics: createMetrics({ namespace: config.POWERTOOLS_METRICS_NAMESPACE, serviceName: config.POWERTOOLS_SERVICE_NAME }),
    flowMetrics: metrics,
    push,
    scheduler,
    flows,
    builds,
    provider,
    agent: options.agent ?? new OpenCodeAgentClient(),
    sandboxKeys: (epochs) => staticKeyring(masterKey, epochs),
    secretKeys,
    // The local server sends init itself once the upgrade completes.
    afterConnect: () => Promise.resolve(),
    // The relay runs in this process: a nudge is a direct call, awaited until the claim is written
    // and the stream's first catch-up ran (at most 10 s).
    relayNudge: { nudge: (sessionId) => built.relay?.look(sessionId, { untilLiveMs: 10_000 }) ?? Promise.resolve() },
    // A drained relay hands its sessions to the current one (its successor: `restartRelay` starts it first).
    relayHandover: {
      handover: async (from, sessionIds) => {
        const successor = built.relay;
        if (!successor || successor.ownerId === from.owner) return;
        await Promise.all(sessionIds.map((sessionId) => successor.look(sessionId, { retired: from })));
      },
    },
    now,
  });
  built.rt = rt;
  // Slack (API.md "Slack"): the ack handlers on /slack/*, the worker in process, progress from broadcasts.
  const slack = localSlack({ config, doc, http: rt.httpDeps, sessions: rt.stores.sessions, logger, now });
  slackRef.current = slack;
  // Without a bot token nothing can be posted: no tap (and no session reads for it).
  // Statuses go through the queue to the worker, as the flow Lambdas' do in AWS (slack/status-forward.ts).
  if (config.SLACK_BOT_TOKEN) {
    const forward = slackForwardingPush(push, slack.queue, { logger, now });
    push.observe = (sessionId, message) => (isSlackStatusFrame(message) ? forward.observe?.(sessionId, message) : slack.progress.observe(sessionId, message));
  }
  // Automations (API.md "Automations"): the same automation-fired handler as in AWS, on timers;
  // runs end from their prompt's turn (the relay's `turnSettled`) or their session's error (`record-failure`).
  const automationTimers = new LocalAutomationScheduler((event) => handleAutomationFired(automations.runDeps(rt.httpDeps), event).then(() => undefined), {
    now,
    onError: (err, event) => logger.error("automation firing failed", { event, error: errorForLog(err) }),
  });
  const slackOutbox = config.SLACK_BOT_TOKEN ? new SlackOutbox(slack.web, slack.store, now) : null;
  const automations = composeAutomations({
    doc,
    tableName: config.TABLE_NAME,
    scheduler: automationTimers,
    sessions: rt.stores.sessions,
    prompts: rt.stores.prompts,
    transcript: rt.stores.transcript,
    metrics,
    logger,
    now,
    slack: () => Promise.resolve(slackOutbox),
    secretKeys,
  });
  // With DATA_DIR, automations predate this process and their timers did not survive it: armed
  // again from the table (a firing due while it was down is not replayed).
  if (options.dataDir) {
    for (const automation of await automations.store.scanEnabled()) await automationTimers.put(automation);
  }
  const automationHandlers = makeAutomationHandlers(automations);
  automationRoutes.current = AUTOMATION_ROUTES.map((route) => ({ route, handler: automationHandlers[route.id](rt.httpDeps) }));
  rt.relayDeps.turnSettled = (sessionId) => turnSettled(automations.runDeps(rt.httpDeps), sessionId);
  rt.flowDeps.automationRuns = { sessionFailed: (sessionId, message) => sessionFailed(automations.runDeps(rt.httpDeps), sessionId, message) };
  const { tokens } = rt.stores;
  await tokens.putToken(devApiToken, { ...DEV_PRINCIPAL, name: "development token" }, now());
  const flowDeps = rt.flowDeps;
  const deps = rt.httpDeps;
  const wsDeps = rt.wsDeps;
  const ws: LocalWsServer = attachLocalWsServer(http.server, wsDeps, push);
  // The streaming relay runs in process (ARCHITECTURE.md §6); a stable owner id reclaims its own
  // leases at once after a DATA_DIR restart.
  const relayOptions = {
    ownerId: options.relayOwnerId ?? "local",
    leaseTtlSeconds: config.RELAY_LEASE_TTL_SECONDS,
    scanIntervalMs: Math.round(config.RELAY_SCAN_INTERVAL_SECONDS * 1000),
  };
  const relayDeps = rt.relayDeps;
  let relay = new StreamingRelay(relayDeps, relayOptions);
  built.relay = relay;
  relay.start();
  opsRef.current = () => ({ recorded: metrics.recorded, heldStreams: relay.heldSessions().length, since: startedAt });

  // The sweeper schedule (a rate schedule in AWS): one sweep at a time.
  const sweeping: { current: Promise<SweepReport> | null } = { current: null };
  const runSweep = (): Promise<SweepReport> =>
    (sweeping.current ??= sweep(flowDeps).finally(() => {
      sweeping.current = null;
    }));
  const sweeperTimer = setInterval(() => {
    runSweep().catch((err: unknown) => logger.error("sweep failed", { error: errorForLog(err) }));
  }, Math.round(config.SWEEPER_INTERVAL_SECONDS * 1000));
  sweeperTimer.unref();
  // With DATA_DIR, sessions may predate this process, and the schedules armed for them (timers)
  // did not survive the restart: sweep once right away rather than after a whole interval.
  // After the relay's first scan, so a session it is about to claim again is not taken for an orphan.
  if (options.dataDir) {
    void relay
      .scanNow()
      .then(() => runSweep())
      .catch((err: unknown) => logger.error("startup sweep failed", { error: errorForLog(err) }));
  }

  // The metering schedule (a rate schedule in AWS, functions/usage/metering-fired.ts): one pass at a time.
  const metering: { current: Promise<MeteringReport> | null } = { current: null };
  const runMetering = (): Promise<MeteringReport> =>
    (metering.current ??= meterRunningSessions(flowDeps).finally(() => {
      metering.current = null;
    }));
  const meteringTimer = setInterval(() => {
    runMetering().catch((err: unknown) => logger.error("metering pass failed", { error: errorForLog(err) }));
  }, Math.round(config.METERING_INTERVAL_SECONDS * 1000));
  meteringTimer.unref();

  // The scheduled prebuild rebuild (an EventBridge Scheduler rate schedule in AWS).
  const rebuildPrebuilds = () => rebuildStalePrebuilds({ catalog: rt.stores.catalog, builds, config, now, logger });
  const rebuildTimer =
    config.PREBUILD_REBUILD_INTERVAL_SECONDS > 0
      ? setInterval(() => {
          rebuildPrebuilds().catch((err: unknown) => logger.error("scheduled rebuild failed", { error: errorForLog(err) }));
        }, Math.round(Math.min(config.PREBUILD_REBUILD_INTERVAL_SECONDS, 3600) * 1000))
      : null;
  rebuildTimer?.unref();

  return {
    url,
    wsUrl,
    devApiToken,
    config,
    deps,
    flowDeps,
    metrics,
    wsDeps,
    flows,
    builds,
    rebuildPrebuilds,
    scheduler,
    push,
    websocket: ws,
    sandboxDir,
    slack,
    automations: { ...automations, timers: automationTimers },
    sweep: runSweep,
    meter: runMetering,
    addApiToken: async (principal, token = newApiToken(), tokenOptions = {}) => {
      await tokens.putToken(token, principal, now(), tokenOptions);
      return token;
    },
    revokeApiToken: (ref) => revokeApiToken({ tokens, push }, ref, now()),
    relay: () => relay,
    restartRelay: async (mode) => {
      const before = relay;
      if (mode === "crash") await before.kill();
      relay = new StreamingRelay(relayDeps, { ...relayOptions, ownerId: `${relayOptions.ownerId}-${Date.now().toString(36)}` });
      built.relay = relay;
      relay.start();
      // A drain hands its sessions over to the successor already running (relayHandover above).
      if (mode === "drain") await before.drain();
      return relay;
    },
    close: async () => {
      clearInterval(sweeperTimer);
      clearInterval(meteringTimer);
      if (rebuildTimer) clearInterval(rebuildTimer);
      await sweeping.current?.catch(() => undefined);
      await metering.current?.catch(() => undefined);
      await ws.close();
      await relay.drain();
      await slack.close();
      await automationTimers.close();
      await http.close();
      await scheduler.close();
      await flows.whenIdle();
      await builds.whenIdle();
      if (!options.dataDir) {
        // In-memory mode: nothing can refer to these sandboxes after exit, so none may outlive it.
        const local = providers.has("local") ? await provider("local") : null;
        if (local) {
          for (const record of await listSandboxRecords(sandboxDir)) {
            await local.terminate(record.sessionId, record.sandboxId).catch(() => undefined);
          }
        }
        rmSync(sandboxDir, { recursive: true, force: true });
      }
      doc.destroy();
      await new Promise<void>((resolve) => dynamo.close(() => resolve()));
    },
  };
}

function ensureDir(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}
