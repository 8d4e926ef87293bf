/** The sidecar's env parsing: defaults, the state dir beside the workspace, named failures. */
import { describe, expect, it } from "vitest";
import { sidecarOptionsFromEnv } from "../../sandbox/sidecar/config";

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
});
