/**
 * Slack's AWS adapters: the signing secret and bot token from one Secrets Manager secret
 * (SLACK_SECRET_ARN, a JSON object `{"SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN"}` the operator
 * fills in, read once per container; env values locally or when no ARN is set), and the SQS queue
 * between the ack function and the worker (SLACK_QUEUE_URL). Values never reach logs or errors.
 * Light on purpose: the ack function's bundle is this, the store and the ack handler.
 */
import type { SlackDelivery, SlackQueue } from "../ports/slack";

export interface SlackSecrets {
  signingSecret: string;
  botToken: string | undefined;
}

let cached: Promise<SlackSecrets> | undefined;

export function slackSecrets(env: Readonly<Record<string, string | undefined>>): Promise<SlackSecrets> {
  cached ??= loadSecrets(env).catch((err: unknown) => {
    cached = undefined;
    throw err;
  });
  return cached;
}

async function loadSecrets(env: Readonly<Record<string, string | undefined>>): Promise<SlackSecrets> {
  const arn = env.SLACK_SECRET_ARN;
  if (!arn) return { signingSecret: env.SLACK_SIGNING_SECRET ?? "", botToken: env.SLACK_BOT_TOKEN };
  const { SecretsManagerClient, GetSecretValueCommand } = await import("@aws-sdk/client-secrets-manager");
  const out = await new SecretsManagerClient({}).send(new GetSecretValueCommand({ SecretId: arn }));
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(out.SecretString ?? "") as Record<string, unknown>;
  } catch {
    throw new Error("invalid configuration: the SLACK_SECRET_ARN secret is not a JSON object");
  }
  const signingSecret = parsed.SLACK_SIGNING_SECRET;
  const botToken = parsed.SLACK_BOT_TOKEN;
  if (typeof signingSecret !== "string" || signingSecret === "") throw new Error("invalid configuration: the SLACK_SECRET_ARN secret has no SLACK_SIGNING_SECRET");
  return { signingSecret, botToken: typeof botToken === "string" && botToken !== "" ? botToken : undefined };
}

/** Tests only. */
export function resetSlackSecrets(): void {
  cached = undefined;
}

/** The ack function's queue: one SQS message per delivery (the worker's event source). */
export class SqsSlackQueue implements SlackQueue {
  private client: Promise<{ send: (command: unknown) => Promise<unknown>; command: (input: { QueueUrl: string; MessageBody: string }) => unknown }> | undefined;

  constructor(private readonly queueUrl: string) {}

  private sqs() {
    this.client ??= import("@aws-sdk/client-sqs").then(({ SQSClient, SendMessageCommand }) => {
      const client = new SQSClient({});
      return { send: (command: unknown) => client.send(command as InstanceType<typeof SendMessageCommand>), command: (input: { QueueUrl: string; MessageBody: string }) => new SendMessageCommand(input) };
    });
    return this.client;
  }

  async enqueue(delivery: SlackDelivery): Promise<void> {
    const sqs = await this.sqs();
    await sqs.send(sqs.command({ QueueUrl: this.queueUrl, MessageBody: JSON.stringify(delivery) }));
  }
}
