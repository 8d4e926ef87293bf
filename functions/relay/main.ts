/**
 * Fargate entry of the streaming relay (ECS service; ARCHITECTURE.md §1): starts the relay
 * service (./service.ts) and, on SIGTERM or SIGINT (ECS stop, scale-in, deploy), drains it so
 * another task takes its sessions over at once, then exits 0. A failed start exits 1 with the
 * reason in the log.
 */
import { processEnvironment } from "../config/config";
import { createLogger, errorForLog } from "../observability/logger";
import { startRelayService } from "./service";

const env = processEnvironment();
const logger = createLogger(env.POWERTOOLS_SERVICE_NAME ?? "streaming-relay");

async function main(): Promise<void> {
  const service = await startRelayService(env, logger);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("relay draining", { signal, heldSessions: service.relay.heldSessions().length });
    void service.shutdown().then(() => {
      logger.info("relay drained", { counters: { ...service.relay.counters } });
      process.exit(0);
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  logger.error("relay failed to start", { error: errorForLog(err) });
  process.exit(1);
});
