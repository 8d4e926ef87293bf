/**
 * The relay nudge over SQS (issue 15, functions/adapters/aws/sqs-relay-nudge.ts), at the SDK
 * surface: the exact calls the flows' side and the relay's side make, against a stand-in queue
 * with SQS's documented semantics (test/support/sqs-stand-in.ts).
 */
import { describe, expect, it } from "vitest";
import { SqsNudgeSource, SqsRelayNudge } from "../../functions/adapters/aws/sqs-relay-nudge";
import { SqsStandIn } from "../support/sqs-stand-in";

describe("relay nudges over SQS", () => {
  it("a nudge is one SendMessage naming the session", async () => {
    const q = new SqsStandIn();
    await new SqsRelayNudge(() => q.client, q.queueUrl).nudge("ses_1");
    expect(q.calls).toEqual([{ command: "SendMessage", input: { QueueUrl: q.queueUrl, MessageBody: JSON.stringify({ sessionId: "ses_1" }) } }]);
  });

  it("the relay long-polls (20 s, 10 at a time); done deletes, leave makes the message visible again with a higher receive count", async () => {
    const q = new SqsStandIn();
    const nudge = new SqsRelayNudge(() => q.client, q.queueUrl);
    await nudge.nudge("ses_1");
    await nudge.nudge("ses_2");
    const source = new SqsNudgeSource(() => q.client, q.queueUrl);
    const first = await source.receive();
    expect(q.calls.at(-1)).toEqual({
      command: "ReceiveMessage",
      input: { QueueUrl: q.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 20, MessageSystemAttributeNames: ["ApproximateReceiveCount"] },
    });
    expect(first.map((n) => [n.sessionId, n.receiveCount])).toEqual([
      ["ses_1", 1],
      ["ses_2", 1],
    ]);
    const [one, two] = first;
    await one?.done();
    await two?.leave();
    expect(q.calls.slice(-2).map((c) => [c.command, c.input.VisibilityTimeout])).toEqual([
      ["DeleteMessage", undefined],
      ["ChangeMessageVisibility", 0],
    ]);
    const again = await source.receive();
    expect(again.map((n) => [n.sessionId, n.receiveCount])).toEqual([["ses_2", 2]]);
    await again[0]?.done();
    expect(q.depth).toBe(0);
  });

  it("a drain's handover is one SendMessageBatch per 10 sessions, each nudge naming the retired heartbeat; the relay receives it so", async () => {
    const q = new SqsStandIn();
    const ids = Array.from({ length: 12 }, (_, i) => `ses_${i}`);
    await new SqsRelayNudge(() => q.client, q.queueUrl).handover({ owner: "relay-a", epoch: 7 }, ids);
    expect(q.calls.map((c) => [c.command, (c.input.Entries as unknown[]).length])).toEqual([
      ["SendMessageBatch", 10],
      ["SendMessageBatch", 2],
    ]);
    expect((q.calls[1]?.input.Entries as unknown[])[1]).toEqual({ Id: "1", MessageBody: JSON.stringify({ sessionId: "ses_11", retired: { owner: "relay-a", epoch: 7 } }) });
    const source = new SqsNudgeSource(() => q.client, q.queueUrl, 0);
    const first = await source.receive();
    expect(first.map((n) => [n.sessionId, n.retired])).toEqual(ids.slice(0, 10).map((id) => [id, { owner: "relay-a", epoch: 7 }]));
  });

  it("entries a batch reports failed are sent once more; still failing, the handover throws naming how many", async () => {
    const q = new SqsStandIn();
    const batches: string[][] = [];
    let failures = 3;
    const client = {
      send: (command: { input: { Entries: { Id: string; MessageBody: string }[] } }) => {
        batches.push(command.input.Entries.map((e) => (JSON.parse(e.MessageBody) as { sessionId: string }).sessionId));
        const failed = command.input.Entries.filter((e) => e.Id === "0" && failures-- > 0).map((e) => ({ Id: e.Id, Code: "InternalError", SenderFault: false }));
        return Promise.resolve({ Successful: [], Failed: failed });
      },
    };
    const nudge = new SqsRelayNudge(() => client as never, q.queueUrl);
    await expect(nudge.handover({ owner: "relay-a", epoch: 1 }, ["ses_a", "ses_b"])).rejects.toThrow("1 of 2 nudges not sent");
    expect(batches).toEqual([["ses_a", "ses_b"], ["ses_a"]]);
    failures = 1;
    await nudge.handover({ owner: "relay-a", epoch: 1 }, ["ses_c"]);
    expect(batches.slice(2)).toEqual([["ses_c"], ["ses_c"]]);
  });

  it("a message that is not a nudge is deleted, never handed to the relay", async () => {
    const q = new SqsStandIn();
    await q.client.send({ constructor: { name: "SendMessageCommand" }, input: { QueueUrl: q.queueUrl, MessageBody: "not json" } } as never);
    const source = new SqsNudgeSource(() => q.client, q.queueUrl, 0);
    expect(await source.receive()).toEqual([]);
    expect(q.count("DeleteMessage")).toBe(1);
    expect(q.depth).toBe(0);
  });

  it("a shutdown ends a long poll in flight at once", async () => {
    const q = new SqsStandIn();
    const source = new SqsNudgeSource(() => q.client, q.queueUrl);
    const stop = new AbortController();
    const polling = source.receive(stop.signal);
    stop.abort();
    await expect(polling).rejects.toMatchObject({ name: "AbortError" });
  });
});
