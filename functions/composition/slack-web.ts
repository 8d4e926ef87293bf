/** Slack's Web API client (`@slack/web-api`), its base URL configurable (SLACK_API_URL). */
import { WebClient, LogLevel } from "@slack/web-api";
import type { Logger } from "@aws-lambda-powertools/logger";

export interface SlackWebOptions {
  botToken: string | undefined;
  apiUrl: string;
  logger: Logger;
  /** Retries of failed calls (a 429 is waited out by its Retry-After either way). */
  retries?: number;
}

export function slackWebClient(options: SlackWebOptions): WebClient {
  const url = options.apiUrl.endsWith("/") ? options.apiUrl : `${options.apiUrl}/`;
  const log = options.logger;
  return new WebClient(options.botToken, {
    slackApiUrl: url,
    retryConfig: { retries: options.retries ?? 5, factor: 2, minTimeout: 200, maxTimeout: 10_000 },
    // Its logger never sees the token; ours gets warnings and errors only.
    logLevel: LogLevel.WARN,
    logger: {
      debug: () => undefined,
      info: () => undefined,
      warn: (...msgs: unknown[]) => log.warn("slack web api", { detail: msgs.map(String).join(" ") }),
      error: (...msgs: unknown[]) => log.error("slack web api", { detail: msgs.map(String).join(" ") }),
      setLevel: () => undefined,
      getLevel: () => LogLevel.WARN,
      setName: () => undefined,
    },
  });
}

