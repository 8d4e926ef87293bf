/**
 * The relay image, rehearsed without Docker: `cdk synth` stages the image's build context in
 * cdk.out (the repository root trimmed by .dockerignore), and this test replays the Dockerfile's
 * build stage on that staged context (its COPY instructions, then its RUN instructions, the
 * dependency install aside: the locked node_modules stand in for it), copies the bundle out as
 * the runtime stage does (no node_modules next to it), starts it with the container environment
 * of the synthesized task definition (CloudFormation references resolved to local stand-ins:
 * dynalite for the table, an unreachable endpoint for every other AWS API), and runs the task
 * definition's own health check command against it.
 *
 * So an import from outside the staged context, a COPY the build stage lacks, or a bundle that
 * cannot start with the deployed environment fails here, not on `cdk deploy`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { DockerfileParser, type Instruction } from "dockerfile-ast";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ControlPlaneStack } from "../../infra/control-plane-stack";
import { REPO_ROOT } from "../../infra/handler-function";
import { RELAY_HEALTH_PORT, RELAY_WORKERS } from "../../infra/relay-service";
import { DynamoRelayLeaseStore } from "../../functions/store/dynamo-relay-store";
import { startTestTable, type TestTable } from "../support/dynalite";
import { stackQueries, synthWithoutBundling, type Resources } from "./stack-queries";

interface ContainerDefinition {
  Environment: { Name: string; Value: unknown }[];
  HealthCheck: { Command: string[] };
}

let stack: ControlPlaneStack;
let resources: Resources;
let outdir: string;
let work: string;
let context: string;
let dockerfile: Instruction[];
let table: TestTable;
let relay: ChildProcess | null = null;

beforeAll(async () => {
  const synthesized = synthWithoutBundling();
  synthesized.app.synth();
  ({ stack, resources, dir: outdir } = synthesized);
  const manifest = JSON.parse(readFileSync(path.join(outdir, `${stack.artifactId}.assets.json`), "utf8")) as {
    dockerImages: Record<string, { source: { directory: string; dockerFile: string } }>;
  };
  const images = Object.values(manifest.dockerImages);
  expect(images).toHaveLength(1);
  const source = images[0]?.source;
  if (!source) throw new Error("no image asset");
  context = path.join(outdir, source.directory);
  dockerfile = DockerfileParser.parse(readFileSync(path.join(context, source.dockerFile), "utf8")).getInstructions();
  work = mkdtempSync(path.join(tmpdir(), "relay-image-"));
  table = await startTestTable();
});
afterAll(async () => {
  relay?.kill("SIGKILL");
  await table?.close();
  if (outdir) rmSync(outdir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The instructions of each stage, by the stage's name (`AS build`) or its index. */
function stages(): Map<string, Instruction[]> {
  const out = new Map<string, Instruction[]>();
  let current: Instruction[] = [];
  for (const ins of dockerfile) {
    if (ins.getKeyword() === "FROM") {
      current = [];
      const args = ins.getArguments().map((a) => a.getValue());
      const as = args.findIndex((a) => a.toLowerCase() === "as");
      out.set(as >= 0 ? (args[as + 1] ?? String(out.size)) : String(out.size), current);
      continue;
    }
    current.push(ins);
  }
  return out;
}

const values = (ins: Instruction): string[] => ins.getArguments().map((a) => a.getValue());

/** Replays a build stage in `dir`: COPY from the staged context, RUN in the shell, WORKDIR as the root. */
function replayBuildStage(instructions: Instruction[], dir: string): string[] {
  const ran: string[] = [];
  for (const ins of instructions) {
    const keyword = ins.getKeyword();
    if (keyword === "COPY") {
      const args = values(ins);
      const dest = path.join(dir, args.at(-1) ?? "");
      const sources = args.slice(0, -1);
      for (const src of sources) {
        const target = sources.length > 1 || (args.at(-1) ?? "").endsWith("/") ? path.join(dest, path.basename(src)) : dest;
        // A source missing from the staged context fails here, as it would fail `docker build`.
        cpSync(path.join(context, src), target, { recursive: true, errorOnExist: false });
      }
    } else if (keyword === "RUN") {
      const command = ins.getArgumentsContent() ?? "";
      // The dependency install: the locked node_modules of this checkout are what it installs.
      if (/^npm (install|ci)\b/.test(command.trim())) {
        symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
        continue;
      }
      const result = spawnSync("sh", ["-c", command], { cwd: dir, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
      expect(result.status, `RUN ${command}\n${result.stderr}`).toBe(0);
      ran.push(command);
    }
  }
  return ran;
}

/** A CloudFormation value of the task definition, with references resolved to local stand-ins. */
function resolveCfn(value: unknown, tableLogicalId: string, tableName: string): string {
  if (typeof value === "string") return value;
  const v = value as Record<string, unknown>;
  if ("Ref" in v) {
    const ref = v.Ref as string;
    if (ref === tableLogicalId) return tableName;
    const pseudo: Record<string, string> = { "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com" };
    if (pseudo[ref]) return pseudo[ref];
    // A resource's Ref is its id, name or (secrets) ARN; opaque to the relay until it calls AWS.
    if (resources[ref]?.Type === "AWS::SecretsManager::Secret") return `arn:aws:secretsmanager:us-east-1:123456789012:secret:${ref}`;
    return ref.toLowerCase();
  }
  if ("Fn::GetAtt" in v) return (v["Fn::GetAtt"] as string[]).join(".");
  if ("Fn::Join" in v) {
    const [sep, parts] = v["Fn::Join"] as [string, unknown[]];
    return parts.map((p) => resolveCfn(p, tableLogicalId, tableName)).join(sep);
  }
  throw new Error(`unresolvable CloudFormation value ${JSON.stringify(value)}`);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("relay image (the staged Docker context in cdk.out)", () => {
  it("builds the bundle as the Dockerfile does, and the bundle starts with the template's environment and passes its health check", async () => {
    const all = stages();
    const build = all.get("build");
    expect(build, "the Dockerfile's build stage (FROM ... AS build)").toBeDefined();
    const buildDir = path.join(work, "src");
    mkdirSync(buildDir, { recursive: true });
    const ran = replayBuildStage(build ?? [], buildDir);
    const bundle = ran.find((c) => c.includes("esbuild"));
    expect(bundle, "the build stage bundles with esbuild").toBeDefined();
    // Minified error classes keep their names (logs, errorForLog), as in the Lambda bundles.
    expect(bundle).toContain("--keep-names");

    // The runtime stage: the build stage's output copied into an empty directory (no node_modules
    // anywhere above it), started by its CMD.
    const runtime = [...all.values()].at(-1) ?? [];
    const app = path.join(work, "app");
    mkdirSync(app);
    for (const ins of runtime.filter((i) => i.getKeyword() === "COPY")) {
      const args = values(ins);
      const from = args.slice(0, -1)[0] ?? "";
      cpSync(path.join(buildDir, path.relative("/src", from)), app, { recursive: true });
    }
    const cmd = JSON.parse(runtime.find((i) => i.getKeyword() === "CMD")?.getArgumentsContent() ?? "[]") as string[];
    expect(cmd[0]).toBe("node");

    const q = stackQueries({ stack, resources });
    const task = resources[q.logicalIdOf(stack.relay.taskDefinition)];
    const container = (task?.Properties.ContainerDefinitions as ContainerDefinition[])[0];
    if (!container) throw new Error("no relay container");
    const tableLogicalId = q.logicalIdOf(stack.table);
    const templateEnv = Object.fromEntries(container.Environment.map((e) => [e.Name, resolveCfn(e.Value, tableLogicalId, table.tableName)]));
    const port = await freePort();
    // Every AWS API but the table answers nothing: the relay must start without calling one.
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    relay = spawn(cmd[0] ?? "node", cmd.slice(1), {
      cwd: app,
      env: {
        PATH: process.env.PATH,
        ...templateEnv,
        TABLE_NAME: table.tableName,
        DYNAMODB_ENDPOINT: table.endpoint,
        RELAY_HEALTH_PORT: String(port),
        RELAY_PUBLISH_METRICS: "false",
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "rehearsal",
        AWS_SECRET_ACCESS_KEY: "rehearsal",
        AWS_ENDPOINT_URL: nowhere,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    relay.stdout?.on("data", (d: Buffer) => (output += d.toString()));
    relay.stderr?.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => relay?.once("exit", (code) => resolve(code)));
    const started = await Promise.race([
      (async () => {
        while (!output.includes("relay started")) await new Promise((r) => setTimeout(r, 50));
        return true;
      })(),
      exited.then(() => false),
    ]);
    expect(started, `relay did not start:\n${output}`).toBe(true);

    // The task definition's health check, pointed at the port this run listens on.
    const [kind, ...check] = container.HealthCheck.Command;
    expect(kind).toBe("CMD");
    const command = check.map((part) => part.replace(`:${RELAY_HEALTH_PORT}`, `:${port}`));
    const health = await new Promise<number | null>((resolve) => spawn(command[0] ?? "node", command.slice(1), { stdio: "ignore" }).once("exit", resolve));
    expect(health, output).toBe(0);
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { ok: true, heldSessions: 0 } });
    // The bundle is also its workers' module: each worker thread started a relay of its own, with its own heartbeat.
    expect(templateEnv.RELAY_WORKERS).toBe(String(RELAY_WORKERS));
    const leases = new DynamoRelayLeaseStore(table.doc, table.tableName);
    const owners = [...(await leases.liveRelays(new Date())).keys()].sort();
    expect(owners).toHaveLength(RELAY_WORKERS);
    expect(owners.map((o) => o.replace(/^.*-(w\d+)$/, "$1"))).toEqual(Array.from({ length: RELAY_WORKERS }, (_, i) => `w${i}`));

    relay.kill("SIGTERM");
    expect(await exited, output).toBe(0);
    relay = null;
    // Every worker retired its heartbeat on the way out.
    expect([...(await leases.liveRelays(new Date())).keys()]).toEqual([]);
  });
});
