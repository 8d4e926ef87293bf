/**
 * Env files on the control-plane side: `POST /v1/sessions` validates `envFiles` with the
 * in-sandbox CLI's own file schema (plus: key names only, relative paths inside the workspace,
 * each path once), stores it on the session and returns it in the view; a bad spec is a 400
 * naming the field and nothing is stored; records written before the field existed still
 * parse; and `bootRequest` (the one builder the local provider and the Modal/E2B image boot
 * share) hands the files to the boot, whose plan then applies them.
 */
import { describe, expect, it } from "vitest";
import { createSessionHarness, HARNESS_SESSION_ID } from "../support/create-session-harness";
import { SessionRecord, type SessionEnvFiles } from "../../functions/domain/session";
import type { CreateSandboxOpts } from "../../functions/ports/sandbox-provider";
import { bootRequest, imageBootSpec } from "../../functions/providers/sandbox-boot";
import { parseBootSpec } from "../../sandbox/boot/boot-spec";
import { planBoot } from "../../sandbox/boot/boot-plan";
import { EnvSpecSchema } from "../../sandbox/cli/env-spec";
import { buildSession, T0 } from "../support/builders";

const SESSION_ID = HARNESS_SESSION_ID;

const harness = createSessionHarness;

const ENV_FILES = [
  { path: "app/.env.local", keys: [{ name: "DATABASE_URL" }, { name: "LOG_LEVEL", required: false }] },
  { path: "app/config/secrets.json", format: "json", keys: [{ name: "STRIPE_KEY", required: true }] },
];
/** What the CLI's schema makes of ENV_FILES (defaults filled in): what is stored and sent. */
const NORMALIZED: SessionEnvFiles = [
  { path: "app/.env.local", format: "dotenv", keys: [{ name: "DATABASE_URL", required: true }, { name: "LOG_LEVEL", required: false }] },
  { path: "app/config/secrets.json", format: "json", keys: [{ name: "STRIPE_KEY", required: true }] },
];

describe("POST /v1/sessions envFiles", () => {
  it("a valid spec is stored as the CLI's schema reads it and returned in the view", async () => {
    const h = harness();
    const res = await h.post({ title: "with env", envFiles: ENV_FILES, initialPrompt: "hi" });
    expect(res.status).toBe(201);
    expect(res.body.session?.envFiles).toEqual(NORMALIZED);
    expect(h.stored).toHaveLength(1);
    expect(h.stored[0]?.envFiles).toEqual(NORMALIZED);
    // Exactly what the in-sandbox CLI would parse from the same input.
    expect(EnvSpecSchema.parse(ENV_FILES)).toEqual(NORMALIZED);
    // The stored record reads back through the store's schema unchanged.
    expect(SessionRecord.parse(JSON.parse(JSON.stringify(h.stored[0]))).envFiles).toEqual(NORMALIZED);
  });

  it("no envFiles (and an empty list) stores []", async () => {
    const h = harness();
    expect((await h.post({})).body.session?.envFiles).toEqual([]);
    expect((await h.post({ envFiles: [] })).body.session?.envFiles).toEqual([]);
    expect(h.stored.map((r) => r.envFiles)).toEqual([[], []]);
  });

  const invalid: { name: string; envFiles: unknown; mentions: string[] }[] = [
    { name: "not an array", envFiles: { files: ENV_FILES }, mentions: ["body.envFiles", "expected array"] },
    { name: "a bad key name (the CLI's own rule)", envFiles: [{ path: ".env", keys: [{ name: "1BAD-NAME" }] }], mentions: ["body.envFiles.0.keys.0.name", "environment variable name"] },
    { name: "an unknown format", envFiles: [{ path: ".env", format: "yaml", keys: [] }], mentions: ["body.envFiles.0.format"] },
    { name: "a missing path", envFiles: [{ keys: [] }], mentions: ["body.envFiles.0.path"] },
    { name: "keys missing", envFiles: [{ path: ".env" }], mentions: ["body.envFiles.0.keys"] },
    {
      name: "a key with a value",
      envFiles: [{ path: ".env", keys: [{ name: "A" }, { name: "TOKEN", value: "s3cr3t-value" }] }],
      mentions: ["body.envFiles.0.keys.1.value", "values are not accepted"],
    },
    { name: "an absolute path", envFiles: [{ path: "/etc/passwd", keys: [] }], mentions: ["body.envFiles.0.path", "relative to the workspace"] },
    { name: "a path leaving the workspace", envFiles: [{ path: "app/../../.bashrc", keys: [] }], mentions: ["body.envFiles.0.path", "inside the workspace"] },
    { name: "the same path twice", envFiles: [{ path: "app/.env", keys: [] }, { path: "./app/.env", keys: [] }], mentions: ["body.envFiles.1.path", "more than once"] },
    { name: "too many files", envFiles: Array.from({ length: 51 }, (_, i) => ({ path: `f${i}`, keys: [] })), mentions: ["body.envFiles"] },
  ];
  for (const c of invalid) {
    it(`${c.name} -> 400 naming the problem, nothing stored or queued`, async () => {
      const h = harness();
      const res = await h.post({ title: "bad env", initialPrompt: "hi", envFiles: c.envFiles });
      expect(res.status).toBe(400);
      expect(res.body.error?.code).toBe("invalid_request");
      for (const m of c.mentions) expect(res.body.error?.message).toContain(m);
      expect(h.stored).toEqual([]);
      expect(h.enqueued).toEqual([]);
    });
  }

  it("a rejected value is never echoed back", async () => {
    const h = harness();
    const res = await h.post({ envFiles: [{ path: ".env", keys: [{ name: "TOKEN", value: "s3cr3t-value" }] }] });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).not.toContain("s3cr3t-value");
  });
});

describe("session records written before envFiles existed", () => {
  it("parse with envFiles []", () => {
    const { envFiles: _dropped, ...old } = buildSession();
    expect(SessionRecord.parse(old).envFiles).toEqual([]);
  });
});

describe("bootRequest carries the session's env files to the boot", () => {
  const base: CreateSandboxOpts = { sessionId: SESSION_ID, repos: [], envVars: {} };
  const context = { restored: false, now: T0.getTime(), gitFreshness: null };

  it("sets envFiles when there are some, and the image boot spec parses and plans the env step", () => {
    expect(bootRequest({ ...base, envFiles: NORMALIZED }, context).envFiles).toEqual(NORMALIZED);
    const spec = parseBootSpec(JSON.parse(JSON.stringify(imageBootSpec({ ...base, envFiles: NORMALIZED }, context))));
    expect(spec.request.envFiles).toEqual(NORMALIZED);
    const phase2 = planBoot(spec).phase2;
    const write = phase2.find((s) => s.name === "write env spec");
    expect(write?.kind === "files" && write.ops[0]?.op === "write" ? JSON.parse(write.ops[0].content) : null).toEqual(NORMALIZED);
    expect(phase2.find((s) => s.name === "apply env files")).toMatchObject({ kind: "run" });
  });

  it("leaves envFiles out when there are none, so the boot has no env step", () => {
    for (const envFiles of [undefined, []]) {
      const request = bootRequest({ ...base, ...(envFiles ? { envFiles } : {}) }, context);
      expect(request).not.toHaveProperty("envFiles");
      const spec = parseBootSpec(JSON.parse(JSON.stringify(imageBootSpec({ ...base, ...(envFiles ? { envFiles } : {}) }, context))));
      expect(planBoot(spec).phase2.map((s) => s.name)).not.toContain("apply env files");
    }
  });

  it("the boot spec rejects an env spec the CLI would reject, naming the field", () => {
    const spec = imageBootSpec(base, context);
    expect(() => parseBootSpec({ ...spec, request: { ...spec.request, envFiles: [{ path: ".env", keys: [{ name: "NOT VALID" }] }] } })).toThrow(
      /request\.envFiles\.0\.keys\.0\.name/,
    );
  });
});
