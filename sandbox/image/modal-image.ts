/**
 * Registers the base image on Modal with the JS SDK (seed 003 §6.12; the seed's deploy.py used
 * Python's `Image.from_dockerfile`). The JS SDK has no Dockerfile builder and refuses COPY from
 * a local context, so the Dockerfile is replayed: FROM becomes `images.fromRegistry`, every
 * other instruction a `dockerfileCommands` line, and each COPY becomes RUN lines that write the
 * copied files' bytes (base64, chunked under the shell's argument limit). The image is then
 * built in an app and published as `<name>:<version tag>`; an image already published under
 * the current tag is reused, so registration is idempotent and a stale one is never used.
 *
 * SDK calls (modal@0.11): apps.fromName(app, {createIfMissing}) → images.fromName(name:tag)
 *   found: done | NotFoundError: images.fromRegistry(base).dockerfileCommands(lines).build(app) → image.publish(name:tag)
 */
import { readFile, stat } from "node:fs/promises";
import { join, posix } from "node:path";
import { ModalClient } from "modal";
import type { ImageContext } from "./build-context";
import { copyOperands, parseDockerfile } from "./dockerfile";
import { versionTag } from "./version-key";

export interface ModalImageLike {
  readonly imageId: string;
  dockerfileCommands(commands: string[]): ModalImageLike;
  build(app: object): Promise<ModalImageLike>;
  publish(name: string): Promise<void>;
}

/** The subset of `ModalClient` registration uses (the real client satisfies it, see main.ts). */
export interface ModalImageSdk {
  apps: { fromName(name: string, params?: { createIfMissing?: boolean }): Promise<object> };
  images: { fromRegistry(tag: string): ModalImageLike; fromName(name: string): Promise<ModalImageLike> };
}

/** The real client, typed as `ModalImageSdk` so a mismatch with the installed SDK fails typecheck. */
export function createModalImageSdk(credentials: { tokenId: string; tokenSecret: string }): ModalImageSdk {
  const client: ModalImageSdk = new ModalClient(credentials);
  return client;
}

/** Characters of base64 per RUN line: under Linux's 128 KiB limit for the single `sh -c` argument. */
export const COPY_CHUNK_CHARS = 96_000;
/** Instructions Modal has no use for: ports are opened per sandbox, and Modal runs no health checks. */
const DROPPED = new Set(["EXPOSE", "HEALTHCHECK"]);

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** RUN lines that recreate one file with its mode. */
export function writeFileCommands(dest: string, content: Buffer, mode: number): string[] {
  const b64 = content.toString("base64");
  const dir = posix.dirname(dest);
  const chmod = `chmod ${(mode & 0o777).toString(8).padStart(4, "0")} ${q(dest)}`;
  if (b64.length <= COPY_CHUNK_CHARS) {
    return [`RUN mkdir -p ${q(dir)} && printf '%s' '${b64}' | base64 -d > ${q(dest)} && ${chmod}`];
  }
  const tmp = `${dest}.b64`;
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += COPY_CHUNK_CHARS) {
    const chunk = b64.slice(i, i + COPY_CHUNK_CHARS);
    lines.push(i === 0 ? `RUN mkdir -p ${q(dir)} && printf '%s' '${chunk}' > ${q(tmp)}` : `RUN printf '%s' '${chunk}' >> ${q(tmp)}`);
  }
  lines.push(`RUN base64 -d ${q(tmp)} > ${q(dest)} && rm ${q(tmp)} && ${chmod}`);
  return lines;
}

export interface ModalRecipe {
  baseImage: string;
  commands: string[];
}

/** The Dockerfile of `context` as Modal layers. COPY only before a non-root USER: RUN writes as the current user. */
export async function modalRecipe(context: Pick<ImageContext, "dir" | "files">): Promise<ModalRecipe> {
  const instructions = parseDockerfile(await readFile(join(context.dir, "Dockerfile"), "utf8"));
  const [from, ...rest] = instructions;
  if (from?.keyword !== "FROM" || rest.some((i) => i.keyword === "FROM")) throw new Error("Modal replays single-stage Dockerfiles only");
  const baseImage = from.args.split(/\s+/)[0] ?? "";
  const commands: string[] = [];
  let user = "root";
  for (const ins of rest) {
    if (DROPPED.has(ins.keyword)) continue;
    if (ins.keyword === "USER") user = ins.args.split(":")[0] ?? "root";
    if (ins.keyword === "ADD") throw new Error(`line ${ins.line}: ADD cannot be replayed on Modal; use COPY`);
    if (ins.keyword !== "COPY") {
      const flags = Object.entries(ins.flags).map(([k, v]) => (v === "" ? `--${k}` : `--${k}=${v}`));
      commands.push([ins.keyword, ...flags, ins.args].join(" "));
      continue;
    }
    if (Object.keys(ins.flags).length > 0) throw new Error(`line ${ins.line}: COPY flags cannot be replayed on Modal`);
    if (user !== "root" && user !== "0") throw new Error(`line ${ins.line}: COPY after USER ${user} cannot be replayed on Modal`);
    const { sources, dest } = copyOperands(ins);
    for (const src of sources) {
      const prefix = posix.normalize(src).replace(/\/$/, "");
      const matched = context.files.filter((f) => f === prefix || f.startsWith(`${prefix}/`));
      if (matched.length === 0) throw new Error(`line ${ins.line}: COPY source ${src} is not in the build context`);
      for (const file of matched) {
        // A directory's contents land under dest; a file lands at dest (or in it, when dest ends with /).
        const target = file === prefix ? (dest.endsWith("/") ? posix.join(dest, posix.basename(file)) : dest) : posix.join(dest, file.slice(prefix.length + 1));
        const path = join(context.dir, file);
        commands.push(...writeFileCommands(target, await readFile(path), (await stat(path)).mode));
      }
    }
  }
  return { baseImage, commands };
}

export interface ModalRegistration {
  imageId: string;
  /** `<name>:<version tag>`, what `images.fromName` finds it by. */
  name: string;
  built: boolean;
}

/** Publishes the context's image under its version tag unless that tag already exists. Use the returned id as `MODAL_BASE_IMAGE`. */
export async function registerModalImage(
  sdk: ModalImageSdk,
  options: { appName: string; imageName: string; context: ImageContext },
): Promise<ModalRegistration> {
  const name = `${options.imageName}:${versionTag(options.context.versionKey)}`;
  const app = await sdk.apps.fromName(options.appName, { createIfMissing: true });
  try {
    const existing = await sdk.images.fromName(name);
    return { imageId: existing.imageId, name, built: false };
  } catch (err) {
    if (!(err instanceof Error) || err.name !== "NotFoundError") throw err;
  }
  const recipe = await modalRecipe(options.context);
  const image = await sdk.images.fromRegistry(recipe.baseImage).dockerfileCommands(recipe.commands).build(app);
  await image.publish(name);
  return { imageId: image.imageId, name, built: true };
}
