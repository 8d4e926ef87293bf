/**
 * The relay nudge queue (issue 15, functions/adapters/aws/sqs-relay-nudge.ts): one standard SQS
 * queue that the flows' Commit and Finish steps and the prompt-delivering routes send to, and
 * every relay task long-polls. A nudge only matters for seconds (the relays' backstop scan
 * covers a lost one), so messages live 5 minutes and there is no dead-letter queue: a message
 * nobody could handle expires instead of being redriven.
 */
import { Duration, Validations } from "aws-cdk-lib";
import type { IGrantable } from "aws-cdk-lib/aws-iam";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import { RELAY_NUDGE_QUEUE_URL_ENV } from "../functions/adapters/aws/sqs-relay-nudge";

export { RELAY_NUDGE_QUEUE_URL_ENV };

export function createRelayNudgeQueue(scope: Construct): Queue {
  const queue = new Queue(scope, "RelayNudges", {
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.minutes(5),
    // A relay that received a nudge and died before handling it: another relay gets it 30 s later.
    visibilityTimeout: Duration.seconds(30),
    // The relays long-poll (WaitTimeSeconds on each receive); this is the default for any other receiver.
    receiveMessageWaitTime: Duration.seconds(20),
  });
  Validations.of(queue).acknowledge({
    id: "AwsSolutions::AwsSolutions-SQS3",
    reason: "Relay nudges are hints worth seconds: the relays' backstop scan covers a lost one, so a message nobody handled expires (5 minutes) instead of going to a dead-letter queue.",
  });
  return queue;
}

/** A function (or task role) that nudges the relays: the queue URL in its environment, SendMessage only. */
export function grantNudging(queue: Queue, grantee: IGrantable, addEnvironment: (name: string, value: string) => void): void {
  queue.grantSendMessages(grantee);
  addEnvironment(RELAY_NUDGE_QUEUE_URL_ENV, queue.queueUrl);
}

/** The relay: receives, deletes and returns (ChangeMessageVisibility) nudges, and sends its handover when it drains (SendMessageBatch needs sqs:SendMessage). */
export function grantReceivingNudges(queue: Queue, grantee: IGrantable, addEnvironment: (name: string, value: string) => void): void {
  queue.grant(grantee, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:SendMessage");
  addEnvironment(RELAY_NUDGE_QUEUE_URL_ENV, queue.queueUrl);
}
