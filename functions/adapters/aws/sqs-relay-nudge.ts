/**
 * The relay nudge in AWS (ports/relay.ts `RelayNudge`, issue 15): one standard SQS queue that
 * the flows and the prompt path send to, and every relay task long-polls
 * (`WaitTimeSeconds` 20: an idle relay makes 3 requests a minute, and a nudge arrives within
 * one round trip). A message names the session (`{"sessionId"}`).
 *
 * Why one shared queue, not one per relay: ECS tasks come and go, and a queue per task would
 * need the tasks to create and delete queues (and the flows to find them). Whoever receives a
 * nudge acts on it as the local in-process nudge does (`StreamingRelay.look`): the relay holding
 * the session revalidates it, and any relay claims a running session nobody live holds. A relay
 * that receives a nudge for a session another live relay holds leaves it in the queue for that
 * one (`ChangeMessageVisibility` 0) until it was received as often as there are live relays,
 * then deletes it: the holder's own stream check before any reconnect and the backstop scan
 * cover a nudge that never reached it.
 *
 * The SDK loads on first use (./sdk-client.ts). Locally the nudge is an in-process call
 * (infra/local/runtime.ts) behind the same port.
 */
import type { SQSClient, SQSClientConfig } from "@aws-sdk/client-sqs";
import * as z from "zod";
import type { NudgeSource, ReceivedNudge, RelayHandover, RelayNudge, RetiredRelay } from "../../ports/relay";
import { onFirstUse, type ClientFactory } from "./sdk-client";

const sdk = () => import("@aws-sdk/client-sqs");

/** An SQS client, its SDK loaded by this call. */
export async function sqsClient(config: SQSClientConfig = {}): Promise<SQSClient> {
  return new (await sdk()).SQSClient(config);
}

/** The queue's URL, in the environment of every function that nudges and of the relay. */
export const RELAY_NUDGE_QUEUE_URL_ENV = "RELAY_NUDGE_QUEUE_URL";

const NudgeBody = z.object({
  sessionId: z.string().min(1),
  /** A draining relay's handover names its retired heartbeat. */
  retired: z.object({ owner: z.string().min(1), epoch: z.number().int() }).optional(),
});

/** SendMessageBatch's limit. */
const BATCH = 10;

export class SqsRelayNudge implements RelayNudge, RelayHandover {
  private readonly client: () => Promise<SQSClient>;

  constructor(
    factory: ClientFactory<SQSClient>,
    private readonly queueUrl: string,
  ) {
    this.client = onFirstUse(factory);
  }

  async nudge(sessionId: string): Promise<void> {
    const { SendMessageCommand } = await sdk();
    await (await this.client()).send(new SendMessageCommand({ QueueUrl: this.queueUrl, MessageBody: JSON.stringify({ sessionId }) }));
  }

  /**
   * One nudge per session naming the retired heartbeat, 10 a SendMessageBatch (a drain of 10,000
   * sessions: 1,000 requests). Entries a batch reports failed are sent once more; any still failing
   * make this throw naming how many (the peers' heartbeat rounds pick those sessions up).
   */
  async handover(from: RetiredRelay, sessionIds: readonly string[]): Promise<void> {
    const { SendMessageBatchCommand } = await sdk();
    const client = await this.client();
    const send = async (ids: readonly string[]): Promise<string[]> => {
      const entries = ids.map((sessionId, i) => ({ Id: String(i), MessageBody: JSON.stringify({ sessionId, retired: { owner: from.owner, epoch: from.epoch } }) }));
      const out = await client.send(new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: entries }));
      return (out.Failed ?? []).flatMap((f) => {
        const id = ids[Number(f.Id)];
        return id === undefined ? [] : [id];
      });
    };
    let unsent = 0;
    for (let i = 0; i < sessionIds.length; i += BATCH) {
      const failed = await send(sessionIds.slice(i, i + BATCH));
      if (failed.length > 0) unsent += (await send(failed)).length;
    }
    if (unsent > 0) throw new Error(`relay handover: ${unsent} of ${sessionIds.length} nudges not sent`);
  }
}

/** The relay's side: long-polls the queue; each message handled is deleted, one left for another relay is made visible again. */
export class SqsNudgeSource implements NudgeSource {
  private readonly client: () => Promise<SQSClient>;

  constructor(
    factory: ClientFactory<SQSClient>,
    private readonly queueUrl: string,
    /** 20 in AWS (the long-poll maximum); tests pass 0. */
    private readonly waitTimeSeconds = 20,
  ) {
    this.client = onFirstUse(factory);
  }

  async receive(signal?: AbortSignal): Promise<ReceivedNudge[]> {
    const { ReceiveMessageCommand, DeleteMessageCommand, ChangeMessageVisibilityCommand } = await sdk();
    const client = await this.client();
    const out = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: this.queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: this.waitTimeSeconds,
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
      signal ? { abortSignal: signal } : {},
    );
    const received: ReceivedNudge[] = [];
    for (const message of out.Messages ?? []) {
      const handle = message.ReceiptHandle;
      if (!handle) continue;
      const done = async () => {
        await client.send(new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: handle }));
      };
      let body: unknown = null;
      try {
        body = JSON.parse(message.Body ?? "");
      } catch {
        body = null;
      }
      const parsed = NudgeBody.safeParse(body);
      if (!parsed.success) {
        // Not a nudge (nothing else sends here): drop it rather than receive it forever.
        await done();
        continue;
      }
      received.push({
        sessionId: parsed.data.sessionId,
        ...(parsed.data.retired ? { retired: parsed.data.retired } : {}),
        receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? "1") || 1,
        done,
        leave: async () => {
          await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: handle, VisibilityTimeout: 0 }));
        },
      });
    }
    return received;
  }
}
