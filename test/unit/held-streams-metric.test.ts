import { CloudWatchClient, PutMetricDataCommand } from "@aws-sdk/client-cloudwatch";
import { mockClient } from "aws-sdk-client-mock";
import { afterEach, describe, expect, it } from "vitest";
import { publishHeldStreams } from "../../functions/relay/held-streams-metric";
import { createLogger } from "../../functions/observability/logger";

const cw = mockClient(CloudWatchClient);
afterEach(() => cw.reset());

describe("HeldStreams metric", () => {
  it("publishes the held count (also 0) in the namespace and dimension the scaling policy reads", async () => {
    cw.on(PutMetricDataCommand).resolves({});
    let held = 0;
    const publisher = publishHeldStreams(() => held, createLogger("t"), { client: new CloudWatchClient({ region: "us-east-1" }), intervalMs: 3_600_000 });
    held = 7;
    await publisher.publishNow();
    publisher.stop();
    const inputs = cw.commandCalls(PutMetricDataCommand).map((c) => c.args[0].input);
    expect(inputs.map((i) => i.MetricData?.[0]?.Value)).toEqual([0, 7]);
    expect(inputs[1]).toEqual({
      Namespace: "SandboxControlPlane",
      MetricData: [{ MetricName: "HeldStreams", Dimensions: [{ Name: "service", Value: "sandbox-relay" }], Value: 7, Unit: "Count" }],
    });
  });

  it("publishes into the stack's namespace when given one (a second stack's relay may publish only there)", async () => {
    cw.on(PutMetricDataCommand).resolves({});
    const publisher = publishHeldStreams(() => 2, createLogger("t"), { client: new CloudWatchClient({ region: "us-east-1" }), intervalMs: 3_600_000, namespace: "SandboxControlPlane/staging" });
    await publisher.publishNow();
    publisher.stop();
    expect(cw.commandCalls(PutMetricDataCommand).map((c) => c.args[0].input.Namespace)).toEqual(["SandboxControlPlane/staging", "SandboxControlPlane/staging"]);
  });

  it("a failed publish is not fatal", async () => {
    cw.on(PutMetricDataCommand).rejects(new Error("throttled"));
    const publisher = publishHeldStreams(() => 1, createLogger("t"), { client: new CloudWatchClient({ region: "us-east-1" }), intervalMs: 3_600_000 });
    await expect(publisher.publishNow()).resolves.toBeUndefined();
    publisher.stop();
  });
});
