/**
 * The E2B template of the base image, as code (e2b@2 `Template` builder): the same Dockerfile,
 * parsed by E2B's own `fromDockerfile` with the build context as `fileContextPath` (E2B
 * uploads what COPY names). Instructions E2B has no use for are left out first: it warns on
 * HEALTHCHECK, ports need no EXPOSE, and a CMD would become the template's start command
 * (providers run the boot themselves). Built as `<name>` with the version tag; a template that
 * already has the tag is reused. Use `<name>:<tag>` as `E2B_TEMPLATE`.
 *
 * SDK calls (e2b@2.x): Template({fileContextPath}).fromDockerfile(text) →
 *   Template.exists(name) → Template.getTags(name) (tag found: done) | Template.build(template, name, {tags, cpuCount, memoryMB})
 * `Template.exists` also answers true when the API says 403 (the name is another team's); the
 * `getTags` that follows then fails with 403, which is reported as that, with what to do.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Template, type TemplateBuilder } from "e2b";
import type { ImageContext } from "./build-context";
import { parseDockerfile } from "./dockerfile";
import { versionTag } from "./version-key";

/** seed 003 §6.2 step 4 sizing, as for Modal sandboxes. */
export const E2B_TEMPLATE_RESOURCES = { cpuCount: 2, memoryMB: 4096 } as const;
const LEFT_OUT = new Set(["HEALTHCHECK", "EXPOSE", "CMD", "ENTRYPOINT", "STOPSIGNAL"]);

/** The subset of e2b's `Template` this module uses (`createE2BTemplateSdk` binds the real one). */
export interface E2BTemplateSdk<T = unknown> {
  template(options: { fileContextPath: string }): { fromDockerfile(content: string): T };
  exists(name: string): Promise<boolean>;
  getTags(name: string): Promise<{ tag: string }[]>;
  build(template: T, name: string, options: { tags: string[]; cpuCount: number; memoryMB: number }): Promise<{ templateId: string; buildId: string }>;
}

/** e2b's `Template` statics with the connection options bound. */
export function createE2BTemplateSdk(conn: { apiKey?: string; domain?: string }): E2BTemplateSdk<TemplateBuilder> {
  return {
    template: (options) => Template(options),
    exists: (name) => Template.exists(name, conn),
    getTags: (name) => Template.getTags(name, conn),
    build: (template, name, options) => Template.build(template, name, { ...conn, ...options }),
  };
}

/** The Dockerfile E2B parses: the image's, one logical line per instruction, without what E2B ignores or misreads. */
export function e2bDockerfile(dockerfile: string): string {
  return `${parseDockerfile(dockerfile)
    .filter((i) => !LEFT_OUT.has(i.keyword))
    .map((i) => [i.keyword, ...Object.entries(i.flags).map(([k, v]) => (v === "" ? `--${k}` : `--${k}=${v}`)), i.args].join(" "))
    .join("\n")}\n`;
}

/** The template definition (no network until it is built). */
export async function e2bTemplate<T>(sdk: Pick<E2BTemplateSdk<T>, "template">, context: Pick<ImageContext, "dir">): Promise<T> {
  const dockerfile = await readFile(join(context.dir, "Dockerfile"), "utf8");
  return sdk.template({ fileContextPath: context.dir }).fromDockerfile(e2bDockerfile(dockerfile));
}

export interface E2BRegistration {
  /** `<name>:<version tag>`: the value for `E2B_TEMPLATE`. */
  template: string;
  built: boolean;
  buildId: string | null;
}

export async function registerE2BTemplate<T>(sdk: E2BTemplateSdk<T>, options: { name: string; context: ImageContext }): Promise<E2BRegistration> {
  const tag = versionTag(options.context.versionKey);
  const template = `${options.name}:${tag}`;
  if (await sdk.exists(options.name)) {
    let tags: { tag: string }[];
    try {
      tags = await sdk.getTags(options.name);
    } catch (err) {
      const status = (err as { statusCode?: unknown }).statusCode;
      if (status === 403 || status === 404) {
        throw new Error(
          `E2B template name "${options.name}" is not this API key's (the E2B API answered ${status} for it: another team owns the name): choose another name`,
          { cause: err },
        );
      }
      throw err;
    }
    if (tags.some((t) => t.tag === tag)) return { template, built: false, buildId: null };
  }
  const definition = await e2bTemplate(sdk, options.context);
  const info = await sdk.build(definition, options.name, { tags: [tag], ...E2B_TEMPLATE_RESOURCES });
  return { template, built: true, buildId: info.buildId };
}
