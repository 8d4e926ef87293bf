/**
 * Slack's HTTP routes (API.md "Slack"), one table for the local runtime and the CDK nested stack
 * (infra/slack-stack.ts): the three signed Slack routes served by the ack function, and the
 * workspace binding served by one route-group function. None of them is in the root stack's
 * route table (functions/http/routes.ts): CloudFormation's 500-resource limit.
 */
export const SLACK_ACK_ROUTES = [
  { id: "SlackCommands", method: "POST", path: "/slack/commands", route: "commands" },
  { id: "SlackEvents", method: "POST", path: "/slack/events", route: "events" },
  { id: "SlackInteractions", method: "POST", path: "/slack/interactions", route: "interactions" },
] as const;

export const SLACK_WORKSPACE_ROUTES = [
  { id: "PutSlackWorkspace", method: "PUT", path: "/v1/slack/workspace" },
  { id: "GetSlackWorkspace", method: "GET", path: "/v1/slack/workspace" },
  { id: "DeleteSlackWorkspace", method: "DELETE", path: "/v1/slack/workspace" },
] as const;
