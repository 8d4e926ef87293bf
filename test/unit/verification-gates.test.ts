/**
 * Seed 002 verifications 1 and 2 ("pnpm typecheck", "pnpm lint") are gates of `npm test`, which
 * CI runs: this pins them there, so dropping either from the test command fails the suite.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };

describe("seed 002 verifications 1 and 2", () => {
  it("npm test type-checks (tsc --noEmit) and lints (eslint) the whole repository before running the tests", () => {
    const steps = pkg.scripts.test?.split("&&").map((s) => s.trim()) ?? [];
    expect(steps.slice(0, 2).sort()).toEqual(["npm run lint", "npm run typecheck"]);
    expect(steps.at(-1)).toMatch(/^vitest run/);
    // The server and tests, then the console (DOM types: its own tsconfig).
    expect(pkg.scripts.typecheck).toBe("tsc --noEmit -p tsconfig.json && tsc --noEmit -p clients/console/tsconfig.json");
    expect(pkg.scripts.lint).toBe("eslint .");
  });
});
