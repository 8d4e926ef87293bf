/** The sidecar's env parsing: defaults, the state dir beside the workspace, named failures. */
import { describe, expect, it } from "vitest";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { readSandboxKey, takeSandboxKeyFile, writeSandboxKeyFile } from "../../sandbox/shared/sandbox-key-file";
import { sidecarKeySource, sidecarOptionsFromEnv } from "../../sandbox/sidecar/config";

describe("sidecarOptionsFromEnv", () => {
  it("defaults to port 4000 on all interfaces, state beside the workspace, no token", () => {
    expect(sidecarOptionsFromEnv({ WORKSPACE_DIR: "/home/user/workspace" })).toEqual({
      port: 4000,
      host: "0.0.0.0",
      token: undefined,
      workspaceDir: "/home/user/workspace",
      stateDir: "/home/user/.sidecar",
      caddyAdminUrl: undefined,
      servicesFile: undefined,
    });
  });

  it("reads every variable", () => {
    const options = sidecarOptionsFromEnv({
      SIDECAR_PORT: "0",
      SIDECAR_HOST: "127.0.0.1",
      SIDECAR_TOKEN: "tok",
      SESSION_ID: "ses_1",
      WORKSPACE_DIR: "/w",
      SIDECAR_STATE_DIR: "/state",
      CADDY_ADMIN_URL: "http://127.0.0.1:2019",
      SERVICES_FILE: "/w/services.json",
    });
    expect(options).toEqual({
      port: 0,
      host: "127.0.0.1",
      token: "tok",
      sessionId: "ses_1",
      workspaceDir: "/w",
      stateDir: "/state",
      caddyAdminUrl: "http://127.0.0.1:2019",
      servicesFile: "/w/services.json",
    });
  });

  it("treats an empty token as no token (so every route but /health is refused)", () => {
    expect(sidecarOptionsFromEnv({ SIDECAR_TOKEN: "  " }).token).toBeUndefined();
  });

  it("treats a missing or empty SESSION_ID as none (access tokens refused, the key still works)", () => {
    expect(sidecarOptionsFromEnv({ SIDECAR_TOKEN: "tok" }).sessionId).toBeUndefined();
    expect(sidecarOptionsFromEnv({ SIDECAR_TOKEN: "tok", SESSION_ID: "" }).sessionId).toBeUndefined();
  });

  it.each([
    [{ SIDECAR_PORT: "70000" }, "SIDECAR_PORT"],
    [{ SIDECAR_PORT: "web" }, "SIDECAR_PORT"],
    [{ CADDY_ADMIN_URL: "not a url" }, "CADDY_ADMIN_URL"],
  ])("names the bad variable in %j", (env, name) => {
    expect(() => sidecarOptionsFromEnv(env)).toThrow(name);
  });

  it("takes the key from SIDECAR_TOKEN_FILE (`-`: stdin), and refuses SIDECAR_TOKEN beside it", () => {
    expect(sidecarKeySource({ SIDECAR_TOKEN_FILE: "-" })).toBe("-");
    expect(sidecarKeySource({ SIDECAR_TOKEN_FILE: " " })).toBeNull();
    expect(sidecarKeySource({})).toBeNull();
    expect(sidecarOptionsFromEnv({ SIDECAR_TOKEN_FILE: "-" }).token).toBeUndefined();
    expect(() => sidecarOptionsFromEnv({ SIDECAR_TOKEN_FILE: "-", SIDECAR_TOKEN: "tok" })).toThrow("SIDECAR_TOKEN_FILE");
  });
});

describe("the sandbox key file (issue 14 §2)", () => {
  it("is written 0600, taken once (read and removed), and read from stdin or a path by the sidecar", async () => {
    const dir = await mkdtemp(join(tmpdir(), "key-file-"));
    try {
      const path = join(dir, "state", "sandbox-key");
      await writeSandboxKeyFile(path, "the-key-0123456789");
      expect((await stat(path)).mode & 0o777).toBe(0o600);
      expect(await takeSandboxKeyFile(path)).toBe("the-key-0123456789");
      await expect(stat(path)).rejects.toMatchObject({ code: "ENOENT" });
      expect(await takeSandboxKeyFile(path)).toBeUndefined();

      expect(await readSandboxKey("-", Readable.from([Buffer.from("the-key-"), Buffer.from("0123456789\n")]))).toBe("the-key-0123456789");
      expect(await readSandboxKey("-", Readable.from([]))).toBeUndefined();
      await writeFile(join(dir, "k"), "from-a-file\n");
      expect(await readSandboxKey(join(dir, "k"))).toBe("from-a-file");
      expect(await readFile(join(dir, "k"), "utf8")).toBe("from-a-file\n");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
