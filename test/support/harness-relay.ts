/**
 * A `StreamingRelay` over a flow harness's stores, with a lease store of its own (as a separate
 * relay process would have), reading the flows' nudges; its scans, heartbeats and nudges are
 * driven by the test (relay flow tests: relay-at-scale, relay-siblings).
 */
import type { RelayLeaseStore, RelaySiblings } from "../../functions/ports/relay";
import type { TranscriptStore } from "../../functions/ports/transcript";
import { StreamingRelay, type RelayOptions } from "../../functions/relay/relay";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import type { FakeOpenCode } from "./fake-opencode";
import type { FlowHarness } from "./flow-harness";

export function harnessRelay(
  h: FlowHarness,
  parts: { agent: FakeOpenCode; transcript: TranscriptStore; relayLeases?: RelayLeaseStore; siblings?: RelaySiblings },
  options: Pick<RelayOptions, "ownerId" | "leaseTtlSeconds"> & Partial<RelayOptions>,
): StreamingRelay {
  return new StreamingRelay(
    {
      sessions: h.deps.sessions,
      prompts: h.deps.prompts,
      flows: h.deps.flows,
      agent: parts.agent,
      sandboxKeys: h.deps.sandboxKeys,
      agentMessages: parts.agent,
      connections: h.deps.connections,
      push: h.push,
      transcript: parts.transcript,
      relayLeases: parts.relayLeases ?? new DynamoRelayLeaseStore(h.table.doc, h.table.tableName),
      nudges: h.nudgeSource(),
      scheduler: h.deps.scheduler,
      config: h.config,
      logger: h.deps.logger,
      now: h.deps.now,
      metrics: h.metrics,
      ...(parts.siblings ? { siblings: parts.siblings } : {}),
    },
    { connectionCacheMs: 0, scanIntervalMs: 3_600_000, renewIntervalMs: 3_600_000, ...options },
  );
}
