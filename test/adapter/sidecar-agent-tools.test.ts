/**
 * The agent's own tools on the sidecar's Unix socket (issue 25 §4), against a fake control plane
 * on 127.0.0.1: the exact calls the sidecar makes (route, method, body, an access token for this
 * session signed with the sandbox key), input refused before any call (400 naming the field),
 * `save_snapshot` polling the flow's status until it committed, answering `pending` past its
 * wait, the control plane's 4xx relayed to the agent and its 401 turned into a 503.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { verifyAccessToken } from "../../sandbox/shared/access-token";
import type { Sidecar, SidecarOptions } from "../../sandbox/sidecar/server";
import { startFakeControlPlane, type FakeControlPlane } from "../support/fake-control-plane";
import { shortSocketPath, socketCall } from "../support/sidecar-socket";
import { makeTree, SESSION_ID, startTestSidecar, TOKEN, type TestTree } from "./sidecar-harness";

let tree: TestTree;
let cp: FakeControlPlane;
const sidecars: Sidecar[] = [];
const EXECUTION = "snapshot-ses_sidecar_test-3";

beforeAll(async () => {
  tree = await makeTree();
  cp = await startFakeControlPlane();
});
afterAll(async () => {
  await cp?.close();
  await tree?.cleanup();
});
beforeEach(() => {
  cp.calls.length = 0;
  cp.other = () => null;
});
afterEach(async () => {
  while (sidecars.length > 0) await sidecars.pop()?.close();
});

async function toolSidecar(overrides: Partial<SidecarOptions> = {}): Promise<string> {
  const socketPath = shortSocketPath();
  const sidecar = await startTestSidecar(tree, { socketPath, controlPlaneUrl: cp.url, ...overrides });
  sidecars.push(sidecar);
  return sidecar.socketPath ?? socketPath;
}

describe("the agent's tools on the sidecar socket", () => {
  it("save_snapshot starts the flow, polls its status with this session's access token and answers the committed snapshot id", async () => {
    let polls = 0;
    cp.other = (method, path) => {
      if (method === "POST" && path === "/v1/sandbox/snapshots") return { status: 202, body: { snapshot: { execution: EXECUTION, status: "pending" } } };
      if (method === "GET" && path === `/v1/sandbox/snapshots/${EXECUTION}`) {
        polls++;
        return polls < 2
          ? { status: 200, body: { snapshot: { execution: EXECUTION, status: "pending", snapshotId: null, message: null } } }
          : { status: 200, body: { snapshot: { execution: EXECUTION, status: "committed", snapshotId: "lsnap_42", message: null } } };
      }
      return null;
    };
    const socket = await toolSidecar();
    const res = await socketCall(socket, "POST", "/agent/save-snapshot", { message: "after npm install" });
    expect(res).toEqual({ status: 200, body: { status: "committed", execution: EXECUTION, snapshotId: "lsnap_42", message: null } });
    expect(cp.calls.map((c) => [c.method, c.path, c.body])).toEqual([
      ["POST", "/v1/sandbox/snapshots", { message: "after npm install" }],
      ["GET", `/v1/sandbox/snapshots/${EXECUTION}`, ""],
      ["GET", `/v1/sandbox/snapshots/${EXECUTION}`, ""],
    ]);
    for (const call of cp.calls) {
      const token = /^Bearer (\S+)$/.exec(call.authorization ?? "")?.[1] ?? "";
      expect(verifyAccessToken(token, TOKEN, { sessionId: SESSION_ID, nowSeconds: Math.floor(Date.now() / 1000) }).ok).toBe(true);
    }
  });

  it("save_snapshot answers pending with the flow's execution once its wait is over", async () => {
    cp.other = (method, path) => {
      if (method === "POST" && path === "/v1/sandbox/snapshots") return { status: 202, body: { snapshot: { execution: EXECUTION, status: "pending" } } };
      return { status: 200, body: { snapshot: { execution: EXECUTION, status: "pending", snapshotId: null, message: null } } };
    };
    const socket = await toolSidecar({ agentSnapshotWaitMs: 0 });
    const res = await socketCall(socket, "POST", "/agent/save-snapshot", {});
    expect(res).toEqual({ status: 200, body: { status: "pending", execution: EXECUTION, snapshotId: null, message: null } });
  });

  it("forwards the saves and the env request as they are, and relays what the control plane answered", async () => {
    cp.other = (method, path, body) => ({ status: method === "POST" ? 202 : 200, body: { echoed: { method, path, body } } });
    const socket = await toolSidecar();
    const commands = { commands: [{ name: "web", command: "npm run dev", cwd: "app" }] };
    const files = { files: [{ path: "app/.env", format: "dotenv", keys: [{ name: "DATABASE_URL", required: true }] }] };
    const ask = { keys: [{ name: "STRIPE_KEY", description: "payments" }], reason: "tests" };
    expect(await socketCall(socket, "POST", "/agent/service-commands", commands)).toEqual({
      status: 200,
      body: { echoed: { method: "PUT", path: "/v1/sandbox/service-commands", body: commands } },
    });
    expect(await socketCall(socket, "POST", "/agent/env-files", files)).toEqual({ status: 200, body: { echoed: { method: "PUT", path: "/v1/sandbox/env-files", body: files } } });
    expect(await socketCall(socket, "POST", "/agent/env-request", ask)).toEqual({ status: 200, body: { echoed: { method: "POST", path: "/v1/sandbox/env-requests", body: ask } } });
  });

  it("refuses bad input naming the field, without calling the control plane", async () => {
    const socket = await toolSidecar();
    const cases: [string, unknown, string][] = [
      ["/agent/env-request", { keys: [{ name: "1BAD" }] }, "body.keys.0.name: must be an environment variable name"],
      ["/agent/env-request", { keys: [] }, "body.keys"],
      ["/agent/env-request", { keys: [{ name: "A", value: "secret" }] }, 'body.keys.0: unknown field "value"'],
      ["/agent/env-files", { files: [{ path: ".env", keys: [{ name: "A", value: "x" }] }] }, 'body.files.0.keys.0: unknown field "value"'],
      ["/agent/service-commands", { commands: [{ name: "a b", command: "x" }] }, "body.commands.0.name"],
      ["/agent/service-commands", { commands: [{ name: "a", command: "x" }, { name: "a", command: "y" }] }, "service names must be unique"],
      ["/agent/save-snapshot", { message: "x".repeat(501) }, "body.message: must be at most 500 characters"],
    ];
    for (const [route, body, message] of cases) {
      const res = await socketCall(socket, "POST", route, body);
      expect(res.status, route).toBe(400);
      expect(String((res.body.error as { message: string }).message)).toContain(message);
    }
    expect((await socketCall(socket, "POST", "/agent/env-request", "x".repeat(70_000))).status).toBe(413);
    expect(cp.calls).toEqual([]);
  });

  it("relays the control plane's 4xx to the agent; a refused access token or a 5xx is a 503 naming only the status", async () => {
    const socket = await toolSidecar();
    cp.other = () => ({ status: 409, body: { error: { code: "conflict", message: "session is paused: cannot save a snapshot" } } });
    expect(await socketCall(socket, "POST", "/agent/save-snapshot", {})).toEqual({
      status: 409,
      body: { error: { code: "conflict", message: "session is paused: cannot save a snapshot" } },
    });
    cp.other = () => ({ status: 401, body: { error: { code: "unauthorized", message: "a sandbox credential is required" } } });
    expect(await socketCall(socket, "POST", "/agent/env-request", { keys: [{ name: "A" }] })).toEqual({
      status: 503,
      body: { error: { code: "control_plane_unavailable", message: "the control plane refused the sidecar's access token (401)" } },
    });
    cp.other = () => ({ status: 500, body: { error: { code: "internal_error", message: "internal error; request id abc" } } });
    expect(await socketCall(socket, "POST", "/agent/env-files", { files: [{ path: ".env", keys: [{ name: "A" }] }] })).toEqual({
      status: 503,
      body: { error: { code: "control_plane_unavailable", message: "the control plane answered 500 to /v1/sandbox/env-files" } },
    });
  });
});

describe("verify on the sidecar socket", () => {
  it("lists the evidence folder (names and sizes, no symbolic links followed) and the services, and reports both to the control plane", async () => {
    const { mkdir, symlink, writeFile } = await import("node:fs/promises");
    const evidence = `${tree.workspace}/evidence`;
    await mkdir(`${evidence}/shots`, { recursive: true });
    await writeFile(`${evidence}/test.log`, "3 passed\n");
    await writeFile(`${evidence}/shots/home.png`, Buffer.alloc(1234));
    await symlink("/etc/hostname", `${evidence}/outside-link`);
    cp.other = (method, path) => (method === "POST" && path === "/v1/sandbox/verifications" ? { status: 202, body: { verification: { id: "agt_1" } } } : null);
    const socket = await toolSidecar();
    const res = await socketCall(socket, "POST", "/agent/verify", { folder: "evidence", summary: "all tests pass" });
    const report = { folder: "evidence", summary: "all tests pass", files: [{ path: "shots/home.png", bytes: 1234 }, { path: "test.log", bytes: 9 }], truncated: false, services: [] };
    expect(res).toEqual({ status: 200, body: { verification: { id: "agt_1" }, report } });
    expect(cp.calls.map((c) => [c.method, c.path, c.body])).toEqual([["POST", "/v1/sandbox/verifications", report]]);
  });

  it("refuses a folder outside the workspace or missing (400 naming it), without calling the control plane", async () => {
    const socket = await toolSidecar();
    for (const [folder, message] of [
      ["../..", "body.folder: must stay inside the workspace"],
      ["no-such-folder", "body.folder: no-such-folder does not exist in the workspace"],
    ]) {
      const res = await socketCall(socket, "POST", "/agent/verify", { folder });
      expect(res).toMatchObject({ status: 400, body: { error: { message } } });
    }
    expect(cp.calls).toEqual([]);
  });
});
