/**
 * The base image's version key (seed 003 §6.6): stable for the same inputs, different for any
 * change to anything baked in.
 */
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { AGENT_TOOLS, PLUGIN_SOURCE } from "../../sandbox/boot/opencode-files";
import { buildImageContext, readImageContext, type ImageContext } from "../../sandbox/image/build-context";
import { bakedConfigInputs, computeVersionKey, versionTag, type VersionInput } from "../../sandbox/image/version-key";

const INPUTS: VersionInput[] = [
  { name: "plugin", content: "export const P = async () => ({});\n" },
  { name: "context/Caddyfile", content: ":20000 {\n}\n" },
  { name: "opencode-config", content: '{"autoupdate":false}' },
];

describe("computeVersionKey", () => {
  // The expected digest was computed independently (Python hashlib over "name\0length\0content",
  // sorted by name), not by this implementation.
  it("is a SHA-256 hex digest, fixed for fixed inputs (a change of algorithm would re-bake every snapshot)", () => {
    const key = computeVersionKey(INPUTS);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(key).toBe("c9d85d7e729dabe2f4b7e667d4539c1f1c3abae4cfc62a335d5d7e159ec49850");
  });

  it("does not depend on the order of the inputs, and strings hash as their UTF-8 bytes", () => {
    expect(computeVersionKey([...INPUTS].reverse())).toBe(computeVersionKey(INPUTS));
    const asBytes = INPUTS.map((i) => ({ name: i.name, content: Buffer.from(i.content as string, "utf8") }));
    expect(computeVersionKey(asBytes)).toBe(computeVersionKey(INPUTS));
  });

  it("changes when any byte of any input changes, when an input is renamed, added or removed", () => {
    const base = computeVersionKey(INPUTS);
    const variants: VersionInput[][] = [
      INPUTS.map((i, n) => (n === 1 ? { ...i, content: ":20001 {\n}\n" } : i)),
      INPUTS.map((i, n) => (n === 0 ? { ...i, name: "plugin2" } : i)),
      [...INPUTS, { name: "context/dist/boot.mjs", content: "" }],
      INPUTS.slice(1),
    ];
    const keys = variants.map(computeVersionKey);
    for (const k of keys) expect(k).not.toBe(base);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("is unambiguous: moving bytes from one input to the next changes the key", () => {
    expect(computeVersionKey([{ name: "a", content: "xy" }, { name: "b", content: "z" }])).not.toBe(
      computeVersionKey([{ name: "a", content: "x" }, { name: "b", content: "yz" }]),
    );
  });

  it("refuses two inputs with one name", () => {
    expect(() => computeVersionKey([INPUTS[0] as VersionInput, INPUTS[0] as VersionInput])).toThrow(/duplicate version input plugin/);
  });
});

describe("what is hashed", () => {
  it("the baked config: OpenCode version, plugin, default OpenCode config and every agent tool", () => {
    const inputs = bakedConfigInputs();
    expect(inputs.map((i) => i.name)).toEqual([
      "opencode-version",
      "plugin",
      "opencode-config",
      ...AGENT_TOOLS.map((t) => `tool/${t.name}${t.setupOnly ? " (setup)" : ""}`),
    ]);
    expect(inputs.find((i) => i.name === "plugin")?.content).toBe(PLUGIN_SOURCE);
    expect(JSON.parse(String(inputs.find((i) => i.name === "opencode-config")?.content))).toMatchObject({ autoupdate: false, model: expect.any(String) });
  });

  let context: ImageContext;
  beforeAll(async () => {
    context = await buildImageContext(await mkdtemp(join(tmpdir(), "image-ctx-")));
  });

  it("a build context: the same sources give the same key; the Dockerfile, Caddyfile, scripts and bundles are all in it", async () => {
    const again = await buildImageContext(await mkdtemp(join(tmpdir(), "image-ctx-")));
    expect(again.versionKey).toBe(context.versionKey);
    expect(context.files).toEqual(expect.arrayContaining(["Dockerfile", "Caddyfile", "start-services.sh", "dist/boot.mjs", "dist/package.json"]));
  });

  for (const file of ["Caddyfile", "Dockerfile", "start-services.sh", "dist/boot.mjs", "dist/package.json"]) {
    it(`a change to ${file} makes the key (and the published tag) change`, async () => {
      const copy = await mkdtemp(join(tmpdir(), "image-ctx-edit-"));
      await cp(context.dir, copy, { recursive: true });
      await writeFile(join(copy, file), `${await readFile(join(copy, file), "utf8")}\n`);
      const edited = await readImageContext(copy);
      expect(edited.versionKey).not.toBe(context.versionKey);
      expect(versionTag(edited.versionKey)).not.toBe(versionTag(context.versionKey));
    });
  }
});

describe("versionTag", () => {
  it("is a registry-safe prefix of the key", () => {
    expect(versionTag("a".repeat(64))).toBe(`v-${"a".repeat(24)}`);
    expect(() => versionTag("not-a-key")).toThrow();
  });
});
