/**
 * A stand-in for one standard SQS queue at the SDK surface: an object with the `send` of an
 * `SQSClient` that answers SendMessage, SendMessageBatch (1-10 entries, distinct ids), ReceiveMessage, DeleteMessage and ChangeMessageVisibility
 * as SQS documents them: a received message is invisible for the queue's visibility timeout (or
 * until ChangeMessageVisibility), then delivered again with `ApproximateReceiveCount` one higher;
 * DeleteMessage needs the receipt handle of the latest receive; ReceiveMessage returns at most
 * `MaxNumberOfMessages` (1-10) and, with `WaitTimeSeconds` > 0, waits for a first message up to
 * that long (or until its abort signal fires). Every call is recorded in `calls`.
 */
import { randomUUID } from "node:crypto";
import type { SQSClient } from "@aws-sdk/client-sqs";

interface Message {
  id: string;
  body: string;
  receiveCount: number;
  visibleAt: number;
  handle: string | null;
}

interface Command {
  constructor: { name: string };
  input: Record<string, unknown>;
}

export class SqsStandIn {
  readonly calls: { command: string; input: Record<string, unknown> }[] = [];
  private messages: Message[] = [];
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly queueUrl = "https://sqs.us-east-1.amazonaws.com/123456789012/relay-nudges",
    private readonly visibilityTimeoutSeconds = 30,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** The client the adapters get (`() => standIn.client`). */
  get client(): SQSClient {
    return { send: (command: Command, options?: { abortSignal?: AbortSignal }) => this.send(command, options) } as unknown as SQSClient;
  }

  /** Messages in the queue (visible or in flight). */
  get depth(): number {
    return this.messages.length;
  }

  count(command: string): number {
    return this.calls.filter((c) => c.command === command).length;
  }

  private async send(command: Command, options?: { abortSignal?: AbortSignal }): Promise<unknown> {
    const name = command.constructor.name.replace(/Command$/, "");
    const input = command.input;
    this.calls.push({ command: name, input });
    if (input.QueueUrl !== this.queueUrl) throw Object.assign(new Error("The specified queue does not exist."), { name: "QueueDoesNotExist" });
    switch (name) {
      case "SendMessage": {
        const id = randomUUID();
        this.messages.push({ id, body: String(input.MessageBody), receiveCount: 0, visibleAt: 0, handle: null });
        for (const wake of this.waiters) wake();
        return { MessageId: id };
      }
      case "SendMessageBatch": {
        const entries = (input.Entries ?? []) as { Id: string; MessageBody: string }[];
        if (entries.length < 1 || entries.length > 10) throw Object.assign(new Error("A batch holds 1 to 10 entries"), { name: "TooManyEntriesInBatchRequest" });
        if (new Set(entries.map((e) => e.Id)).size !== entries.length) throw Object.assign(new Error("Two entries share an Id"), { name: "BatchEntryIdsNotDistinct" });
        const successful = entries.map((e) => {
          const id = randomUUID();
          this.messages.push({ id, body: String(e.MessageBody), receiveCount: 0, visibleAt: 0, handle: null });
          return { Id: e.Id, MessageId: id };
        });
        for (const wake of this.waiters) wake();
        return { Successful: successful, Failed: [] };
      }
      case "ReceiveMessage": {
        const max = Number(input.MaxNumberOfMessages ?? 1);
        if (!Number.isInteger(max) || max < 1 || max > 10) throw Object.assign(new Error("MaxNumberOfMessages must be 1 to 10"), { name: "InvalidParameterValue" });
        const wait = Number(input.WaitTimeSeconds ?? 0);
        if (options?.abortSignal?.aborted) throw Object.assign(new Error("Request aborted"), { name: "AbortError" });
        let batch = this.take(max);
        if (batch.length === 0 && wait > 0) {
          await new Promise<void>((resolve, reject) => {
            const done = () => {
              clearTimeout(timer);
              this.waiters.delete(done);
              options?.abortSignal?.removeEventListener("abort", aborted);
              resolve();
            };
            const aborted = () => {
              done();
              reject(Object.assign(new Error("Request aborted"), { name: "AbortError" }));
            };
            const timer = setTimeout(done, wait * 1000);
            this.waiters.add(done);
            options?.abortSignal?.addEventListener("abort", aborted);
          });
          batch = this.take(max);
        }
        return { Messages: batch.length ? batch : undefined };
      }
      case "DeleteMessage": {
        const i = this.messages.findIndex((m) => m.handle === input.ReceiptHandle);
        if (i >= 0) this.messages.splice(i, 1);
        return {};
      }
      case "ChangeMessageVisibility": {
        const m = this.messages.find((x) => x.handle === input.ReceiptHandle);
        if (!m) throw Object.assign(new Error("The receipt handle has expired."), { name: "ReceiptHandleIsInvalid" });
        m.visibleAt = this.now() + Number(input.VisibilityTimeout) * 1000;
        if (Number(input.VisibilityTimeout) === 0) for (const wake of this.waiters) wake();
        return {};
      }
      default:
        throw new Error(`SQS stand-in: no ${name}`);
    }
  }

  private take(max: number): { MessageId: string; Body: string; ReceiptHandle: string; Attributes: Record<string, string> }[] {
    const at = this.now();
    const out = [];
    for (const m of this.messages) {
      if (out.length >= max) break;
      if (m.visibleAt > at) continue;
      m.receiveCount += 1;
      m.handle = randomUUID();
      m.visibleAt = at + this.visibilityTimeoutSeconds * 1000;
      out.push({ MessageId: m.id, Body: m.body, ReceiptHandle: m.handle, Attributes: { ApproximateReceiveCount: String(m.receiveCount) } });
    }
    return out;
  }
}
