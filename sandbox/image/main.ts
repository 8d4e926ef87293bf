/**
 * The base image's tooling (run on a developer machine or in CI, never in a Lambda):
 *
 *   npx tsx sandbox/image/main.ts context <dir>    build context + version key (then `docker build <dir>`)
 *   npx tsx sandbox/image/main.ts lint             lint the Dockerfile (what CI runs without a Docker engine)
 *   npx tsx sandbox/image/main.ts modal <app> <image-name>   register on Modal (MODAL_TOKEN_ID, MODAL_TOKEN_SECRET);
 *                                                  prints the image id for MODAL_BASE_IMAGE
 *   npx tsx sandbox/image/main.ts e2b <template-name>        build the E2B template (E2B_API_KEY, E2B_DOMAIN?);
 *                                                  prints the name:tag for E2B_TEMPLATE
 *
 * Registration skips the build when the current version key is already published.
 */
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IMAGE_EXPOSED_PORTS } from "../boot/layout";
import { OPENCODE_VERSION } from "../boot/opencode-files";
import { buildImageContext, type ImageContext } from "./build-context";
import { lintDockerfile } from "./dockerfile";
import { createE2BTemplateSdk, registerE2BTemplate } from "./e2b-template";
import { createModalImageSdk, registerModalImage } from "./modal-image";
import { versionTag } from "./version-key";

const USAGE = "usage: main.ts context <dir> | lint | modal <app> <image-name> | e2b <template-name>";

function requireEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

async function freshContext(): Promise<ImageContext> {
  return buildImageContext(await mkdtemp(join(tmpdir(), "sandbox-image-")));
}

async function main(argv: string[]): Promise<number> {
  const [command, a, b] = argv;
  switch (command) {
    case "context": {
      if (!a) break;
      const context = await buildImageContext(a);
      console.log(JSON.stringify({ dir: context.dir, versionKey: context.versionKey, tag: versionTag(context.versionKey) }));
      return 0;
    }
    case "lint": {
      const context = await freshContext();
      const dockerfile = await readFile(join(context.dir, "Dockerfile"), "utf8");
      const problems = lintDockerfile(dockerfile, { opencodeVersion: OPENCODE_VERSION, ports: [...IMAGE_EXPOSED_PORTS], contextFiles: context.files });
      for (const p of problems) console.error(p);
      return problems.length === 0 ? 0 : 1;
    }
    case "modal": {
      if (!a || !b) break;
      const sdk = createModalImageSdk({ tokenId: requireEnv("MODAL_TOKEN_ID"), tokenSecret: requireEnv("MODAL_TOKEN_SECRET") });
      console.log(JSON.stringify(await registerModalImage(sdk, { appName: a, imageName: b, context: await freshContext() })));
      return 0;
    }
    case "e2b": {
      if (!a) break;
      const domain = process.env.E2B_DOMAIN;
      const sdk = createE2BTemplateSdk({ apiKey: requireEnv("E2B_API_KEY"), ...(domain ? { domain } : {}) });
      console.log(JSON.stringify(await registerE2BTemplate(sdk, { name: a, context: await freshContext() })));
      return 0;
    }
  }
  console.error(USAGE);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
