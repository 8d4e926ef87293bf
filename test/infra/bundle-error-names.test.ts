/**
 * Error names survive the Lambda bundling (LAMBDA_BUNDLING, minified): Step Functions matches a
 * step's error by its `name`, and logs and errorForLog print it. The error modules are bundled
 * with the stack's own options and imported; every error class keeps its name, and so does every
 * instance (AppError's `name` is its class name).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../infra/handler-function";
import { lambdaBuildOptions } from "../bench/esbuild-options";

const dir = mkdtempSync(path.join(tmpdir(), "bundle-names-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type ErrorClass = new (message: string) => Error;
const isErrorClass = (v: unknown): v is ErrorClass => typeof v === "function" && v.prototype instanceof Error;

async function bundled(entry: string): Promise<Record<string, unknown>> {
  const outfile = path.join(dir, `${path.basename(entry, ".ts")}.mjs`);
  await build(lambdaBuildOptions(REPO_ROOT, entry, outfile));
  return (await import(pathToFileURL(outfile).href)) as Record<string, unknown>;
}

describe("bundled error names", () => {
  it("every error class of functions/domain/errors.ts keeps its name, and its instances carry it", async () => {
    const mod = await bundled("functions/domain/errors.ts");
    const classes = Object.entries(mod).filter((entry): entry is [string, ErrorClass] => isErrorClass(entry[1]));
    expect(classes.map(([name]) => name)).toEqual(expect.arrayContaining(["InternalError", "LeaseBusyError", "LeaseLostError", "ProviderError", "ValidationError"]));
    for (const [exported, cls] of classes) expect(cls.name, exported).toBe(exported);
    const { InternalError, LeaseBusyError } = mod as { InternalError: ErrorClass; LeaseBusyError: ErrorClass };
    expect(new InternalError("boom").name).toBe("InternalError");
    expect(new LeaseBusyError("held by another flow").name).toBe("LeaseBusyError");
  });

  it("a step's unmapped error keeps its class name as the Step Functions error name", async () => {
    const mod = (await bundled("functions/flows/step-errors.ts")) as { toStepError: (err: unknown) => Error };
    class SandboxVanished extends Error {
      constructor() {
        super("gone");
        this.name = "SandboxVanished";
      }
    }
    expect(mod.toStepError(new SandboxVanished()).name).toBe("SandboxVanished");
    const errors = await bundled("functions/domain/errors.ts");
    const { ThrottledError } = errors as { ThrottledError: ErrorClass };
    // An AppError without a mapping falls through to its own name: "ThrottledError", never "c".
    expect(mod.toStepError(new ThrottledError("slow down")).name).toBe("ThrottledError");
  });
});
