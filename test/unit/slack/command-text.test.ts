import { describe, expect, it } from "vitest";
import { parseSlackCommand, repoUrlOf } from "../../../functions/slack/command-text";
import { splitForSlack } from "../../../functions/slack/outbox";
import { stripMentions } from "../../../functions/slack/worker";

describe("the slash command's text (API.md Slack)", () => {
  it.each([
    ["", { type: "help" }],
    ["  HELP ", { type: "help" }],
    ["acme/app fix the flaky test", { type: "start", repo: "https://github.com/acme/app.git", prompt: "fix the flaky test" }],
    ["<https://github.com/acme/app.git> run it", { type: "start", repo: "https://github.com/acme/app.git", prompt: "run it" }],
    ["<https://github.com/acme/app|acme/app> run it", { type: "start", repo: "https://github.com/acme/app", prompt: "run it" }],
    ["git@github.com:acme/app.git multi\nline", { type: "start", repo: "git@github.com:acme/app.git", prompt: "multi\nline" }],
    ["why is the build red?", { type: "start", repo: null, prompt: "why is the build red?" }],
    ["repo acme/app", { type: "set-repo", repo: "https://github.com/acme/app.git" }],
    ["repo https://gitlab.com/acme/app.git", { type: "set-repo", repo: "https://gitlab.com/acme/app.git" }],
  ])("%j", (text, expected) => {
    expect(parseSlackCommand(text)).toEqual(expected);
  });

  it.each([
    ["repo", "`repo` needs a repository"],
    ["repo a b", "takes one repository"],
    ["repo not-a-repo", "unknown or unparseable repository"],
    ["acme/app", "no prompt"],
    ["https://user:pw@github.com/acme/app.git go", "credentials"],
    ["ftp://example.com/x go", "unknown or unparseable repository"],
  ])("%j is refused, naming the problem", (text, message) => {
    const parsed = parseSlackCommand(text);
    expect(parsed.type).toBe("invalid");
    expect(parsed.type === "invalid" && parsed.message).toContain(message);
  });

  it("owner/repo is GitHub's; mentions are stripped", () => {
    expect(repoUrlOf("acme/app.git")).toBe("https://github.com/acme/app.git");
    expect(repoUrlOf("hello")).toBeNull();
    expect(stripMentions("<@U123ABC> do it <@U9|bob>")).toBe("do it");
  });

  it("long answers are split under Slack's 3,000-character limit, at line breaks where possible, losing nothing", () => {
    const text = Array.from({ length: 200 }, (_, i) => `line ${i} ${"x".repeat(40)}`).join("\n");
    const parts = splitForSlack(text);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.every((p) => p.length <= 3000)).toBe(true);
    expect(parts.join("\n")).toBe(text);
    expect(splitForSlack("short")).toEqual(["short"]);
    expect(splitForSlack("y".repeat(6500)).map((p) => p.length)).toEqual([3000, 3000, 500]);
  });
});

describe("the Slack app manifest", () => {
  it("points the command, events and interactivity at the deployment's routes, with the bot scopes the worker needs", async () => {
    const { slackManifest } = await import("../../../functions/slack/manifest");
    const m = slackManifest({ baseUrl: "https://abc.execute-api.eu-west-1.amazonaws.com/" }) as {
      features: { slash_commands: { url: string; command: string }[] };
      settings: { event_subscriptions: { request_url: string; bot_events: string[] }; interactivity: { request_url: string } };
      oauth_config: { scopes: { bot: string[] } };
    };
    expect(m.features.slash_commands[0]).toMatchObject({ command: "/agent", url: "https://abc.execute-api.eu-west-1.amazonaws.com/slack/commands" });
    expect(m.settings.event_subscriptions.request_url).toBe("https://abc.execute-api.eu-west-1.amazonaws.com/slack/events");
    expect(m.settings.interactivity.request_url).toBe("https://abc.execute-api.eu-west-1.amazonaws.com/slack/interactions");
    expect(m.settings.event_subscriptions.bot_events).toEqual(["app_mention", "message.channels", "message.groups"]);
    expect(m.oauth_config.scopes.bot).toEqual(expect.arrayContaining(["commands", "chat:write", "app_mentions:read", "channels:history"]));
  });
});
