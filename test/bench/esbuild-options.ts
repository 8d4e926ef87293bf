/**
 * esbuild options matching the CDK stack's NodejsFunction bundling (infra/control-plane-stack.ts):
 * `--bundle --platform=node --target=node22 --format=esm --minify --sourcemap
 * --external:@aws-sdk/* --banner:js=<createRequire shim>`, output `index.mjs`.
 * Keep in step with the stack's `bundling` block.
 */
import type { BuildOptions } from "esbuild";

export const CDK_BANNER = "import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);";

export function lambdaBuildOptions(repoRoot: string, entry: string, outfile: string, extraExternal: string[] = []): BuildOptions {
  return {
    absWorkingDir: repoRoot,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: "node22",
    format: "esm",
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    banner: { js: CDK_BANNER },
    external: ["@aws-sdk/*", ...extraExternal],
    metafile: true,
    logLevel: "silent",
  };
}
