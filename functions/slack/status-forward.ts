/**
 * Statuses for Slack from the processes that do not post to Slack themselves (issue 17: "failures
 * and pauses posted with what to do next"). The flows' step Lambdas broadcast `status` frames
 * (paused, stopped, error, ...) and a flow's `error` frame; a push wrapped here also sends each of
 * those, as a small `status` delivery, to the Slack queue (SQS in AWS, `SLACK_QUEUE_URL`; the
 * in-process queue locally). The broadcast awaits the send, so a step that returns (and a Lambda
 * that then freezes) has handed it over. The Slack worker looks the session up and posts only for
 * Slack sessions (SlackProgress.deliver); the delivery's key makes a redelivery post nothing twice.
 * A failed send is logged and never fails the step.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";
import type { ClientPush } from "../ports/client-push";
import type { SlackDelivery, SlackQueue } from "../ports/slack";

type Frame = { type: string } & Record<string, unknown>;

/** The frames the Slack status line cares about: session statuses and a flow's failure. */
export function isSlackStatusFrame(message: Frame): boolean {
  return message.type === "status" || message.type === "error";
}

/** A forwarded status as the worker gets it (`kind: "status"`, body `{sessionId, message}`). */
export function slackStatusDelivery(sessionId: string, message: Frame, now: Date, id: string = randomUUID()): SlackDelivery {
  return { kind: "status", key: `status:${sessionId}:${id}`, body: JSON.stringify({ sessionId, message }), receivedAt: now.toISOString() };
}

/** `push` whose broadcasts of status frames also go to the Slack queue (ClientPush `observe`, awaited). */
export function slackForwardingPush(push: ClientPush, queue: SlackQueue, deps: { logger: Logger; now: () => Date }): ClientPush {
  return {
    send: (connectionId, message) => push.send(connectionId, message),
    disconnect: (connectionId) => push.disconnect(connectionId),
    observe: async (sessionId, message) => {
      if (!isSlackStatusFrame(message)) return;
      try {
        await queue.enqueue(slackStatusDelivery(sessionId, message, deps.now()));
      } catch (err) {
        deps.logger.warn("slack status not forwarded", { sessionId, type: message.type, error: errorForLog(err) });
      }
    },
  };
}
