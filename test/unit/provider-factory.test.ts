import { ModalClient } from "modal";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ValidationError } from "../../functions/domain/errors";
import { createModalSdk } from "../../functions/providers/modal/modal-provider";
import { createSandboxProvider } from "../../functions/providers/provider-factory";

const base = { sandboxTimeoutSeconds: 600, env: {} };

describe("createSandboxProvider", () => {
  it("builds each provider type with its capability flags", async () => {
    const local = await createSandboxProvider("local", { ...base, localDataDir: "/tmp/never-used" });
    expect(local).toMatchObject({ type: "local", supportsPause: false, supportsMemorySnapshot: false });
    const modal = await createSandboxProvider("modal", { ...base, env: { MODAL_TOKEN_ID: "ak-0123456789abcdef", MODAL_TOKEN_SECRET: "as-0123456789abcdef" } });
    expect(modal).toMatchObject({ type: "modal", supportsPause: false, supportsMemorySnapshot: true });
    const e2b = await createSandboxProvider("e2b", { ...base, env: { E2B_API_KEY: "e2b_0123456789abcdef0123", E2B_TEMPLATE: "sandbox:v1" } });
    expect(e2b).toMatchObject({ type: "e2b", supportsPause: true, supportsAutoPause: true, supportsMemorySnapshot: false });
  });

  it("refuses a provider whose credentials are missing, naming them and no secret", async () => {
    await expect(createSandboxProvider("modal", { ...base, env: { MODAL_TOKEN_ID: "ak-0123456789abcdef" } })).rejects.toThrow(/MODAL_TOKEN_SECRET/);
    await expect(createSandboxProvider("e2b", base)).rejects.toBeInstanceOf(ValidationError);
    await expect(createSandboxProvider("local", base)).rejects.toThrow(/data directory/);
  });

  it("refuses E2B without E2B_TEMPLATE, or with E2B's stock \"base\" template (no boot script): a configuration error naming E2B_TEMPLATE", async () => {
    const key = { E2B_API_KEY: "e2b_0123456789abcdef0123" };
    const missing = createSandboxProvider("e2b", { ...base, env: key });
    await expect(missing).rejects.toBeInstanceOf(ValidationError);
    await expect(missing).rejects.toThrow(/E2B_TEMPLATE is not configured/);
    await expect(createSandboxProvider("e2b", { ...base, env: { ...key, E2B_TEMPLATE: "base" } })).rejects.toThrow(/E2B_TEMPLATE must name the template/);
  });

  describe("Modal sandbox backend (issue 22 §2)", () => {
    afterEach(() => vi.unstubAllEnvs());
    const creds = { tokenId: "ak-0123456789abcdef", tokenSecret: "as-0123456789abcdef" };

    it("the real client's backend flag is the configured one, whatever MODAL_SANDBOX_V2 says in the environment", () => {
      vi.stubEnv("MODAL_SANDBOX_V2", "1");
      expect((createModalSdk({ ...creds, sandboxBackend: "v1" }) as ModalClient).profile.sandboxV2).toBe(false);
      vi.stubEnv("MODAL_SANDBOX_V2", "0");
      expect((createModalSdk({ ...creds, sandboxBackend: "v2" }) as ModalClient).profile.sandboxV2).toBe(true);
      // Unset: V2, the SDK's own default, chosen explicitly.
      expect((createModalSdk(creds) as ModalClient).profile.sandboxV2).toBe(true);
    });

    it("MODAL_SANDBOX_BACKEND accepts v1 and v2 and refuses anything else, naming the variable", async () => {
      const env = { MODAL_TOKEN_ID: creds.tokenId, MODAL_TOKEN_SECRET: creds.tokenSecret };
      for (const backend of ["v1", "v2", ""]) await expect(createSandboxProvider("modal", { ...base, env: { ...env, MODAL_SANDBOX_BACKEND: backend } })).resolves.toMatchObject({ type: "modal" });
      const bad = createSandboxProvider("modal", { ...base, env: { ...env, MODAL_SANDBOX_BACKEND: "V3" } });
      await expect(bad).rejects.toBeInstanceOf(ValidationError);
      await expect(bad).rejects.toThrow(/MODAL_SANDBOX_BACKEND must be "v1" or "v2"/);
    });
  });
});
