/**
 * The in-sandbox CLI's `services` commands against a real sidecar, and both process entries as
 * the boot sequence runs them: `sandbox/sidecar/main.ts` (env configuration, the listening line,
 * secure by default, SIGTERM) and `sandbox/cli/main.ts`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../sandbox/cli/cli";
import type { Sidecar } from "../../sandbox/sidecar/server";
import { call, makeTree, processExists, startTestSidecar, TOKEN, waitUntil, type TestTree } from "./sidecar-harness";

let tree: TestTree;
let sidecar: Sidecar;

beforeAll(async () => {
  tree = await makeTree();
  sidecar = await startTestSidecar(tree);
  await call(sidecar, "POST", "/services", { body: { name: "api", command: "echo api up; sleep 300" } });
  await call(sidecar, "POST", "/services", { body: { name: "worker", command: "sleep 300" } });
});

afterAll(async () => {
  await sidecar?.close();
  await tree?.cleanup();
});

async function cli(args: string[], env: Record<string, string | undefined> = {}, signal?: AbortSignal) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    env: { SIDECAR_URL: sidecar.url, SIDECAR_TOKEN: TOKEN, WORKSPACE_DIR: tree.workspace, ...env },
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    signal,
    client: { attempts: 2, sleep: async () => undefined },
  });
  return { code, out, err };
}

async function pidOf(name: string): Promise<number | null> {
  const { body } = await call(sidecar, "GET", "/services");
  return (body.services as { name: string; pid: number | null }[]).find((s) => s.name === name)?.pid ?? null;
}

describe("sandbox services", () => {
  it("lists the defined services", async () => {
    const { code, out } = await cli(["services", "list"]);
    expect(code).toBe(0);
    expect(out[0]).toBe("NAME\tSTATUS\tPID\tCOMMAND");
    expect(out.slice(1)).toEqual(["api\tstopped\t-\techo api up; sleep 300", "worker\tstopped\t-\tsleep 300"]);
    const json = await cli(["services", "list", "--json"]);
    expect(JSON.parse(json.out[0] ?? "")).toMatchObject({ services: [{ name: "api" }, { name: "worker" }], exposedPort: null });
  });

  it("start NAME, restart NAME, stop NAME drive real processes", async () => {
    expect((await cli(["services", "start", "api"])).code).toBe(0);
    const first = (await pidOf("api")) ?? 0;
    expect(processExists(first)).toBe(true);
    expect((await cli(["services", "restart", "api"])).code).toBe(0);
    const second = (await pidOf("api")) ?? 0;
    expect(second).not.toBe(first);
    expect(processExists(first)).toBe(false);
    const stop = await cli(["services", "stop", "api"]);
    expect(stop.code).toBe(0);
    expect(stop.out[0]).toMatch(/^api\tstopped\t-\t/);
    expect(processExists(second)).toBe(false);
  });

  it("start without a name starts every defined service", async () => {
    const { code, out } = await cli(["services", "start"]);
    expect(code).toBe(0);
    expect(out.map((l) => l.split("\t").slice(0, 2).join(" "))).toEqual(["api running", "worker running"]);
    await cli(["services", "stop", "api"]);
    await cli(["services", "stop", "worker"]);
  });

  it("logs NAME follows the log until interrupted", async () => {
    await cli(["services", "start", "api"]);
    const abort = new AbortController();
    const lines: string[] = [];
    const running = runCli(["services", "logs", "api"], {
      env: { SIDECAR_URL: sidecar.url, SIDECAR_TOKEN: TOKEN },
      out: (l) => lines.push(l),
      err: () => undefined,
      signal: abort.signal,
    });
    await waitUntil(() => lines.includes("api up"), "the log line");
    abort.abort();
    expect(await running).toBe(0);
    await cli(["services", "stop", "api"]);
  });

  it("reports sidecar errors with exit 1 and usage errors with exit 2", async () => {
    const wrong = await cli(["services", "list"], { SIDECAR_TOKEN: "wrong" });
    expect(wrong.code).toBe(1);
    expect(wrong.err.join("\n")).toContain("401 unauthorized");
    expect(wrong.err.join("\n")).not.toContain("wrong");
    const missing = await cli(["services", "start", "ghost"]);
    expect(missing).toMatchObject({ code: 1, err: [expect.stringContaining("404 not_found")] });
    expect((await cli(["services", "stop"])).code).toBe(2);
    expect((await cli(["services", "explode"])).code).toBe(2);
    expect((await cli(["services", "expose", "not-a-port"])).code).toBe(2);
  });

  it("start without a name starts the others when one fails, then exits 1 naming it", async () => {
    await call(sidecar, "POST", "/services", { body: { name: "broken", command: "true", cwd: "not-created-yet" } });
    const { code, out, err } = await cli(["services", "start"]);
    expect(code).toBe(1);
    expect(out.map((l) => l.split("\t").slice(0, 2).join(" "))).toEqual(["api running", "worker running"]);
    expect(err.join("\n")).toMatch(/could not start broken: 400 invalid_request: cwd: path "not-created-yet" does not exist/);
    await cli(["services", "stop", "api"]);
    await cli(["services", "stop", "worker"]);
  });

  it("gives up on an unreachable sidecar after its retries", async () => {
    const { code, err } = await cli(["services", "list"], { SIDECAR_URL: "http://127.0.0.1:9" });
    expect(code).toBe(1);
    expect(err.join("\n")).toMatch(/fetch failed|ECONNREFUSED/);
  });
});

function startProcess(entry: string, args: string[], env: Record<string, string>): ChildProcess {
  const { SIDECAR_TOKEN: _t, ...inherited } = process.env;
  return spawn(process.execPath, ["--import", "tsx", entry, ...args], {
    env: { ...inherited, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function collect(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stdout, stderr };
}

describe("process entries", () => {
  it("sandbox/cli/main.ts runs a command against the sidecar", async () => {
    const result = await collect(
      startProcess("sandbox/cli/main.ts", ["services", "list", "--json"], { SIDECAR_URL: sidecar.url, SIDECAR_TOKEN: TOKEN }),
    );
    expect(result.code).toBe(0);
    const listed = (JSON.parse(result.stdout) as { services: { name: string }[] }).services.map((s) => s.name);
    expect(listed).toEqual(expect.arrayContaining(["api", "worker"]));
  });

  it("sandbox/sidecar/main.ts starts from env, refuses all but /health without a token, and exits on SIGTERM", async () => {
    const child = startProcess("sandbox/sidecar/main.ts", [], {
      SIDECAR_PORT: "0",
      SIDECAR_HOST: "127.0.0.1",
      WORKSPACE_DIR: tree.workspace,
      SIDECAR_STATE_DIR: `${tree.root}/main-state`,
    });
    try {
      let stdout = "";
      child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
      const [, url] = await waitUntil(() => /sidecar listening on (http:\/\/\S+)/.exec(stdout), "the listening line", 20_000);
      expect(await (await fetch(`${url}/health`)).json()).toEqual({ ok: true });
      const refused = await fetch(`${url}/services`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(refused.status).toBe(401);
      child.kill("SIGTERM");
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  it("sandbox/sidecar/main.ts names a bad variable and exits 2", async () => {
    const result = await collect(startProcess("sandbox/sidecar/main.ts", [], { SIDECAR_PORT: "not-a-port", WORKSPACE_DIR: tree.workspace }));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("SIDECAR_PORT");
  });
});
