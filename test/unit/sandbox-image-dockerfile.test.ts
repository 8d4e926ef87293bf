/**
 * The sandbox image's Dockerfile, linted (this machine and CI may have no Docker engine; where
 * one exists, test/adapter/sandbox-boot-image-build.test.ts builds it). The rules are the ones
 * that matter for this image: pinned base and OpenCode (equal to the repository's), non-root
 * user, the standard ports, a health check, and only instructions Modal and E2B can replay.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { IMAGE_EXPOSED_PORTS } from "../../sandbox/boot/layout";
import { OPENCODE_VERSION } from "../../sandbox/boot/opencode-files";
import { REPO_ROOT, buildImageContext, type ImageContext } from "../../sandbox/image/build-context";
import { argDefaults, execForm, lintDockerfile, parseDockerfile } from "../../sandbox/image/dockerfile";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";

const DOCKERFILE = readFileSync(join(REPO_ROOT, "sandbox/image/Dockerfile"), "utf8");
const expectations = (contextFiles?: string[]) => ({ opencodeVersion: OPENCODE_VERSION, ports: [...IMAGE_EXPOSED_PORTS], ...(contextFiles ? { contextFiles } : {}) });

let context: ImageContext;
beforeAll(async () => {
  context = await buildImageContext(await mkdtemp(join(tmpdir(), "image-ctx-")));
});

describe("the OpenCode version", () => {
  it("is the same in the boot, the Dockerfile and the installed opencode-ai package", () => {
    const installed = JSON.parse(readFileSync(join(REPO_ROOT, "node_modules/opencode-ai/package.json"), "utf8")) as { version: string };
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string }> };
    expect(OPENCODE_VERSION).toBe(installed.version);
    expect(lock.packages["node_modules/opencode-ai"]?.version).toBe(OPENCODE_VERSION);
    expect(argDefaults(parseDockerfile(DOCKERFILE)).OPENCODE_VERSION).toBe(OPENCODE_VERSION);
  });
});

describe("lintDockerfile", () => {
  it("passes the image's Dockerfile against its real build context", () => {
    expect(lintDockerfile(DOCKERFILE, expectations(context.files))).toEqual([]);
  });

  it("the image ends as `user`, exposes 4096, 20000, 4000 and 22, and keeps the sandbox alive with an exec-form CMD", () => {
    const instructions = parseDockerfile(DOCKERFILE);
    expect(instructions.filter((i) => i.keyword === "USER").at(-1)?.args).toBe("user");
    const exposed = instructions.filter((i) => i.keyword === "EXPOSE").flatMap((i) => i.args.split(/\s+/).map(Number));
    expect(exposed.sort((a, b) => a - b)).toEqual([22, 4000, 4096, 20000]);
    expect(execForm(instructions.filter((i) => i.keyword === "CMD").at(-1)?.args ?? "")).toEqual(["sleep", "infinity"]);
  });

  const broken: [string, (d: string) => string, RegExp][] = [
    ["an unpinned base image", (d) => d.replace(/^FROM .*$/m, "FROM node:20-bookworm-slim"), /base image node:20-bookworm-slim is not pinned/],
    ["a latest base image", (d) => d.replace(/^FROM .*$/m, "FROM node:latest"), /not pinned/],
    ["a second stage", (d) => d.replace(/^FROM (.*)$/m, "FROM $1 AS build\nFROM node:20.20.2-bookworm-slim"), /exactly one FROM/],
    ["another OpenCode version", (d) => d.replace(/OPENCODE_VERSION=\S+/, "OPENCODE_VERSION=1.0.0"), /ARG OPENCODE_VERSION is 1\.0\.0, expected/],
    ["OpenCode not installed from the ARG", (d) => d.replace('"opencode-ai@${OPENCODE_VERSION}"', "opencode-ai@latest"), /opencode-ai@latest is not pinned/],
    ["ending as root", (d) => d.replace(/^USER user$/m, "USER root"), /must end as a non-root user, ends as root/],
    ["no USER at all", (d) => d.replace(/^USER user$/m, ""), /ends as root \(no USER\)/],
    ["a missing port", (d) => d.replace("EXPOSE 4096 20000 4000 22", "EXPOSE 4096 20000 22"), /port 4000 is not EXPOSEd/],
    ["no health check", (d) => d.replace(/^HEALTHCHECK[\s\S]*?\|\| exit 1$/m, ""), /one HEALTHCHECK/],
    ["a shell-form CMD", (d) => d.replace('CMD ["sleep", "infinity"]', "CMD sleep infinity"), /exec \(JSON\) form/],
    ["ADD", (d) => d.replace("COPY Caddyfile", "ADD Caddyfile"), /use COPY, not ADD/],
    ["COPY flags", (d) => d.replace("COPY Caddyfile", "COPY --chown=user Caddyfile"), /COPY flags \(chown\) cannot be replayed/],
    ["a BuildKit cache mount", (d) => d.replace("RUN npm install --global", "RUN --mount=type=cache,target=/root/.npm npm install --global"), /RUN flags \(mount\)/],
    ["apt recommends", (d) => d.replace("--no-install-recommends", ""), /without --no-install-recommends/],
    ["apt lists kept", (d) => d.replace(" \\\n && rm -rf /var/lib/apt/lists/*", ""), /apt lists are not removed/],
    ["a second CMD (dockerfile-utils)", (d) => d.replace('CMD ["sleep", "infinity"]', 'CMD ["true"]\nCMD ["sleep", "infinity"]'), /line \d+: There can only be one CMD/],
    ["a second HEALTHCHECK (dockerfile-utils)", (d) => d.replace(/^(HEALTHCHECK[\s\S]*?\|\| exit 1)$/m, "$1\nHEALTHCHECK CMD true"), /line \d+: There can only be one HEALTHCHECK/],
    ["JSON in single quotes (dockerfile-utils)", (d) => d.replace('CMD ["sleep", "infinity"]', "CMD ['sleep', 'infinity']"), /line \d+: .*JSON array but is using single quotes/],
    ["an invalid health check duration (dockerfile-utils)", (d) => d.replace("--interval=30s", "--interval=30"), /line \d+: time: missing unit in duration 30/],
    ["a backslash escape E2B would drop", (d) => d.replace("echo 'PermitRootLogin no'", "printf 'PermitRootLogin no\\n'"), /backslash escape/],
  ];
  for (const [what, mutate, problem] of broken) {
    it(`reports ${what}`, () => {
      const mutated = mutate(DOCKERFILE);
      expect(mutated).not.toBe(DOCKERFILE);
      expect(lintDockerfile(mutated, expectations(context.files)).join("\n")).toMatch(problem);
    });
  }

  it("reports a COPY source missing from the build context", () => {
    const withoutDist = context.files.filter((f) => !f.startsWith("dist/"));
    expect(lintDockerfile(DOCKERFILE, expectations(withoutDist))).toEqual([expect.stringMatching(/COPY source dist\/ is not in the build context/)]);
  });
});

describe("parseDockerfile", () => {
  it("joins continuations as Docker does, skips comments (also inside a continuation), reads flags and keeps line numbers", () => {
    const parsed = parseDockerfile(
      ["# syntax comment", "FROM node:20.20.2-bookworm-slim", "", "RUN a \\", "# inside", "  && b", "HEALTHCHECK --interval=30s --timeout=5s \\", "  CMD true"].join("\n"),
    );
    expect(parsed.map((i) => [i.keyword, i.line, i.args, i.flags])).toEqual([
      ["FROM", 2, "node:20.20.2-bookworm-slim", {}],
      ["RUN", 4, "a   && b", {}],
      ["HEALTHCHECK", 7, "CMD true", { interval: "30s", timeout: "5s" }],
    ]);
  });

  it("rejects a continuation at the end of the file", () => {
    expect(() => parseDockerfile("FROM x\nRUN a \\")).toThrow(/line 2: continuation at end of file/);
    expect(parseDockerfile("FROM x\nRUN a\n# ends with \\").map((i) => i.args)).toEqual(["x", "a"]);
  });

  it("rejects arguments that would still span lines (an indented comment inside a continuation, a heredoc)", () => {
    expect(() => parseDockerfile("FROM x\nRUN a \\\n  # inside\n  && b")).toThrow(/line 2: arguments span lines/);
    expect(() => parseDockerfile("FROM x\nRUN <<EOF\necho hi\nEOF")).toThrow(/line 2: arguments span lines/);
  });

  it("rejects what Docker would refuse (dockerfile-utils errors), naming the line", () => {
    expect(() => parseDockerfile("FROM x\nFOO bar")).toThrow(/line 2: Unknown instruction: FOO/);
    expect(() => parseDockerfile("FROM x\nEXPOSE abc")).toThrow(/line 2: Invalid containerPort: abc/);
    expect(() => parseDockerfile("FROM x\nCOPY a")).toThrow(/line 2: COPY requires at least two arguments/);
  });
});
