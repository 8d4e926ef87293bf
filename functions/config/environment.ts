/**
 * The process's environment, alone: the one place besides config.ts that reads `process.env`.
 * Split out so a function that parses no configuration (the Slack ack function, whose bundle is
 * kept tiny for Slack's 3 s deadline) need not bundle zod with config.ts's schema.
 */
export function processEnvironment(): Readonly<Record<string, string | undefined>> {
  return process.env;
}
