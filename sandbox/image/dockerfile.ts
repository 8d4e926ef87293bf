/**
 * The image's Dockerfile read with `dockerfile-ast` (the parser behind VS Code's Docker tooling,
 * and the one E2B's `fromDockerfile` uses, so we read the file as E2B does) and checked with
 * `dockerfile-utils` (its linter) plus the rules this image needs that no Dockerfile linter
 * knows. The Modal translation (modal-image.ts), the E2B template (e2b-template.ts) and the lint
 * all read through `parseDockerfile`, so they agree on what the file says. `lintDockerfile` is
 * what CI runs where no Docker engine can build the image.
 */
import { posix } from "node:path";
import { DockerfileParser, ModifiableInstruction, type Dockerfile } from "dockerfile-ast";
import { validate, ValidationSeverity, type ValidatorSettings } from "dockerfile-utils";

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, ... */
  keyword: string;
  /** Everything after the keyword and its flags, continuations joined as Docker joins them. */
  args: string;
  /** Leading `--name=value` options (`--interval=30s`); a bare `--name` maps to "". */
  flags: Record<string, string>;
  /** 1-based line of the keyword. */
  line: number;
}

export class DockerfileSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DockerfileSyntaxError";
  }
}

/** LSP `DiagnosticSeverity.Error`: what Docker itself would refuse. */
const DIAGNOSTIC_ERROR = 1;

/**
 * dockerfile-utils rules raised to errors for the lint: each is something only the last
 * occurrence of would count (a second CMD or HEALTHCHECK silently replaces the first), or a
 * form Docker reads differently than it looks (`CMD ['a']` is shell form).
 */
const LINT_SETTINGS: ValidatorSettings = {
  instructionCmdMultiple: ValidationSeverity.ERROR,
  instructionEntrypointMultiple: ValidationSeverity.ERROR,
  instructionHealthcheckMultiple: ValidationSeverity.ERROR,
  instructionJSONInSingleQuotes: ValidationSeverity.ERROR,
  deprecatedMaintainer: ValidationSeverity.ERROR,
};

/**
 * dockerfile-utils' findings (`line N: message`; `errorsOnly` keeps what Docker would refuse),
 * and two that dockerfile-ast lets through because an editor's parser must tolerate them: an
 * escape character at the very end of the file (the last instruction never ends), and arguments
 * that still span lines once continuations are joined (a heredoc, or a comment line indented
 * inside a continuation, which dockerfile-ast keeps as text): Modal and E2B replay one line each.
 */
function validationProblems(text: string, dockerfile: Dockerfile, settings: ValidatorSettings, errorsOnly: boolean): string[] {
  const problems = validate(text, settings)
    .filter((d) => !errorsOnly || d.severity === DIAGNOSTIC_ERROR)
    .map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
  const escape = dockerfile.getEscapeCharacter();
  for (const ins of dockerfile.getInstructions()) {
    const line = ins.getRange().start.line + 1;
    if (ins.getArgumentsContent()?.includes("\n")) problems.push(`line ${line}: arguments span lines (a heredoc, or an indented comment inside a continuation)`);
    if (ins.getRange().end.line === dockerfile.getRange()?.end.line && ins.getTextContent().trimEnd().endsWith(escape)) {
      problems.push(`line ${line}: continuation at end of file`);
    }
  }
  return problems;
}

function toInstruction(ins: ReturnType<Dockerfile["getInstructions"]>[number]): Instruction {
  const flags: Record<string, string> = {};
  if (ins instanceof ModifiableInstruction) for (const flag of ins.getFlags()) flags[flag.getName()] = flag.getValue() ?? "";
  return { keyword: ins.getKeyword(), args: ins.getArgumentsContent() ?? "", flags, line: ins.getRange().start.line + 1 };
}

/** The instructions, in order; throws `DockerfileSyntaxError` for what Docker would refuse. */
export function parseDockerfile(text: string): Instruction[] {
  const dockerfile = DockerfileParser.parse(text);
  const [error] = validationProblems(text, dockerfile, {}, true);
  if (error) throw new DockerfileSyntaxError(error);
  return dockerfile.getInstructions().map(toInstruction);
}

/** The JSON exec form of CMD/ENTRYPOINT/RUN (`["a", "b"]`), or null for shell form. */
export function execForm(args: string): string[] | null {
  if (!args.startsWith("[")) return null;
  try {
    const parsed: unknown = JSON.parse(args);
    return Array.isArray(parsed) && parsed.every((a) => typeof a === "string") ? parsed : null;
  } catch {
    return null;
  }
}

/** `COPY a b dest` → sources and destination (shell form only; this project uses no JSON COPY). */
export function copyOperands(instruction: Instruction): { sources: string[]; dest: string } {
  const parts = instruction.args.split(/\s+/).filter(Boolean);
  const dest = parts.pop();
  if (!dest || parts.length === 0) throw new DockerfileSyntaxError(`line ${instruction.line}: COPY needs a source and a destination`);
  return { sources: parts, dest };
}

/** ARG defaults, `ARG NAME=value`. */
export function argDefaults(instructions: Instruction[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const ins of instructions) {
    if (ins.keyword !== "ARG") continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$/.exec(ins.args);
    if (m?.[1] && m[2] !== undefined) out[m[1]] = m[2];
  }
  return out;
}

export interface LintExpectations {
  /** The OpenCode version the image must install (package.json `opencode-ai`). */
  opencodeVersion: string;
  /** Ports the image must declare. */
  ports: number[];
  /** Files of the build context (relative paths, `/` separated); COPY sources must be among them. */
  contextFiles?: string[];
}

/**
 * Problems with the image's Dockerfile, one sentence each; empty when it passes. First
 * dockerfile-utils' (syntax, flags, ports, durations, repeated CMD/HEALTHCHECK, JSON in single
 * quotes), then this image's own rules: what Modal and E2B can replay, pinned versions, apt
 * hygiene, a non-root user, the ports, a health check and an exec-form CMD. dockerfile-utils
 * has none of the latter (they are hadolint's or ours), so they stay here.
 */
export function lintDockerfile(text: string, expect: LintExpectations): string[] {
  const dockerfile = DockerfileParser.parse(text);
  const problems = validationProblems(text, dockerfile, LINT_SETTINGS, false);
  const instructions = dockerfile.getInstructions().map(toInstruction);
  const at = (ins: Instruction, message: string) => problems.push(`line ${ins.line}: ${message}`);

  const froms = instructions.filter((i) => i.keyword === "FROM");
  if (froms.length !== 1) problems.push(`expected exactly one FROM (Modal and E2B replay single-stage Dockerfiles), found ${froms.length}`);
  const from = froms[0];
  if (from) {
    const image = from.args.split(/\s+/)[0] ?? "";
    const pinned = /@sha256:[0-9a-f]{64}$/.test(image) || /:\d+\.\d+\.\d+(-[A-Za-z0-9.-]+)?$/.test(image);
    if (!pinned) at(from, `base image ${image} is not pinned to a digest or a full version tag`);
    if (instructions.indexOf(from) !== 0) at(from, "FROM must be the first instruction");
  }

  const args = argDefaults(instructions);
  if (args.OPENCODE_VERSION !== expect.opencodeVersion) {
    problems.push(`ARG OPENCODE_VERSION is ${args.OPENCODE_VERSION ?? "missing"}, expected ${expect.opencodeVersion} (package.json opencode-ai)`);
  }

  for (const ins of instructions) {
    if (ins.keyword === "ADD") at(ins, "use COPY, not ADD");
    if ((ins.keyword === "COPY" || ins.keyword === "RUN") && Object.keys(ins.flags).length > 0) {
      at(ins, `${ins.keyword} flags (${Object.keys(ins.flags).join(", ")}) cannot be replayed by Modal or E2B`);
    }
    if (ins.keyword === "RUN") {
      // E2B's Dockerfile parser treats `\` as an escape and drops it (`printf 'a\nb'` runs as `printf 'anb'`).
      if (ins.args.includes("\\")) at(ins, "RUN contains a backslash escape, which E2B's Dockerfile parser drops");
      if (/\bapt-get install\b/.test(ins.args)) {
        if (!ins.args.includes("--no-install-recommends")) at(ins, "apt-get install without --no-install-recommends");
        if (!/rm -rf \/var\/lib\/apt\/lists/.test(ins.args)) at(ins, "apt lists are not removed in the same RUN");
      }
      for (const m of ins.args.matchAll(/npm install (?:--global|-g)\b([^&|;]*)/g)) {
        const packages = (m[1] ?? "").split(/\s+/).filter((p) => p && !p.startsWith("-"));
        for (const p of packages) {
          const name = p.replace(/^["']|["']$/g, "");
          if (!/@(\d+\.\d+\.\d+|\$\{[A-Z_]+\})$/.test(name)) at(ins, `global npm package ${name} is not pinned`);
        }
      }
      if (/\bopencode-ai\b/.test(ins.args) && !ins.args.includes("opencode-ai@${OPENCODE_VERSION}")) {
        at(ins, "OpenCode must be installed as opencode-ai@${OPENCODE_VERSION}");
      }
    }
    if (ins.keyword === "COPY" && expect.contextFiles) {
      const { sources } = copyOperands(ins);
      for (const src of sources) {
        const norm = posix.normalize(src).replace(/\/$/, "");
        const found = expect.contextFiles.some((f) => f === norm || f.startsWith(`${norm}/`));
        if (!found) at(ins, `COPY source ${src} is not in the build context`);
      }
    }
  }
  if (!instructions.some((i) => i.keyword === "RUN" && i.args.includes("opencode-ai@${OPENCODE_VERSION}"))) {
    problems.push("OpenCode is not installed (npm install --global opencode-ai@${OPENCODE_VERSION})");
  }

  const users = instructions.filter((i) => i.keyword === "USER");
  const lastUser = users.at(-1)?.args.split(":")[0];
  if (!lastUser || lastUser === "root" || lastUser === "0") problems.push(`the image must end as a non-root user, ends as ${lastUser ?? "root (no USER)"}`);

  const exposed = new Set(
    instructions
      .filter((i) => i.keyword === "EXPOSE")
      .flatMap((i) => i.args.split(/\s+/))
      .map((p) => Number(p.split("/")[0])),
  );
  for (const port of expect.ports) if (!exposed.has(port)) problems.push(`port ${port} is not EXPOSEd`);

  const health = instructions.filter((i) => i.keyword === "HEALTHCHECK");
  if (health.length !== 1 || !/^CMD\s/.test(health[0]?.args ?? "")) problems.push("expected one HEALTHCHECK ... CMD");
  const cmd = instructions.filter((i) => i.keyword === "CMD").at(-1);
  if (!cmd || !execForm(cmd.args)) problems.push("expected a CMD in exec (JSON) form");
  return problems;
}
