/**
 * The base image's version key (seed 003 §6.6): SHA-256 over everything baked into a base
 * snapshot — the plugin, the agent tools, the default OpenCode config, the Caddyfile, the
 * Dockerfile, and the bundled boot/sidecar/CLI of the build context. When it changes, a base
 * image or snapshot built from the old inputs is stale; registration (modal-image.ts,
 * e2b-template.ts) uses it as the published tag, so "a build with this tag exists" means
 * "up to date". Pure: callers read the files.
 */
import { createHash } from "node:crypto";
import { DEFAULT_MODEL_ID, OPENCODE_VERSION, AGENT_TOOLS, PLUGIN_SOURCE, openCodeConfig } from "../boot/opencode-files";

export interface VersionInput {
  /** A stable name (`plugin`, `context/Dockerfile`); renaming an input changes the key. */
  name: string;
  content: string | Uint8Array;
}

/**
 * Order-independent (inputs are sorted by name) and unambiguous (each input is framed by its
 * name and byte length, so moving bytes from one input to the next changes the key).
 */
export function computeVersionKey(inputs: readonly VersionInput[]): string {
  const names = new Set<string>();
  for (const input of inputs) {
    if (names.has(input.name)) throw new Error(`duplicate version input ${input.name}`);
    names.add(input.name);
  }
  const hash = createHash("sha256");
  for (const input of [...inputs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const bytes = typeof input.content === "string" ? Buffer.from(input.content, "utf8") : input.content;
    hash.update(`${input.name}\0${bytes.byteLength}\0`);
    hash.update(bytes);
  }
  return hash.digest("hex");
}

/** What the boot writes into every sandbox from constants (seed 003: PLUGIN_MJS + default OpenCode config). */
export function bakedConfigInputs(): VersionInput[] {
  return [
    { name: "opencode-version", content: OPENCODE_VERSION },
    { name: "plugin", content: PLUGIN_SOURCE },
    { name: "opencode-config", content: JSON.stringify(openCodeConfig({ model: { kind: "id", modelId: DEFAULT_MODEL_ID }, instructionsPath: null })) },
    ...AGENT_TOOLS.map((t) => ({ name: `tool/${t.name}${t.setupOnly ? " (setup)" : ""}`, content: t.source })),
  ];
}

/** The key of a build context: its files (Dockerfile, Caddyfile, scripts, bundles) plus the baked config. */
export function imageVersionKey(contextFiles: readonly { path: string; content: Uint8Array | string }[]): string {
  return computeVersionKey([...bakedConfigInputs(), ...contextFiles.map((f) => ({ name: `context/${f.path}`, content: f.content }))]);
}

/** The tag a registered image carries: short enough for every registry's tag rules, long enough to never collide in practice. */
export function versionTag(versionKey: string): string {
  if (!/^[0-9a-f]{64}$/.test(versionKey)) throw new Error("a version key is 64 hex characters");
  return `v-${versionKey.slice(0, 24)}`;
}
