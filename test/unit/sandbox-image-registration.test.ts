/**
 * Registering the base image with Modal and E2B, at their SDK surface: exact calls against
 * doubles, plus the real SDKs' offline parts (Modal's `dockerfileCommands` validation, E2B's
 * `Template.fromDockerfile` parser) on the real build context. Nothing here talks to Modal or
 * E2B.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template, TemplateError } from "e2b";
import { ModalClient } from "modal";
import { beforeAll, describe, expect, it } from "vitest";
import { buildImageContext, type ImageContext } from "../../sandbox/image/build-context";
import { parseDockerfile } from "../../sandbox/image/dockerfile";
import { E2B_TEMPLATE_RESOURCES, e2bDockerfile, e2bTemplate, registerE2BTemplate, type E2BTemplateSdk } from "../../sandbox/image/e2b-template";
import { COPY_CHUNK_CHARS, modalRecipe, registerModalImage, writeFileCommands, type ModalImageLike, type ModalImageSdk } from "../../sandbox/image/modal-image";
import { versionTag } from "../../sandbox/image/version-key";

let context: ImageContext;
beforeAll(async () => {
  context = await buildImageContext(await mkdtemp(join(tmpdir(), "image-ctx-")));
});

/** The RUN lines that write copied files (single, chunk and decode lines). */
const isFileWrite = (command: string) => /printf '%s' '|^RUN base64 -d /.test(command);

/** Runs generated RUN lines with every absolute path moved under `root`, as a builder would (as root, no Docker). */
function replay(commands: string[], root: string): void {
  for (const command of commands) {
    const script = command.replace(/^RUN /, "").replace(/'\//g, `'${root}/`);
    execFileSync("sh", ["-c", script]);
  }
}

describe("Modal: the Dockerfile replayed as dockerfileCommands", () => {
  it("starts from the Dockerfile's base image, drops EXPOSE/HEALTHCHECK, and replaces every COPY with file writes", async () => {
    const recipe = await modalRecipe(context);
    expect(recipe.baseImage).toBe("node:20.20.2-bookworm-slim");
    const keywords = recipe.commands.map((c) => c.split(" ")[0]);
    expect(keywords).not.toContain("COPY");
    expect(keywords).not.toContain("EXPOSE");
    expect(keywords).not.toContain("HEALTHCHECK");
    // Everything else keeps its order (and USER comes after the file writes, which run as root).
    const kept = parseDockerfile(await readFile(join(context.dir, "Dockerfile"), "utf8"))
      .filter((i) => !["FROM", "COPY", "EXPOSE", "HEALTHCHECK"].includes(i.keyword))
      .map((i) => i.keyword);
    const nonWrite = recipe.commands.filter((c) => !isFileWrite(c)).map((c) => c.split(" ")[0]);
    expect(nonWrite).toEqual(kept);
    expect(recipe.commands.findIndex((c) => c.startsWith("USER "))).toBeGreaterThan(recipe.commands.findLastIndex(isFileWrite));
  });

  it("the file writes recreate every copied file byte for byte, with its mode", async () => {
    const recipe = await modalRecipe(context);
    const root = await mkdtemp(join(tmpdir(), "modal-replay-"));
    replay(recipe.commands.filter(isFileWrite), root);
    const copied: [string, string][] = [
      ["Caddyfile", "/etc/sandbox/Caddyfile"],
      ["start-services.sh", "/usr/local/bin/start-services.sh"],
      ...context.files.filter((f) => f.startsWith("dist/")).map((f): [string, string] => [f, `/opt/sandbox/${f.slice("dist/".length)}`]),
    ];
    for (const [src, dest] of copied) {
      expect(await readFile(join(root, dest)), dest).toEqual(await readFile(join(context.dir, src)));
      expect((await stat(join(root, dest))).mode & 0o777, dest).toBe((await stat(join(context.dir, src))).mode & 0o777);
    }
  });

  it("large files are written in chunks that stay under the shell's argument limit", async () => {
    const content = Buffer.from(Array.from({ length: 250_000 }, (_, i) => (i * 7919) % 251));
    const commands = writeFileCommands("/opt/x/big.bin", content, 0o644);
    expect(commands.length).toBeGreaterThanOrEqual(4);
    for (const c of commands) expect(c.length).toBeLessThan(COPY_CHUNK_CHARS + 200);
    const root = await mkdtemp(join(tmpdir(), "modal-replay-"));
    replay(commands, root);
    expect(await readFile(join(root, "/opt/x/big.bin"))).toEqual(content);
    await expect(stat(join(root, "/opt/x/big.bin.b64"))).rejects.toThrow();
  });

  it("the real SDK accepts the commands (it refuses COPY from a local context, which this proves it checks)", async () => {
    const recipe = await modalRecipe(context);
    const modal = new ModalClient({ tokenId: "ak-offline-test", tokenSecret: "as-offline-test" });
    expect(() => modal.images.fromRegistry(recipe.baseImage).dockerfileCommands(recipe.commands)).not.toThrow();
    expect(() => modal.images.fromRegistry(recipe.baseImage).dockerfileCommands(["COPY Caddyfile /etc/sandbox/Caddyfile"])).toThrow(/COPY/);
  });
});

type Call = [string, ...unknown[]];

class FakeModalImage implements ModalImageLike {
  constructor(
    private readonly calls: Call[],
    readonly imageId: string,
  ) {}
  dockerfileCommands(commands: string[]): ModalImageLike {
    this.calls.push(["image.dockerfileCommands", commands.length]);
    return new FakeModalImage(this.calls, "");
  }
  async build(app: object): Promise<ModalImageLike> {
    this.calls.push(["image.build", app]);
    return new FakeModalImage(this.calls, "im-built");
  }
  async publish(name: string): Promise<void> {
    this.calls.push(["image.publish", this.imageId, name]);
  }
}

function fakeModal(published: Record<string, string>, lookupError?: Error) {
  const calls: Call[] = [];
  const sdk: ModalImageSdk = {
    apps: {
      fromName: async (name, params) => {
        calls.push(["apps.fromName", name, params]);
        return { appId: "ap-1" };
      },
    },
    images: {
      fromRegistry: (tag) => {
        calls.push(["images.fromRegistry", tag]);
        return new FakeModalImage(calls, "");
      },
      fromName: async (name) => {
        calls.push(["images.fromName", name]);
        if (lookupError) throw lookupError;
        const id = published[name];
        if (!id) throw Object.assign(new Error(`Image ${name} not found`), { name: "NotFoundError" });
        return new FakeModalImage(calls, id);
      },
    },
  };
  return { sdk, calls };
}

describe("registerModalImage", () => {
  it("builds from the base image with the replayed commands and publishes under the version tag", async () => {
    const { sdk, calls } = fakeModal({});
    const result = await registerModalImage(sdk, { appName: "sandbox-images", imageName: "sandbox-base", context });
    const name = `sandbox-base:${versionTag(context.versionKey)}`;
    const recipe = await modalRecipe(context);
    expect(calls).toEqual([
      ["apps.fromName", "sandbox-images", { createIfMissing: true }],
      ["images.fromName", name],
      ["images.fromRegistry", "node:20.20.2-bookworm-slim"],
      ["image.dockerfileCommands", recipe.commands.length],
      ["image.build", { appId: "ap-1" }],
      ["image.publish", "im-built", name],
    ]);
    expect(result).toEqual({ imageId: "im-built", name, built: true });
  });

  it("reuses an image already published under the current version tag (not stale): no build", async () => {
    const name = `sandbox-base:${versionTag(context.versionKey)}`;
    const { sdk, calls } = fakeModal({ [name]: "im-existing" });
    expect(await registerModalImage(sdk, { appName: "sandbox-images", imageName: "sandbox-base", context })).toEqual({ imageId: "im-existing", name, built: false });
    expect(calls.map((c) => c[0])).toEqual(["apps.fromName", "images.fromName"]);
  });

  it("does not build on a lookup error other than not-found", async () => {
    const { sdk, calls } = fakeModal({}, Object.assign(new Error("unauthenticated"), { name: "ClientError", code: 16 }));
    await expect(registerModalImage(sdk, { appName: "a", imageName: "sandbox-base", context })).rejects.toThrow("unauthenticated");
    expect(calls.map((c) => c[0])).not.toContain("image.build");
  });
});

describe("E2B: the template definition", () => {
  it("hands E2B the Dockerfile without HEALTHCHECK, EXPOSE and CMD, one line per instruction", async () => {
    const text = e2bDockerfile(await readFile(join(context.dir, "Dockerfile"), "utf8"));
    const keywords = parseDockerfile(text).map((i) => i.keyword);
    expect(keywords).not.toContain("HEALTHCHECK");
    expect(keywords).not.toContain("EXPOSE");
    expect(keywords).not.toContain("CMD");
    expect(text).not.toMatch(/\\\n/);
    expect(text.split("\n").filter(Boolean)).toHaveLength(keywords.length);
  });

  it("the real SDK parses it into the same RUN commands (nothing mangled), copies from the context, and ends as `user`", async () => {
    const template = await e2bTemplate({ template: (options) => Template(options) }, context);
    const json = JSON.parse(await Template.toJSON(template, false)) as { fromImage: string; steps: { type: string; args: string[] }[]; startCmd?: string };
    expect(json.fromImage).toBe("node:20.20.2-bookworm-slim");
    const ours = parseDockerfile(await readFile(join(context.dir, "Dockerfile"), "utf8"))
      .filter((i) => i.keyword === "RUN")
      .map((i) => i.args.replace(/\s+/g, " "));
    const theirs = json.steps.filter((s) => s.type === "RUN").map((s) => (s.args[0] ?? "").replace(/\s+/g, " "));
    expect(theirs).toEqual(ours);
    expect(json.steps.filter((s) => s.type === "COPY").map((s) => s.args.slice(0, 2))).toEqual([
      ["Caddyfile", "/etc/sandbox/Caddyfile"],
      ["start-services.sh", "/usr/local/bin/start-services.sh"],
      ["dist/", "/opt/sandbox/"],
    ]);
    expect(json.steps.filter((s) => s.type === "USER").at(-1)?.args).toEqual(["user"]);
    expect(json.startCmd).toBeUndefined();
  });
});

function fakeE2B(existingTags: string[] | null) {
  const calls: Call[] = [];
  const sdk: E2BTemplateSdk<string> = {
    template: (options) => {
      calls.push(["Template", options]);
      return { fromDockerfile: (content) => (calls.push(["fromDockerfile", content.length]), "template-definition") };
    },
    exists: async (name) => (calls.push(["exists", name]), existingTags !== null),
    getTags: async (name) => (calls.push(["getTags", name]), (existingTags ?? []).map((tag) => ({ tag }))),
    build: async (template, name, options) => (calls.push(["build", template, name, options]), { templateId: "tpl-1", buildId: "b-1" }),
  };
  return { sdk, calls };
}

describe("registerE2BTemplate", () => {
  it("builds a missing template with the version tag and the sandbox resources", async () => {
    const { sdk, calls } = fakeE2B(null);
    const tag = versionTag(context.versionKey);
    const dockerfileLength = e2bDockerfile(await readFile(join(context.dir, "Dockerfile"), "utf8")).length;
    expect(await registerE2BTemplate(sdk, { name: "sandbox", context })).toEqual({ template: `sandbox:${tag}`, built: true, buildId: "b-1" });
    expect(calls).toEqual([
      ["exists", "sandbox"],
      ["Template", { fileContextPath: context.dir }],
      ["fromDockerfile", dockerfileLength],
      ["build", "template-definition", "sandbox", { tags: [tag], ...E2B_TEMPLATE_RESOURCES }],
    ]);
  });

  it("reuses the template when it already has the current tag, and rebuilds when it only has older ones", async () => {
    const tag = versionTag(context.versionKey);
    const current = fakeE2B(["v-old", tag]);
    expect(await registerE2BTemplate(current.sdk, { name: "sandbox", context })).toEqual({ template: `sandbox:${tag}`, built: false, buildId: null });
    expect(current.calls.map((c) => c[0])).toEqual(["exists", "getTags"]);

    const stale = fakeE2B(["v-old"]);
    expect((await registerE2BTemplate(stale.sdk, { name: "sandbox", context })).built).toBe(true);
    expect(stale.calls.map((c) => c[0])).toEqual(["exists", "getTags", "Template", "fromDockerfile", "build"]);
  });

  it("a name another team owns (Template.exists answers true on 403) fails naming it and what to do, and builds nothing", async () => {
    const { sdk, calls } = fakeE2B([]);
    // What e2b's getTemplateTags throws for a 403: a TemplateError with the status code.
    sdk.getTags = async (name) => {
      calls.push(["getTags", name]);
      throw Object.assign(new TemplateError("403: Team does not have access to the template"), { statusCode: 403 });
    };
    await expect(registerE2BTemplate(sdk, { name: "sandbox", context })).rejects.toThrow(/E2B template name "sandbox" is not this API key's .*403.*choose another name/);
    expect(calls.map((c) => c[0])).toEqual(["exists", "getTags"]);
  });
});
