/**
 * Prints the Slack app manifest (JSON) for a deployment: paste it into "Create New App -> From an
 * app manifest" at api.slack.com/apps (README "Slack").
 *
 *   npm run slack:manifest -- --url <HttpApiUrl output> [--name "Coding agent"] [--command /agent]
 */
import { parseArgs } from "node:util";
import { slackManifest } from "../functions/slack/manifest";

const { values } = parseArgs({ options: { url: { type: "string" }, name: { type: "string" }, command: { type: "string" } } });
if (!values.url || !/^https:\/\//.test(values.url)) {
  console.error("usage: npm run slack:manifest -- --url https://<api id>.execute-api.<region>.amazonaws.com/ [--name <app name>] [--command /agent]");
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(slackManifest({ baseUrl: values.url, ...(values.name ? { name: values.name } : {}), ...(values.command ? { command: values.command } : {}) }), null, 2)}\n`);
