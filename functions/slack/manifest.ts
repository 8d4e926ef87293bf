/**
 * The Slack app manifest for a deployment (issue 17 "Install"): the slash command, the Events API
 * subscriptions (mentions, and messages in channels the bot is in, for thread replies),
 * interactivity (the status line's buttons) and the bot scopes the worker's calls need.
 * `npm run slack:manifest -- --url <HttpApiUrl output>` prints it (README "Slack").
 */
export const SLACK_BOT_SCOPES = [
  "commands", // the slash command
  "app_mentions:read", // app_mention events
  "chat:write", // chat.postMessage, chat.update, chat.postEphemeral
  "channels:history", // message events in public channels (thread replies) and conversations.history/replies (outbox recovery)
  "groups:history", // the same in private channels
] as const;

export const SLACK_BOT_EVENTS = ["app_mention", "message.channels", "message.groups"] as const;

export function slackManifest(input: { baseUrl: string; name?: string; command?: string }): Record<string, unknown> {
  const base = input.baseUrl.replace(/\/+$/, "");
  const name = input.name ?? "Coding agent";
  return {
    display_information: { name, description: "Starts coding-agent sessions; one thread per session" },
    features: {
      bot_user: { display_name: name, always_online: true },
      slash_commands: [
        {
          command: input.command ?? "/agent",
          url: `${base}/slack/commands`,
          description: "Start a coding-agent session",
          usage_hint: "[<owner>/<repo> | <git url>] <prompt>  ·  repo <owner>/<repo>  ·  help",
          should_escape: false,
        },
      ],
    },
    oauth_config: { scopes: { bot: [...SLACK_BOT_SCOPES] } },
    settings: {
      event_subscriptions: { request_url: `${base}/slack/events`, bot_events: [...SLACK_BOT_EVENTS] },
      interactivity: { is_enabled: true, request_url: `${base}/slack/interactions` },
      org_deploy_enabled: false,
      socket_mode_enabled: false,
      token_rotation_enabled: false,
    },
  };
}
