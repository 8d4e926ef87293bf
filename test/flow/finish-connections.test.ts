/**
 * Issue 15: a flow that pushed a progress status (ensure-runtime's `creating`/`resuming`) lists
 * the session's connections once, in Begin; Finish pushes the final status to that list instead
 * of listing again while no client connected meanwhile (the commit's `clientConnects`, counted by
 * `$connect` after it registers the connection, is the one Begin's lease take returned). A client
 * that connects while the flow runs still gets the final status. Real ASL and step functions, the
 * real `$connect` handler over dynalite, the fault-injecting provider holding the flow.
 */
import { afterEach, describe, expect, it } from "vitest";
import { makeConnectHandler } from "../../functions/ws/handlers/connect";
import { DynamoApiTokenStore } from "../../functions/store/dynamo-session-store";
import { FaultInjectingProvider } from "../support/fault-injecting-provider";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";

const TOKEN = "sbx_finish_connections_token_0123456";

let provider: FaultInjectingProvider;
let h: FlowHarness;

async function setup(): Promise<void> {
  provider = new FaultInjectingProvider(new InstantSandboxProvider());
  h = await startFlowHarness({ provider, agent: new ScriptedAgent() });
  await new DynamoApiTokenStore(h.table.doc, h.table.tableName).putToken(TOKEN, { userId: "user-a", orgId: "org-a" }, new Date());
}

afterEach(async () => {
  await h.close();
});

/** Counts the connection listings the flows make. */
function countListings(): { count: number } {
  const counter = { count: 0 };
  const list = h.deps.connections.list.bind(h.deps.connections);
  h.deps.connections.list = (sessionId) => {
    counter.count += 1;
    return list(sessionId);
  };
  return counter;
}

let connections = 0;
/** The real `$connect` handler, then what send-init does once the socket is up (ready for pushes). */
async function connect(sessionId: string): Promise<string> {
  const connectionId = `late-${++connections}`;
  const res = await makeConnectHandler(h.wsDeps)({ requestContext: { connectionId, routeKey: "$connect" }, queryStringParameters: { sessionId, token: TOKEN } });
  expect(res.statusCode).toBe(200);
  expect(await h.deps.connections.markReady(sessionId, connectionId, new Date(Date.now() + 600_000))).toBe(true);
  return connectionId;
}

describe("Finish's status push after a progress push", () => {
  it("reuses Begin's listing when nobody connected meanwhile: one listing per flow, every client told `running`", async () => {
    await setup();
    const s = await h.createSession({ clientType: "web" });
    const first = await h.addClient(s.id);
    const second = await h.addClient(s.id);
    const listings = countListings();
    const after = await h.run("ensure-runtime", s.id);
    expect(after.status).toBe("running");
    expect(listings.count).toBe(1);
    expect(h.push.statuses(first)).toEqual(["creating", "running"]);
    expect(h.push.statuses(second)).toEqual(["creating", "running"]);
  });

  it("a client that connects while the flow provisions gets the final `running` (Finish lists again)", async () => {
    await setup();
    const s = await h.createSession({ clientType: "web" });
    const early = await h.addClient(s.id);
    const hold = provider.hold("ensureSandbox", "before");
    const { executionName } = await h.start("ensure-runtime", s.id);
    await hold.reached;
    const listings = countListings();
    const late = await connect(s.id);
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    await h.runner.whenIdle();
    expect((await h.session(s.id)).status).toBe("running");
    expect(listings.count).toBe(1);
    expect(h.push.statuses(early).at(-1)).toBe("running");
    expect(h.push.statuses(late).at(-1)).toBe("running");
  });

  it("a connection not yet sent its init when Begin listed it makes Finish list again (it may be ready by then)", async () => {
    await setup();
    const s = await h.createSession({ clientType: "web" });
    const pending = "not-ready-yet";
    await h.deps.connections.add({ connectionId: pending, sessionId: s.id, userId: "user-a", clientType: "web", connectedAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 600_000).toISOString() });
    const hold = provider.hold("ensureSandbox", "before");
    const { executionName } = await h.start("ensure-runtime", s.id);
    await hold.reached;
    // send-init marks it ready while the flow provisions (no `$connect` write: the count stays).
    expect(await h.deps.connections.markReady(s.id, pending, new Date(Date.now() + 600_000))).toBe(true);
    hold.release();
    await h.runner.executions.get(executionName)?.done;
    await h.runner.whenIdle();
    expect(h.push.statuses(pending)).toEqual(["running"]);
  });
});
