import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkRestoredProcesses, stopBootScript } from "../../../functions/providers/restored-processes";
import { agentAuthorization, deriveAgentPassword } from "../../../sandbox/shared/access-token";
import { waitFor } from "../../support/wait-for";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("stopBootScript (stops a restored boot's process group, real processes)", () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  it("ends the boot and the children in its group, never its own shell, and exits 0 when nothing runs", async () => {
    const dir = await mkdtemp(join(tmpdir(), "stop-boot-"));
    dirs.push(dir);
    const entry = join(dir, "boot.mjs");
    // A boot stand-in: a group leader whose child (like OpenCode) stays in its group.
    await writeFile(
      entry,
      `import { spawn } from "node:child_process";
const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
process.stdout.write(String(child.pid) + "\\n");
setInterval(() => {}, 1000);
`,
    );
    const boot = spawn(process.execPath, [entry, "run", "--spec", "x"], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
    const childPid = await new Promise<number>((resolve) => boot.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))));
    expect(alive(childPid)).toBe(true);

    const stop = () =>
      new Promise<number>((resolve) => spawn("sh", ["-c", stopBootScript(entry)], { stdio: "ignore" }).once("exit", (code) => resolve(code ?? -1)));
    expect(await stop()).toBe(0);
    await waitFor(() => !alive(childPid) && (boot.exitCode !== null || boot.signalCode !== null), { message: "the boot group is still alive" });
    // Nothing left: still success.
    expect(await stop()).toBe(0);
  });
});

describe("checkRestoredProcesses", () => {
  const key = "sandbox-key-0123456789abcdef";
  const auth = agentAuthorization(deriveAgentPassword(key));
  const urls = { tunnelUrl: "https://oc.example", previewUrl: "https://pv.example" };
  const sleep = async () => undefined;

  it("healthy when OpenCode takes this key's password and the sidecar answers through the preview", async () => {
    const seen: string[] = [];
    const fetch = async (url: string, init?: { headers: Record<string, string> }) => {
      seen.push(url);
      if (url.endsWith("/session")) return { ok: init?.headers.authorization === auth, status: 200 };
      return { ok: url === "https://pv.example/_sandbox/sidecar/health", status: 200 };
    };
    expect(await checkRestoredProcesses(urls, { fetch, sleep }, key)).toEqual({ healthy: true });
    expect(seen).toEqual(["https://oc.example/session", "https://pv.example/_sandbox/sidecar/health"]);
  });

  it("another key's OpenCode (401) is unhealthy at once, without waiting out the budget", async () => {
    let probes = 0;
    const fetch = async () => (probes++, { ok: false, status: 401 });
    const result = await checkRestoredProcesses(urls, { fetch, sleep }, key);
    expect(result).toMatchObject({ healthy: false, reason: expect.stringContaining("401") });
    expect(probes).toBe(1);
  });

  it("a sidecar that never answers is unhealthy", async () => {
    const fetch = async (url: string) => ({ ok: url.endsWith("/session"), status: 502 });
    expect(await checkRestoredProcesses(urls, { fetch, sleep }, key)).toMatchObject({ healthy: false, reason: expect.stringContaining("sidecar") });
  });
});
