/**
 * `env apply` with the org's values from the sidecar (issue 23), no sockets: the values are
 * injected as `sidecarValues` and win over the values file, the environment and the spec's own
 * `value`; keys the org does not set still come from those; a failed ask writes nothing.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EnvCommandError, envApply } from "../../sandbox/cli/env-command";

let root: string;
let ws: string;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "cli-env-sidecar-")));
  ws = join(root, "workspace");
  await mkdir(ws);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const SPEC = JSON.stringify([
  {
    path: ".env",
    keys: [
      { name: "FROM_ORG", value: "spec" },
      { name: "FROM_FILE", value: "spec" },
      { name: "FROM_ENV", value: "spec" },
      { name: "FROM_SPEC", value: "spec" },
    ],
  },
]);

async function apply(sidecarValues: (() => Promise<Record<string, string>>) | undefined) {
  const values = join(root, "values.json");
  await writeFile(values, JSON.stringify({ FROM_ORG: "file", FROM_FILE: "file" }));
  const out: string[] = [];
  await envApply({ workspaceDir: ws, env: { FROM_ORG: "env", FROM_FILE: "env", FROM_ENV: "env" }, out: (l) => out.push(l), sidecarValues }, { spec: SPEC, values });
  return (await readFile(join(ws, ".env"), "utf8")).split("\n").filter((l) => l && !l.startsWith("#"));
}

describe("env apply with sidecar values", () => {
  it("ranks the org's values first, then the values file, the environment and the spec", async () => {
    expect(await apply(async () => ({ FROM_ORG: "org", UNLISTED: "ignored" }))).toEqual(["FROM_ORG=org", "FROM_FILE=file", "FROM_ENV=env", "FROM_SPEC=spec"]);
  });

  it("without a socket keeps the old order", async () => {
    expect(await apply(undefined)).toEqual(["FROM_ORG=file", "FROM_FILE=file", "FROM_ENV=env", "FROM_SPEC=spec"]);
  });

  it("fails with a message naming the source, and writes nothing, when the sidecar cannot answer", async () => {
    const err = await apply(async () => {
      throw new Error("the sidecar socket /s.sock is not accepting connections (ENOENT)");
    }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EnvCommandError);
    expect((err as EnvCommandError).problems).toEqual([
      "org secrets: could not read env values from the sidecar: the sidecar socket /s.sock is not accepting connections (ENOENT)",
    ]);
    expect(existsSync(join(ws, ".env"))).toBe(false);
  });
});
