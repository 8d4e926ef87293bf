/**
 * `@opencode-ai/sdk` is generated from the OpenAPI document of the OpenCode server of the same
 * version, so the client (functions/agent/opencode-agent-client.ts) is only right for the
 * `opencode-ai` it is released with. Both are pinned to one exact version in package.json, and
 * the lock file and node_modules must hold that version of each; bump them together.
 * (test/unit/sandbox-image-dockerfile.test.ts ties `opencode-ai` to the image and the boot.)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const REPO_ROOT = join(import.meta.dirname, "..", "..");
const json = <T>(path: string) => JSON.parse(readFileSync(join(REPO_ROOT, path), "utf8")) as T;
const SDK = "@opencode-ai/sdk";
const SERVER = "opencode-ai";

describe("the OpenCode SDK and server versions", () => {
  const manifest = json<{ dependencies: Record<string, string> }>("package.json");
  const server = manifest.dependencies[SERVER];

  it("are pinned in package.json to the same exact version", () => {
    expect(server).toMatch(/^\d+\.\d+\.\d+$/);
    expect(manifest.dependencies[SDK]).toBe(server);
  });

  it("are locked and installed at that version", () => {
    const lock = json<{ packages: Record<string, { version?: string }> }>("package-lock.json");
    for (const name of [SDK, SERVER]) {
      expect(lock.packages[`node_modules/${name}`]?.version, `package-lock.json ${name}`).toBe(server);
      expect(json<{ version: string }>(`node_modules/${name}/package.json`).version, `node_modules ${name}`).toBe(server);
    }
  });
});
