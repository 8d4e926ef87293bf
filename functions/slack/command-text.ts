/**
 * The slash command's and a mention's text (API.md "Slack"):
 * `[<owner>/<repo> | <git url>] <prompt>`, `repo <owner>/<repo> | <git url>`, `help` (or empty).
 * Slack wraps links as `<https://...>` or `<https://...|label>`; those are unwrapped first.
 */
import { repoUrlProblem } from "../http/request-fields";

export type SlackCommand =
  | { type: "help" }
  | { type: "set-repo"; repo: string }
  | { type: "start"; repo: string | null; prompt: string }
  | { type: "invalid"; message: string };

const OWNER_REPO = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/;
const GIT_URL = /^(https?:\/\/|ssh:\/\/|git@|file:\/\/)\S+$/;

/** `<https://x|label>` -> `https://x`; `<@U123>` mentions stay for the caller to strip. */
export function unwrapSlackLinks(text: string): string {
  return text.replace(/<((?:https?|ssh|file):\/\/[^>|]+)(?:\|[^>]*)?>/g, "$1");
}

/** A repository token as a clone URL: `owner/repo` is GitHub's; a git URL as given; else null. */
export function repoUrlOf(token: string): string | null {
  if (OWNER_REPO.test(token)) return `https://github.com/${token.replace(/\.git$/, "")}.git`;
  if (GIT_URL.test(token)) return token;
  return null;
}

export function parseSlackCommand(raw: string): SlackCommand {
  const text = unwrapSlackLinks(raw).trim();
  if (text === "" || /^help$/i.test(text)) return { type: "help" };
  const [first = "", ...rest] = text.split(/\s+/);
  if (/^repo$/i.test(first)) {
    const spec = rest.join(" ").trim();
    if (!spec) return { type: "invalid", message: "`repo` needs a repository: `repo <owner>/<repo>` or `repo <git url>`" };
    if (rest.length > 1) return { type: "invalid", message: `\`repo\` takes one repository, not "${spec}"` };
    const url = repoUrlOf(spec);
    if (!url || repoUrlProblem(url)) return { type: "invalid", message: `unknown or unparseable repository "${spec}": use <owner>/<repo> or a git URL` };
    return { type: "set-repo", repo: url };
  }
  const url = repoUrlOf(first);
  if (url) {
    if (repoUrlProblem(url)) return { type: "invalid", message: `unknown or unparseable repository "${first}": ${repoUrlProblem(url)}` };
    const prompt = text.slice(text.indexOf(first) + first.length).trim();
    if (!prompt) return { type: "invalid", message: `no prompt: say what to do on ${first}` };
    return { type: "start", repo: url, prompt };
  }
  // Something URL-like we cannot clone is refused rather than taken as the prompt's first word.
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(first)) return { type: "invalid", message: `unknown or unparseable repository "${first}": use <owner>/<repo> or a git URL` };
  return { type: "start", repo: null, prompt: text };
}
