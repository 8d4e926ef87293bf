/**
 * Fargate entry of the streaming relay (ECS service; ARCHITECTURE.md §1), and the module each of
 * its worker threads runs (./workers.ts: the image has one bundle, relay.mjs, for both).
 *
 * Main thread: starts the relay service (./service.ts: `RELAY_WORKERS` relays in worker threads,
 * the health endpoint, the HeldStreams gauge) and, on SIGTERM or SIGINT (ECS stop, scale-in,
 * deploy), drains every worker so other relays take their sessions over at once, then exits 0. A
 * failed start exits 1 with the reason in the log.
 *
 * Worker thread: starts one relay from the data the service gave it and serves the service.
 */
import { processEnvironment } from "../config/config";
import { createLogger, errorForLog } from "../observability/logger";
import { startRelayService, startRelayWorker, type RelayWorkerData } from "./service";
import { serveRelayWorker } from "./workers";

const env = processEnvironment();
const serviceName = env.POWERTOOLS_SERVICE_NAME ?? "streaming-relay";

async function main(): Promise<void> {
  const logger = createLogger(serviceName);
  try {
    const service = await startRelayService(env, logger, { workerScript: new URL(import.meta.url) });
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info("relay draining", { signal, heldSessions: service.workers.heldSessions() });
      void service.shutdown().then((counters) => {
        logger.info("relay drained", { counters });
        process.exit(0);
      });
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  } catch (err) {
    logger.error("relay failed to start", { error: errorForLog(err) });
    process.exit(1);
  }
}

const inWorker = serveRelayWorker<RelayWorkerData>((data) => {
  const logger = createLogger(serviceName);
  logger.appendPersistentKeys({ ownerId: data.ownerId });
  return startRelayWorker(data, logger);
});
if (!inWorker) void main();
