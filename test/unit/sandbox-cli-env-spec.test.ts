/**
 * The pure half of `env apply`: value precedence, pass 1 reporting every missing required key of
 * every file, rendering, and the exclude-file line helpers. dotenv output is checked by sourcing
 * it in a real `sh`, the strictest of its readers.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dotenvValue, EnvSpecSchema, parseValues, planEnvFiles, renderEnvFile } from "../../sandbox/cli/env-spec";
import { excludePattern, withLine, withoutLine } from "../../sandbox/cli/git-exclude";

const spec = EnvSpecSchema.parse([
  { path: "app/.env", keys: [{ name: "A" }, { name: "B", required: false }, { name: "C", value: "from-spec" }] },
  { path: "api/config.json", format: "json", keys: [{ name: "D" }, { name: "E" }] },
]);

describe("EnvSpecSchema", () => {
  it("accepts a bare array or {files}, defaulting format to dotenv and keys to required", () => {
    const [file] = EnvSpecSchema.parse({ files: [{ path: "x/.env", keys: [{ name: "K" }] }] });
    expect(file).toEqual({ path: "x/.env", format: "dotenv", keys: [{ name: "K", required: true }] });
  });

  it("rejects key names that are not environment variable names", () => {
    expect(EnvSpecSchema.safeParse([{ path: "a", keys: [{ name: "1BAD" }] }]).success).toBe(false);
    expect(EnvSpecSchema.safeParse([{ path: "a", keys: [{ name: "A=B" }] }]).success).toBe(false);
  });
});

describe("planEnvFiles", () => {
  it("takes the values file first, then the environment, then the spec's value", () => {
    const plan = planEnvFiles(spec, {
      values: { A: "file-a", D: "file-d" },
      env: { A: "env-a", C: "env-c", D: "env-d", E: "env-e" },
    });
    expect(plan).toEqual({
      ok: true,
      files: [
        { path: "app/.env", format: "dotenv", entries: [["A", "file-a"], ["C", "env-c"]] },
        { path: "api/config.json", format: "json", entries: [["D", "file-d"], ["E", "env-e"]] },
      ],
    });
  });

  it("reports every missing required key across all files, and no plan", () => {
    const plan = planEnvFiles(spec, { values: {}, env: { D: "d" } });
    expect(plan).toEqual({ ok: false, problems: ["app/.env: required key A has no value", "api/config.json: required key E has no value"] });
  });

  it("refuses a file listed twice", () => {
    const dup = EnvSpecSchema.parse([
      { path: "a/.env", keys: [] },
      { path: "a/.env", keys: [] },
    ]);
    expect(planEnvFiles(dup, { values: {}, env: {} })).toEqual({ ok: false, problems: ["a/.env: listed more than once"] });
  });
});

describe("rendering", () => {
  it("writes JSON as a flat object", () => {
    const text = renderEnvFile({ path: "c.json", format: "json", entries: [["K", "v"], ["N", "1"]] });
    expect(JSON.parse(text)).toEqual({ K: "v", N: "1" });
  });

  it("writes dotenv values that a shell reads back exactly", async () => {
    const values = [
      "plain",
      "postgres://u:p@h:5432/db?ssl=true",
      "with space",
      "it's",
      'say "hi" $HOME `x` \\n',
      `it's "both" $HOME \\ \``,
      "multi\nline",
      "it's\nmulti",
      "",
      "#notcomment",
    ];
    const dir = await mkdtemp(join(tmpdir(), "dotenv-"));
    try {
      const entries = values.map((v, i) => [`K${i}`, v] as [string, string]);
      const file = join(dir, ".env");
      await writeFile(file, renderEnvFile({ path: ".env", format: "dotenv", entries }));
      const script = `set -a; . ${file}; ${values.map((_, i) => `printf '%s\\0' "$K${i}"`).join("; ")}`;
      const read = execFileSync("sh", ["-c", script], { encoding: "utf8", env: {} }).split("\0").slice(0, -1);
      expect(read).toEqual(values);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("quotes only when needed", () => {
    expect(dotenvValue("abc-1.2")).toBe("abc-1.2");
    expect(dotenvValue("a b")).toBe("'a b'");
    expect(dotenvValue("it's")).toBe(`"it's"`);
  });
});

describe("parseValues", () => {
  it("reads a flat object and stringifies scalars", () => {
    expect(parseValues('{"A":"x","N":3,"B":true}', "v.json")).toEqual({ A: "x", N: "3", B: "true" });
  });

  it.each(["not json", "[]", '{"A":{"nested":1}}'])("rejects %s, naming the source", (text) => {
    expect(() => parseValues(text, "v.json")).toThrow("v.json");
  });
});

describe("exclude lines", () => {
  it("anchors the path to the repo and escapes glob characters", () => {
    expect(excludePattern("/w/app", "/w/app/config/.env.local")).toBe("/config/.env.local");
    expect(excludePattern("/w/app", "/w/app/odd[1]*?.env")).toBe("/odd\\[1\\]\\*\\?.env");
    expect(excludePattern("/w/app", "/w/app/#x")).toBe("/\\#x");
  });

  it("adds a line once and removes exactly it", () => {
    const base = "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp\n";
    const once = withLine(base, "/.env");
    expect(withLine(once, "/.env")).toBe(once);
    expect(once).toBe(`${base}/.env\n`);
    expect(withLine("*.swp", "/.env")).toBe("*.swp\n/.env\n");
    expect(withoutLine(once, "/.env")).toBe(base);
    expect(withoutLine(once, "/.env.local")).toBe(once);
  });
});
