/**
 * esbuild options matching the CDK stack's NodejsFunction bundling (LAMBDA_BUNDLING in
 * infra/handler-function.ts): `--bundle --platform=node --target=node22 --format=esm --minify
 * --keep-names --sourcemap --external:@aws-sdk/* --banner:js=<createRequire shim>`, output
 * `index.mjs`. Derived from the stack's own options, so a change there changes these.
 */
import type { BuildOptions } from "esbuild";
import { LAMBDA_BUNDLING } from "../../infra/handler-function";

export const CDK_BANNER = LAMBDA_BUNDLING.banner ?? "";

export function lambdaBuildOptions(repoRoot: string, entry: string, outfile: string, extraExternal: string[] = []): BuildOptions {
  return {
    absWorkingDir: repoRoot,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: LAMBDA_BUNDLING.target ?? "node22",
    format: "esm",
    minify: LAMBDA_BUNDLING.minify ?? false,
    keepNames: LAMBDA_BUNDLING.keepNames ?? false,
    sourcemap: LAMBDA_BUNDLING.sourceMap ?? false,
    sourcesContent: LAMBDA_BUNDLING.sourcesContent ?? true,
    banner: { js: CDK_BANNER },
    external: [...(LAMBDA_BUNDLING.externalModules ?? []), ...extraExternal],
    metafile: true,
    logLevel: "silent",
  };
}
