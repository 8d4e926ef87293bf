/**
 * The sidecar's service manager through its API, with real process groups: define, start, stop
 * (the whole group dies, children included), restart (a new group, the old one gone), exit
 * tracking, persisted state (a new sidecar adopts a live service, and restores one lost while
 * running), SERVICES_FILE, log streaming over SSE (tail first, then new lines), and removal
 * (`DELETE /services/{name}`: the group dies, orphans included, and the definition, persisted
 * record and log are gone, also for a sidecar started later on the same state), and a log stream
 * opened with an access token ending at the token's expiry (issue 14 item 5).
 */
import { existsSync, readFileSync } from "node:fs";
import { symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import type { Sidecar } from "../../sandbox/sidecar/server";
import { call, makeTree, processExists, SESSION_ID, SseReader, startTestSidecar, TOKEN, waitUntil, type TestTree } from "./sidecar-harness";

interface Service {
  name: string;
  status: string;
  desired: string;
  pid: number | null;
  exitCode: number | null;
  cwd: string;
}

let tree: TestTree;
let sidecar: Sidecar;
const readers: SseReader[] = [];

beforeAll(async () => {
  tree = await makeTree();
  sidecar = await startTestSidecar(tree);
});

afterEach(() => {
  for (const r of readers.splice(0)) r.close();
});

afterAll(async () => {
  await sidecar?.close();
  await tree?.cleanup();
});

async function service(s: Sidecar, name: string): Promise<Service | undefined> {
  const { body } = await call(s, "GET", "/services");
  return (body.services as Service[]).find((x) => x.name === name);
}

async function action(s: Sidecar, name: string, verb: "start" | "stop" | "restart"): Promise<Service> {
  const res = await call(s, "POST", `/services/${name}/${verb}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.service as Service;
}

async function openLogs(s: Sidecar, name: string): Promise<SseReader> {
  const { status, reader } = await SseReader.open(s, `/services/${name}/logs`);
  expect(status).toBe(200);
  readers.push(reader);
  return reader;
}

describe("start, stop, restart", () => {
  it("defines a service once and answers 201, then 200 for the same definition", async () => {
    const def = { name: "web", command: "echo child $$; sleep 300 & echo grandchild $!; wait", cwd: "app" };
    const created = await call(sidecar, "POST", "/services", { body: def });
    expect(created.status).toBe(201);
    expect(created.body.service).toMatchObject({ name: "web", status: "stopped", desired: "stopped", pid: null, cwd: "app" });
    expect((await call(sidecar, "POST", "/services", { body: def })).status).toBe(200);
  });

  it("starts the service as its own process group, idempotently", async () => {
    const started = await action(sidecar, "web", "start");
    expect(started).toMatchObject({ status: "running", desired: "running" });
    const pid = started.pid ?? 0;
    expect(processExists(pid)).toBe(true);
    // Detached: the service leads its own group, so stop can signal all of it at once.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const pgid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
    expect(pgid).toBe(pid);
    const again = await action(sidecar, "web", "start");
    expect(again.pid).toBe(pid);
  });

  it("refuses to redefine a running service with another command (409)", async () => {
    const res = await call(sidecar, "POST", "/services", { body: { name: "web", command: "sleep 1", cwd: "app" } });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: { code: "conflict", message: expect.stringContaining("stop it first") } });
  });

  it("stop kills the whole group, children included", async () => {
    const reader = await openLogs(sidecar, "web");
    await reader.waitFor("grandchild");
    const grandchild = Number(reader.lines.find((l) => l.startsWith("grandchild"))?.split(" ")[1]);
    const leader = (await service(sidecar, "web"))?.pid ?? 0;
    expect(processExists(grandchild)).toBe(true);

    const stopped = await action(sidecar, "web", "stop");
    expect(stopped).toMatchObject({ status: "stopped", desired: "stopped", pid: null });
    expect(processExists(leader)).toBe(false);
    expect(processExists(grandchild)).toBe(false);
    // Stopping a stopped service is a no-op.
    expect((await action(sidecar, "web", "stop")).status).toBe("stopped");
  });

  it("stop escalates to SIGKILL for a group that ignores SIGTERM", async () => {
    const command = "trap '' TERM; sleep 300 & echo stubborn $!; wait";
    await call(sidecar, "POST", "/services", { body: { name: "stubborn", command, start: true } });
    const reader = await openLogs(sidecar, "stubborn");
    await reader.waitFor("stubborn ");
    const child = Number(reader.lines.find((l) => l.startsWith("stubborn "))?.split(" ")[1]);
    const leader = (await service(sidecar, "stubborn"))?.pid ?? 0;
    expect(processExists(child)).toBe(true);
    expect((await action(sidecar, "stubborn", "stop")).status).toBe("stopped");
    expect(processExists(leader)).toBe(false);
    expect(processExists(child)).toBe(false);
  });

  it("reaches children a leader left behind: starting again never runs two copies", async () => {
    const command = "sleep 300 & echo orphan $!; exit 0";
    await call(sidecar, "POST", "/services", { body: { name: "leaver", command, start: true } });
    const reader = await openLogs(sidecar, "leaver");
    await reader.waitFor("orphan ");
    const orphan = Number(reader.lines.find((l) => l.startsWith("orphan "))?.split(" ")[1]);
    await waitUntil(async () => (await service(sidecar, "leaver"))?.status === "stopped", "the leader to exit");
    expect(processExists(orphan)).toBe(true);

    await action(sidecar, "leaver", "start");
    expect(processExists(orphan)).toBe(false);
    await waitUntil(() => reader.lines.filter((l) => l.startsWith("orphan ")).length === 2, "the second run");
    const second = Number(reader.lines.filter((l) => l.startsWith("orphan "))[1]?.split(" ")[1]);
    await action(sidecar, "leaver", "stop");
    expect(processExists(second)).toBe(false);
  });

  it("restart replaces the running group with a new one", async () => {
    const first = (await action(sidecar, "web", "start")).pid ?? 0;
    const restarted = await action(sidecar, "web", "restart");
    expect(restarted.status).toBe("running");
    expect(restarted.pid).not.toBe(first);
    expect(processExists(first)).toBe(false);
    expect(processExists(restarted.pid ?? 0)).toBe(true);
    await action(sidecar, "web", "stop");
  });

  it("records a service that exits on its own, with its exit code", async () => {
    await call(sidecar, "POST", "/services", { body: { name: "crash", command: "exit 3" } });
    await action(sidecar, "crash", "start");
    const crashed = await waitUntil(async () => {
      const s = await service(sidecar, "crash");
      return s?.status === "error" ? s : undefined;
    }, "crash to exit");
    expect(crashed).toMatchObject({ exitCode: 3, pid: null });
  });

  it("answers 404 for an unknown service", async () => {
    for (const verb of ["start", "stop", "restart"]) {
      expect((await call(sidecar, "POST", `/services/ghost/${verb}`)).status).toBe(404);
    }
    expect((await call(sidecar, "GET", "/services/ghost/logs")).status).toBe(404);
  });

  it("re-checks the cwd at start: a directory swapped for a symlink out of the workspace is refused", async () => {
    expect((await call(sidecar, "POST", "/services", { body: { name: "later", command: "pwd", cwd: "later" } })).status).toBe(201);
    await symlink(tree.outside, join(tree.workspace, "later"));
    const res = await call(sidecar, "POST", "/services/later/start");
    expect(res.status).toBe(400);
    expect((res.body.error as { code: string }).code).toBe("outside_workspace");
    expect((await service(sidecar, "later"))?.pid).toBeNull();
  });
});

describe("remove", () => {
  const stateNames = () => (JSON.parse(readFileSync(join(tree.stateDir, "state.json"), "utf8")) as { services: { name: string }[] }).services.map((x) => x.name);

  it("stops a running service (its whole group) and forgets its definition, record and log", async () => {
    const command = "sleep 300 & echo doomed-child $!; wait";
    expect((await call(sidecar, "POST", "/services", { body: { name: "doomed", command, start: true } })).status).toBe(201);
    const reader = await openLogs(sidecar, "doomed");
    await reader.waitFor("doomed-child");
    const child = Number(reader.lines.find((l) => l.startsWith("doomed-child"))?.split(" ")[1]);
    const running = await service(sidecar, "doomed");
    const leader = running?.pid ?? 0;
    expect(processExists(child)).toBe(true);
    const logFile = (running as unknown as { logFile: string }).logFile;
    expect(existsSync(logFile)).toBe(true);

    const res = await call(sidecar, "DELETE", "/services/doomed");
    expect(res.status).toBe(200);
    expect(res.body.service).toMatchObject({ name: "doomed", command, status: "stopped", pid: null });
    expect(processExists(leader)).toBe(false);
    expect(processExists(child)).toBe(false);
    expect(await service(sidecar, "doomed")).toBeUndefined();
    expect(stateNames()).not.toContain("doomed");
    expect(existsSync(logFile)).toBe(false);
    for (const verb of ["start", "stop", "restart"]) expect((await call(sidecar, "POST", `/services/doomed/${verb}`)).status).toBe(404);

    // The name is free again.
    expect((await call(sidecar, "POST", "/services", { body: { name: "doomed", command: "true" } })).status).toBe(201);
    expect((await call(sidecar, "DELETE", "/services/doomed")).status).toBe(200);
  });

  it("reaches the orphans of a leader that already exited", async () => {
    await call(sidecar, "POST", "/services", { body: { name: "gone-leader", command: "sleep 300 & echo stray $!; exit 0", start: true } });
    const reader = await openLogs(sidecar, "gone-leader");
    await reader.waitFor("stray ");
    const stray = Number(reader.lines.find((l) => l.startsWith("stray "))?.split(" ")[1]);
    await waitUntil(async () => (await service(sidecar, "gone-leader"))?.status === "stopped", "the leader to exit");
    expect(processExists(stray)).toBe(true);
    expect((await call(sidecar, "DELETE", "/services/gone-leader")).status).toBe(200);
    expect(processExists(stray)).toBe(false);
  });

  it("answers 404 with a clear error for an unknown service", async () => {
    const res = await call(sidecar, "DELETE", "/services/ghost");
    expect(res).toEqual({ status: 404, body: { error: { code: "not_found", message: 'no service named "ghost"' } } });
  });

  it("a sidecar started later on the same state does not bring it back", async () => {
    const first = await startTestSidecar(tree, { stopServicesOnClose: false });
    await call(first, "POST", "/services", { body: { name: "ephemeral", command: "sleep 300", start: true } });
    expect((await call(first, "DELETE", "/services/ephemeral")).status).toBe(200);
    await first.close();
    const second = await startTestSidecar(tree, { stopServicesOnClose: false });
    try {
      expect(await service(second, "ephemeral")).toBeUndefined();
    } finally {
      await second.close();
    }
  });
});

describe("log streaming", () => {
  it("streams the existing tail, then new lines as they are written", async () => {
    const gate = join(tree.root, "go");
    const command = `echo before; while [ ! -f ${gate} ]; do sleep 0.05; done; echo after; sleep 300`;
    await call(sidecar, "POST", "/services", { body: { name: "talker", command, start: true } });
    const live = await openLogs(sidecar, "talker");
    await live.waitFor("before");
    expect(live.lines.some((l) => l.includes("after"))).toBe(false);

    await writeFile(gate, "");
    await live.waitFor("after");
    expect(live.lines.indexOf("after")).toBeGreaterThan(live.lines.indexOf("before"));

    // A client connecting later gets the tail at once, in order.
    const late = await openLogs(sidecar, "talker");
    await late.waitFor("after");
    expect(late.lines.filter((l) => l === "before" || l === "after")).toEqual(["before", "after"]);
    await action(sidecar, "talker", "stop");
  });
});

describe("persistence", () => {
  it("a new sidecar on the same state dir adopts a live service and can stop it", async () => {
    const first = await startTestSidecar(tree, { stopServicesOnClose: false });
    await call(first, "POST", "/services", { body: { name: "keeper", command: "sleep 300", start: true } });
    const pid = (await service(first, "keeper"))?.pid ?? 0;
    await first.close();
    expect(processExists(pid)).toBe(true);

    const second = await startTestSidecar(tree, { stopServicesOnClose: false });
    try {
      expect(await service(second, "keeper")).toMatchObject({ status: "running", pid });
      await action(second, "keeper", "stop");
      expect(processExists(pid)).toBe(false);
    } finally {
      await second.close();
    }
  });

  it("restores a service that was lost while running, but not one that was stopped", async () => {
    const first = await startTestSidecar(tree, { stopServicesOnClose: false });
    await call(first, "POST", "/services", { body: { name: "phoenix", command: "sleep 300", start: true } });
    await call(first, "POST", "/services", { body: { name: "resting", command: "sleep 300" } });
    const lost = (await service(first, "phoenix"))?.pid ?? 0;
    await first.close();
    // The sandbox came back from a snapshot: the state file survived, the processes did not.
    process.kill(-lost, "SIGKILL");
    await waitUntil(() => !processExists(lost), "the lost service to die");

    const second = await startTestSidecar(tree);
    try {
      const restored = await service(second, "phoenix");
      expect(restored?.status).toBe("running");
      expect(restored?.pid).not.toBe(lost);
      expect(processExists(restored?.pid ?? 0)).toBe(true);
      expect(await service(second, "resting")).toMatchObject({ status: "stopped", pid: null });
    } finally {
      await second.close();
    }
  });

  it("loads definitions from SERVICES_FILE without starting them", async () => {
    const file = join(tree.root, "services.json");
    await writeFile(file, JSON.stringify([{ name: "from-file", command: "sleep 300", cwd: "app" }]));
    const withFile = await startTestSidecar(tree, { servicesFile: file });
    try {
      expect(await service(withFile, "from-file")).toMatchObject({ status: "stopped", cwd: "app", pid: null });
      expect((await action(withFile, "from-file", "start")).status).toBe("running");
    } finally {
      await withFile.close();
    }
  });
});

describe("log streams and access token expiry (issue 14 item 5)", () => {
  it("ends a log stream opened with an access token when the token expires; one opened with the sandbox key keeps following", async () => {
    await call(sidecar, "POST", "/services", { body: { name: "ticker", command: "i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.1; done" } });
    await action(sidecar, "ticker", "start");
    const now = Math.floor(Date.now() / 1000);
    const shortLived = mintAccessToken(TOKEN, { sid: SESSION_ID, iat: now, exp: now + 2 });
    const { status, reader: expiring } = await SseReader.open(sidecar, "/services/ticker/logs", shortLived);
    expect(status).toBe(200);
    readers.push(expiring);
    const keyed = await openLogs(sidecar, "ticker");
    await expiring.waitFor("tick-");
    await waitUntil(() => expiring.ended, "the expired token's log stream to end");
    expect(expiring.events).toEqual(["expired"]);
    expect(expiring.lines.at(-1)).toBe("access token expired");
    // The key's stream goes on: a line written after the other stream ended still reaches it.
    const seen = keyed.lines.length;
    await waitUntil(() => keyed.lines.length > seen + 1, "more log lines on the key's stream");
    expect(keyed.ended).toBe(false);
    expect((await SseReader.open(sidecar, "/services/ticker/logs", shortLived)).status).toBe(401);
    await action(sidecar, "ticker", "stop");
  });
});
