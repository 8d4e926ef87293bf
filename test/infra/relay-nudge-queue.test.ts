/**
 * The relay nudge queue (issue 15, infra/relay-nudge-queue.ts): one SQS queue the functions that
 * commit flows or deliver prompts send to, and the relay tasks receive from; each side only the
 * actions it uses, and the queue's URL in exactly their environments.
 */
import { afterAll, describe, expect, it } from "vitest";
import { rmSync } from "node:fs";
import { actionsOf, getAtt, resourcesFor, stackQueries, synthWithoutBundling } from "./stack-queries";

const synth = synthWithoutBundling();
const { resources, stack } = synth;
const q = stackQueries(synth);
afterAll(() => rmSync(synth.dir, { recursive: true, force: true }));

const queues = Object.entries(resources).filter(([, r]) => r.Type === "AWS::SQS::Queue");
const [queueId] = queues[0] ?? [""];
const SQS_ACTIONS = (statements: ReturnType<typeof q.statementsOfRole>) => actionsOf(statements).filter((a) => a.startsWith("sqs:"));

describe("relay nudge queue", () => {
  it("is one encrypted queue whose messages live 5 minutes, reachable over TLS only", () => {
    expect(queues).toHaveLength(1);
    expect(queues[0]?.[1].Properties).toMatchObject({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 300, ReceiveMessageWaitTimeSeconds: 20 });
    const policy = Object.values(resources).find((r) => r.Type === "AWS::SQS::QueuePolicy");
    expect(JSON.stringify(policy?.Properties)).toContain('"aws:SecureTransport":"false"');
  });

  it("the Commit and Finish steps, Provision (it commits ensure-runtime's running in process), the prompt-delivering routes and send-init (a client joined mid-turn, issue 25) may send to it, and have its URL", () => {
    for (const fnId of ["CommitStep", "FinishStep", "ProvisionStep", "CreatePrompt", "WsMessage", "SendInit"]) {
      const statements = q.statementsOfFunction(fnId);
      // The nudge queue, and for the steps that broadcast statuses the Slack queue (a nested stack's output).
      const sendsTo = resourcesFor(statements, "sqs:SendMessage");
      expect(sendsTo, fnId).toContainEqual(getAtt(queueId));
      for (const r of sendsTo) expect(JSON.stringify(r) === JSON.stringify(getAtt(queueId)) || JSON.stringify(r).includes("Outputs."), `${fnId}: ${JSON.stringify(r)}`).toBe(true);
      expect(SQS_ACTIONS(statements).filter((a) => a !== "sqs:SendMessage" && a !== "sqs:GetQueueAttributes" && a !== "sqs:GetQueueUrl"), fnId).toEqual([]);
      expect(q.envOf(fnId).RELAY_NUDGE_QUEUE_URL, fnId).toEqual({ Ref: queueId });
    }
    // A step that never finishes a flow neither sends nor knows the queue.
    expect(SQS_ACTIONS(q.statementsOfFunction("SnapshotStep"))).toEqual([]);
    expect(q.envOf("SnapshotStep").RELAY_NUDGE_QUEUE_URL).toBeUndefined();
  });

  it("the relay tasks receive, delete and return nudges, send only to that queue (a drain's handover), and have its URL", () => {
    const statements = q.statementsOfRole(q.logicalIdOf(stack.relay.taskRole));
    for (const action of ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:SendMessage"]) expect(resourcesFor(statements, action), action).toEqual([getAtt(queueId)]);
    const task = resources[q.logicalIdOf(stack.relay.taskDefinition)];
    const env = (task?.Properties.ContainerDefinitions as { Environment: { Name: string; Value: unknown }[] }[])[0]?.Environment ?? [];
    expect(env.find((e) => e.Name === "RELAY_NUDGE_QUEUE_URL")?.Value).toEqual({ Ref: queueId });
  });
});
