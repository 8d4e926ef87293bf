/**
 * The CLI against the sidecar's real socket (issue 23): `git-credential get|store|erase`
 * through `runCli` with git's request on stdin (silent exit 0 on every failure, waiting for a
 * socket that appears late, giving up after 20 s on an injected clock), and `env apply` taking
 * the org's values from the socket over every other source, or failing without writing.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runCli, type CliDeps } from "../../sandbox/cli/cli";
import type { Sidecar } from "../../sandbox/sidecar/server";
import { credentialAnswer, startFakeControlPlane, type FakeControlPlane } from "../support/fake-control-plane";
import { shortSocketPath } from "../support/sidecar-socket";
import { makeTree, startTestSidecar, type TestTree } from "./sidecar-harness";

const PASSWORD = `ghs_${randomBytes(12).toString("hex")}`;
const REQUEST = "protocol=https\nhost=github.com\npath=acme/app.git\nwwwauth[]=Basic realm=\"GitHub\"\n\n";

let tree: TestTree;
let cp: FakeControlPlane;
let sidecar: Sidecar;
let socketPath: string;

beforeAll(async () => {
  tree = await makeTree();
  cp = await startFakeControlPlane();
  socketPath = shortSocketPath();
  sidecar = await startTestSidecar(tree, { socketPath, controlPlaneUrl: cp.url });
});

afterAll(async () => {
  await sidecar?.close();
  await cp?.close();
  await tree?.cleanup();
});

beforeEach(() => {
  cp.calls.length = 0;
  cp.gitCredential = () => credentialAnswer(PASSWORD, Date.now() + 3_600_000);
  cp.envValues = () => ({ status: 200, body: { values: { DATABASE_URL: "postgres://org/secret" } } });
});

async function cli(args: string[], opts: { stdin?: string; env?: Record<string, string | undefined>; socket?: CliDeps["socket"] } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    env: { WORKSPACE_DIR: tree.workspace, ENV_VALUES_FILE: join(tree.root, "no-values.json"), ...opts.env },
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    stdin: opts.stdin === undefined ? [] : [opts.stdin],
    socket: opts.socket,
  });
  return { code, out, err };
}

describe("sandbox git-credential", () => {
  it("get prints the username and password from the sidecar, forwarding protocol, host and path", async () => {
    const { code, out, err } = await cli(["git-credential", "--socket", socketPath, "get"], { stdin: REQUEST });
    expect({ code, out, err }).toEqual({ code: 0, out: ["username=x-access-token", `password=${PASSWORD}`], err: [] });
    expect(cp.calls.map((c) => c.body)).toEqual([{ protocol: "https", host: "github.com", path: "acme/app.git" }]);
  });

  it("reads the socket from SIDECAR_SOCKET when --socket is absent", async () => {
    const { out } = await cli(["git-credential", "get"], { stdin: "protocol=https\nhost=gitlab.com\n", env: { SIDECAR_SOCKET: socketPath } });
    expect(out).toEqual(["username=x-access-token", `password=${PASSWORD}`]);
    expect(cp.calls.map((c) => c.body)).toEqual([{ protocol: "https", host: "gitlab.com" }]);
  });

  it("prints nothing and exits 0 with a one-line reason when there is no credential", async () => {
    // (Another repository than the one the sidecar already holds a credential for.)
    cp.gitCredential = () => ({ status: 404 });
    const { code, out, err } = await cli(["git-credential", "--socket", socketPath, "get"], { stdin: "protocol=https\nhost=github.com\npath=acme/denied.git\n\n" });
    expect({ code, out }).toEqual({ code: 0, out: [] });
    expect(err).toEqual(["git-credential: no credential for https://github.com/acme/denied.git: 404 no_credential: no credential for https://github.com/acme/denied.git"]);
  });

  it("prints nothing and exits 0 when the control plane is down, without a secret in the reason", async () => {
    cp.gitCredential = () => ({ status: 500, body: { error: { message: PASSWORD } } });
    const { code, out, err } = await cli(["git-credential", "--socket", socketPath, "get"], { stdin: "protocol=https\nhost=github.com\npath=acme/down.git\n\n" });
    expect({ code, out }).toEqual({ code: 0, out: [] });
    expect(err).toHaveLength(1);
    expect(err[0]).toContain("503 control_plane_unavailable: the control plane answered 500");
    expect(err[0]).not.toContain(PASSWORD);
  });

  it("store and erase do nothing; other protocols and unknown actions are not asked for", async () => {
    for (const action of ["store", "erase", "future-action"]) {
      const res = await cli(["git-credential", "--socket", socketPath, action], { stdin: `${REQUEST.trimEnd()}\nusername=u\npassword=p\n\n` });
      expect(res).toEqual({ code: 0, out: [], err: [] });
    }
    for (const protocol of ["ssh", "file", "ftp"]) {
      const res = await cli(["git-credential", "--socket", socketPath, "get"], { stdin: `protocol=${protocol}\nhost=github.com\n\n` });
      expect(res).toEqual({ code: 0, out: [], err: [] });
    }
    expect(cp.calls).toEqual([]);
    expect((await cli(["git-credential", "--socket", socketPath])).code).toBe(2);
  });

  it("waits for a socket that does not exist yet (the sidecar still starting)", async () => {
    const late = shortSocketPath();
    let lateSidecar: Sidecar | undefined;
    const slept: number[] = [];
    try {
      const res = await cli(["git-credential", "--socket", late, "get"], {
        stdin: REQUEST,
        socket: {
          // The sidecar comes up during the CLI's second wait.
          sleep: async (ms) => {
            slept.push(ms);
            if (slept.length === 2) lateSidecar = await startTestSidecar(tree, { socketPath: late, controlPlaneUrl: cp.url, stateDir: join(tree.root, "late-state") });
          },
        },
      });
      expect(res).toEqual({ code: 0, out: ["username=x-access-token", `password=${PASSWORD}`], err: [] });
      expect(slept).toEqual([50, 100]);
    } finally {
      await lateSidecar?.close();
    }
  });

  it("gives up after 20 s in all when the socket never appears, printing nothing", async () => {
    let clock = 1_000_000;
    const slept: number[] = [];
    const missing = shortSocketPath();
    const res = await cli(["git-credential", "--socket", missing, "get"], {
      stdin: REQUEST,
      socket: {
        now: () => clock,
        sleep: async (ms) => {
          slept.push(ms);
          clock += ms;
        },
      },
    });
    expect({ code: res.code, out: res.out }).toEqual({ code: 0, out: [] });
    expect(res.err).toEqual([
      `git-credential: no credential for https://github.com/acme/app.git: the sidecar socket ${missing} is not accepting connections (ENOENT)`,
    ]);
    expect(slept.reduce((a, b) => a + b, 0)).toBe(20_000);
    expect(Math.max(...slept)).toBe(1_000);
  });
});

describe("sandbox env apply with SIDECAR_SOCKET", () => {
  const spec = JSON.stringify([
    {
      path: "app/.env.local",
      keys: [
        { name: "DATABASE_URL", value: "postgres://spec" },
        { name: "LOG_LEVEL", required: false, value: "info" },
        { name: "REGION", required: false },
      ],
    },
  ]);

  it("takes the org's values over the values file, the environment and the spec", async () => {
    const values = join(tree.root, "values.json");
    await writeFile(values, JSON.stringify({ DATABASE_URL: "postgres://file", REGION: "from-file" }));
    const { code, err } = await cli(["env", "apply", "--spec", spec, "--values", values], {
      env: { SIDECAR_SOCKET: socketPath, DATABASE_URL: "postgres://env" },
    });
    expect({ code, err }).toEqual({ code: 0, err: [] });
    const written = await readFile(join(tree.workspace, "app", ".env.local"), "utf8");
    expect(written.split("\n").filter((l) => l && !l.startsWith("#"))).toEqual(["DATABASE_URL=postgres://org/secret", "LOG_LEVEL=info", "REGION=from-file"]);
    expect(cp.calls.map((c) => c.path)).toEqual(["/v1/sandbox/env-values"]);
  });

  it("fails without writing anything when the sidecar cannot give the org's values", async () => {
    cp.envValues = () => ({ status: 502 });
    const target = join(tree.workspace, "app", ".env.failed");
    const failing = JSON.stringify([{ path: "app/.env.failed", keys: [{ name: "DATABASE_URL", value: "postgres://spec" }] }]);
    const { code, err } = await cli(["env", "apply", "--spec", failing], { env: { SIDECAR_SOCKET: socketPath } });
    expect(code).toBe(1);
    expect(err).toEqual([
      "env apply failed; nothing was changed:",
      "  org secrets: could not read env values from the sidecar: the control plane answered 502 to /v1/sandbox/env-values",
    ]);
    expect(existsSync(target)).toBe(false);
  });
});
