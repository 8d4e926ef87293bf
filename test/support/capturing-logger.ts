/** A Powertools logger whose output is captured as JSON lines, with the production replacer (redaction). */
import { Logger } from "@aws-lambda-powertools/logger";
import { redactingReplacer } from "../../functions/observability/logger";

export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = { log: (s: string) => lines.push(s), info: (s: string) => lines.push(s), error: (s: string) => lines.push(s), warn: (s: string) => lines.push(s), debug: (s: string) => lines.push(s), trace: (s: string) => lines.push(s) };
  const logger = new Logger({ serviceName: "test", logLevel: "DEBUG", jsonReplacerFn: redactingReplacer });
  (logger as unknown as { console: typeof sink }).console = sink;
  return { logger, lines };
}
