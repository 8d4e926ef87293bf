/**
 * The client view of a session (issue 25 §6/§7): the sandbox's preview URL shows as `preview`
 * while the session runs, never the agent's tunnel; the permission policy and failover chain
 * default for records written before they existed.
 */
import { describe, expect, it } from "vitest";
import { SessionRecord, toSessionView } from "../../functions/domain/session";
import { buildSession } from "../support/builders";

describe("toSessionView", () => {
  it("shows the preview URL while running, and never the OpenCode tunnel", () => {
    const record = buildSession({ status: "running", sandboxId: "sb-1", openCodeUrl: "https://oc-tunnel.example/secret", previewUrl: "https://preview.example" });
    const view = toSessionView(record, new Date());
    expect(view.preview).toEqual({ url: "https://preview.example" });
    expect(JSON.stringify(view)).not.toContain("oc-tunnel");
    expect(view).not.toHaveProperty("previewUrl");
  });

  it("no preview when the sandbox has none, or the session is not running", () => {
    expect(toSessionView(buildSession({ status: "running", previewUrl: null }), new Date()).preview).toBeNull();
    expect(toSessionView(buildSession({ status: "paused", previewUrl: "https://preview.example" }), new Date()).preview).toBeNull();
  });

  it("records written before issue 25 read with auto permissions, no failover chain, no preview", () => {
    const { permissionPolicy: _p, fallbackModels: _f, previewUrl: _u, ...old } = buildSession();
    const parsed = SessionRecord.parse(old);
    expect(parsed).toMatchObject({ permissionPolicy: "auto", fallbackModels: [], previewUrl: null });
  });
});
