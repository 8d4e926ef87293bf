/** The slash command's usage text (API.md "Slack": `help` or an empty command). */
export const SLACK_USAGE = [
  "*Usage*",
  "• `/agent [<owner>/<repo> | <git url>] <prompt>`: start a session on that repository (or the channel's default) with the prompt; it gets its own thread, and replies in the thread are prompts to it.",
  "• `/agent repo <owner>/<repo> | <git url>`: set this channel's default repository.",
  "• `/agent help`: this message.",
].join("\n");
