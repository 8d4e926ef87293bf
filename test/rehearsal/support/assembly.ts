/**
 * The synthesized cloud assembly as the rehearsal reads it: `cdk synth` (real esbuild bundling)
 * into a directory inside the repository, the template's resources, and CloudFormation's
 * intrinsic functions resolved to the values a deploy into a fixed fake account would produce.
 *
 * Where the assembly lives: inside the repository at `.rehearsal/<run>/`, so a Lambda asset at
 * `.rehearsal/<run>/asset.<hash>/index.mjs` resolves its external `@aws-sdk/*` imports from the
 * repository's node_modules (as the Lambda runtime resolves them from its own), and the local
 * provider bundled in it finds the repository (its boot script and OpenCode) three levels up,
 * exactly where it looks from `functions/providers/local/`.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { App } from "aws-cdk-lib";
import { buildApp } from "../../../infra/app";
import { REPO_ROOT } from "../../../infra/handler-function";

export const ACCOUNT = "123456789012";
export const REGION = "us-east-1";
export const PARTITION = "aws";

export interface CfnResource {
  Type: string;
  Properties: Record<string, unknown>;
  DependsOn?: string | string[];
  Metadata?: Record<string, unknown>;
}

export interface Assembly {
  dir: string;
  stackName: string;
  resources: Record<string, CfnResource>;
  /** Asset hash (the `Code.S3Key` without `.zip`) -> absolute asset directory. */
  assetDirs: Map<string, string>;
  /** Removes the assembly unless it was given (REHEARSAL_CDK_OUT). */
  dispose(): void;
  /** The nested stacks (Slack's), by the root's AWS::CloudFormation::Stack logical id. */
  nested: Map<string, NestedTemplate>;
}

export interface NestedTemplate {
  resources: Record<string, CfnResource>;
  outputs: Record<string, { Value: unknown }>;
}

/**
 * A nested stack as an assembly of its own (its resources; the root's assets, stack name and
 * directory), for the resolver, the IAM checker and the function specs.
 */
export function nestedAssembly(assembly: Assembly, stackLogicalId: string): Assembly {
  const nested = assembly.nested.get(stackLogicalId);
  if (!nested) throw new Error(`the template has no nested stack ${stackLogicalId}`);
  return { ...assembly, resources: nested.resources, nested: new Map() };
}

/** The root's logical id of the nested stack whose id starts with `prefix` (`Slack`). */
export function nestedStackId(assembly: Assembly, prefix: string): string {
  const ids = [...assembly.nested.keys()].filter((id) => id.startsWith(prefix));
  if (ids.length !== 1) throw new Error(`expected one nested stack ${prefix}, found ${ids.length}`);
  return ids[0] as string;
}

/**
 * Synthesizes the app exactly as `cdk synth` does (cdk-nag included, cdk.json's context), or reads
 * an existing assembly from `REHEARSAL_CDK_OUT` (a directory two levels below the repository
 * root, for iterating on the rehearsal without a two-minute synth).
 */
export function synthesize(): Assembly {
  const given = process.env.REHEARSAL_CDK_OUT;
  let dir: string;
  let stackName: string;
  if (given) {
    dir = path.resolve(given);
    stackName = "SandboxControlPlane";
  } else {
    const parent = path.join(REPO_ROOT, ".rehearsal");
    mkdirSync(parent, { recursive: true });
    dir = mkdtempSync(path.join(parent, "cdk-out-"));
    // cdk.json's context (feature flags such as minimizePolicies, which shapes every role policy), as `cdk synth` reads it.
    const cdkJson = JSON.parse(readFileSync(path.join(REPO_ROOT, "cdk.json"), "utf8")) as { context?: Record<string, unknown> };
    const { app, stack } = buildApp(new App({ outdir: dir, context: cdkJson.context ?? {} }));
    app.synth();
    stackName = stack.stackName;
  }
  if (path.resolve(dir, "../..") !== REPO_ROOT) throw new Error(`the assembly must be two levels below the repository root, got ${dir}`);
  const template = JSON.parse(readFileSync(path.join(dir, `${stackName}.template.json`), "utf8")) as { Resources: Record<string, CfnResource> };
  const manifest = JSON.parse(readFileSync(path.join(dir, `${stackName}.assets.json`), "utf8")) as { files: Record<string, { source: { path: string; packaging?: string } }> };
  const assetDirs = new Map<string, string>();
  const nestedFiles = new Map<string, string>();
  for (const [hash, file] of Object.entries(manifest.files)) {
    if (file.source.packaging === "zip") assetDirs.set(hash, path.join(dir, file.source.path));
    if (file.source.path.endsWith(".nested.template.json")) nestedFiles.set(hash, path.join(dir, file.source.path));
  }
  // Each AWS::CloudFormation::Stack names its template by asset hash (TemplateURL).
  const nested = new Map<string, NestedTemplate>();
  for (const [logicalId, r] of Object.entries(template.Resources)) {
    if (r.Type !== "AWS::CloudFormation::Stack") continue;
    const url = JSON.stringify(r.Properties.TemplateURL);
    const file = [...nestedFiles].find(([hash]) => url.includes(hash))?.[1];
    if (!file) throw new Error(`${logicalId}: no nested template in ${dir}`);
    const body = JSON.parse(readFileSync(file, "utf8")) as { Resources: Record<string, CfnResource>; Outputs?: Record<string, { Value: unknown }> };
    nested.set(logicalId, { resources: body.Resources, outputs: body.Outputs ?? {} });
  }
  return {
    dir,
    stackName,
    resources: template.Resources,
    assetDirs,
    nested,
    dispose: () => {
      if (!given) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resources of one type, by logical id. */
export function resourcesOfType(assembly: Assembly, type: string): [string, CfnResource][] {
  return Object.entries(assembly.resources).filter(([, r]) => r.Type === type);
}

/**
 * CloudFormation's intrinsic functions over the template, with the physical names and ARNs a
 * deploy into ACCOUNT/REGION would give: a named resource keeps its name, an unnamed one gets
 * `<stack>-<logicalId>` (what CloudFormation generates, minus the random suffix), secrets get
 * their `-AbCdEf` suffix, API ids are derived from the logical id.
 */
export class TemplateResolver {
  private readonly nestedResolvers = new Map<string, TemplateResolver>();

  /** `parent`: for a nested stack's template (nestedAssembly), the root's resolver and the stack's logical id there (its Parameters). */
  constructor(
    private readonly assembly: Assembly,
    private readonly parent?: { resolver: TemplateResolver; stackLogicalId: string },
  ) {}

  /** The resolver of a nested stack's template: its parameters are the root's values. */
  nested(stackLogicalId: string): TemplateResolver {
    let resolver = this.nestedResolvers.get(stackLogicalId);
    if (!resolver) {
      resolver = new TemplateResolver(nestedAssembly(this.assembly, stackLogicalId), { resolver: this, stackLogicalId });
      this.nestedResolvers.set(stackLogicalId, resolver);
    }
    return resolver;
  }

  private parameter(name: string): { value: unknown } | undefined {
    if (!this.parent) return undefined;
    const parameters = (this.parent.resolver.assembly.resources[this.parent.stackLogicalId]?.Properties.Parameters ?? {}) as Record<string, unknown>;
    return name in parameters ? { value: this.parent.resolver.resolve(parameters[name]) } : undefined;
  }

  private resource(logicalId: string): CfnResource {
    const r = this.assembly.resources[logicalId];
    if (!r) throw new Error(`the template has no resource ${logicalId}`);
    return r;
  }

  /** What `Ref` returns for a resource. */
  ref(logicalId: string): string {
    switch (logicalId) {
      case "AWS::Region":
        return REGION;
      case "AWS::AccountId":
        return ACCOUNT;
      case "AWS::Partition":
        return PARTITION;
      case "AWS::URLSuffix":
        return "amazonaws.com";
      case "AWS::StackName":
        return this.assembly.stackName;
    }
    const parameter = this.parameter(logicalId);
    if (parameter) return String(parameter.value);
    const r = this.resource(logicalId);
    const p = r.Properties;
    const named = (key: string) => (typeof p[key] === "string" ? (p[key] as string) : `${this.assembly.stackName}-${logicalId}`);
    switch (r.Type) {
      case "AWS::DynamoDB::Table":
        return named("TableName");
      case "AWS::Lambda::Function":
        return named("FunctionName");
      case "AWS::IAM::Role":
        return named("RoleName");
      case "AWS::Logs::LogGroup":
        return named("LogGroupName");
      case "AWS::Scheduler::ScheduleGroup":
        return named("Name");
      case "AWS::SecretsManager::Secret":
        return `arn:${PARTITION}:secretsmanager:${REGION}:${ACCOUNT}:secret:${named("Name")}-AbCdEf`;
      case "AWS::StepFunctions::StateMachine":
        return `arn:${PARTITION}:states:${REGION}:${ACCOUNT}:stateMachine:${named("StateMachineName")}`;
      case "AWS::KMS::Key":
        return `key-${logicalId.toLowerCase()}`;
      case "AWS::ApiGatewayV2::Api":
        return logicalId.toLowerCase().replace(/[^a-z0-9]/g, "").slice(0, 10);
      case "AWS::ApiGatewayV2::Integration":
      case "AWS::ApiGatewayV2::Route":
        return logicalId;
      case "AWS::ApiGatewayV2::Stage":
        return named("StageName");
      case "AWS::SQS::Queue":
        // A queue's Ref is its URL.
        return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${named("QueueName")}`;
      default:
        throw new Error(`rehearsal: no Ref for ${logicalId} (${r.Type})`);
    }
  }

  getAtt(logicalId: string, attribute: string): string {
    const r = this.resource(logicalId);
    const name = () => this.ref(logicalId);
    const key = `${r.Type}.${attribute}`;
    // A nested stack's output: its value in the nested template.
    if (r.Type === "AWS::CloudFormation::Stack" && attribute.startsWith("Outputs.")) {
      const output = this.assembly.nested.get(logicalId)?.outputs[attribute.slice("Outputs.".length)];
      if (!output) throw new Error(`rehearsal: no output ${attribute} of ${logicalId}`);
      return String(this.nested(logicalId).resolve(output.Value));
    }
    switch (key) {
      case "AWS::SQS::Queue.Arn":
        return `arn:${PARTITION}:sqs:${REGION}:${ACCOUNT}:${name().split("/").at(-1) ?? ""}`;
      case "AWS::SQS::Queue.QueueName":
        return name().split("/").at(-1) ?? "";
      case "AWS::Lambda::Function.Arn":
        return `arn:${PARTITION}:lambda:${REGION}:${ACCOUNT}:function:${name()}`;
      case "AWS::IAM::Role.Arn":
        return `arn:${PARTITION}:iam::${ACCOUNT}:role/${name()}`;
      case "AWS::DynamoDB::Table.Arn":
        return `arn:${PARTITION}:dynamodb:${REGION}:${ACCOUNT}:table/${name()}`;
      case "AWS::Logs::LogGroup.Arn":
        return `arn:${PARTITION}:logs:${REGION}:${ACCOUNT}:log-group:${name()}:*`;
      case "AWS::KMS::Key.Arn":
        return `arn:${PARTITION}:kms:${REGION}:${ACCOUNT}:key/${name()}`;
      case "AWS::Scheduler::ScheduleGroup.Arn":
        return `arn:${PARTITION}:scheduler:${REGION}:${ACCOUNT}:schedule-group/${name()}`;
      case "AWS::StepFunctions::StateMachine.Arn":
        return name();
      case "AWS::ApiGatewayV2::Api.ApiEndpoint":
        return `https://${name()}.execute-api.${REGION}.amazonaws.com`;
      default:
        throw new Error(`rehearsal: no Fn::GetAtt ${logicalId}.${attribute} (${r.Type})`);
    }
  }

  /** Resolves every intrinsic function in a value. */
  resolve(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v));
    if (value === null || typeof value !== "object") return value;
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    if (keys.length === 1) {
      const [fn] = keys as [string];
      const arg = obj[fn];
      switch (fn) {
        case "Ref":
          return this.ref(arg as string);
        case "Fn::GetAtt": {
          const [id, attribute] = Array.isArray(arg) ? (arg as [string, string]) : ((arg as string).split(".") as [string, string]);
          return this.getAtt(id, attribute);
        }
        case "Fn::Join": {
          const [sep, parts] = arg as [string, unknown[]];
          return (this.resolve(parts) as unknown[]).map(String).join(sep);
        }
        case "Fn::Select": {
          const [index, list] = arg as [number, unknown];
          return (this.resolve(list) as unknown[])[Number(index)];
        }
        case "Fn::Split": {
          const [sep, source] = arg as [string, unknown];
          return String(this.resolve(source)).split(sep);
        }
        case "Fn::Sub": {
          const [text, vars] = typeof arg === "string" ? [arg, {}] : (arg as [string, Record<string, unknown>]);
          return text.replace(/\$\{([^}]+)\}/g, (_m, name: string) => {
            if (name in vars) return String(this.resolve(vars[name]));
            const [id, attribute] = name.split(".");
            return attribute ? this.getAtt(id as string, attribute) : this.ref(name);
          });
        }
      }
      if (fn.startsWith("Fn::")) throw new Error(`rehearsal: unsupported intrinsic ${fn}`);
    }
    return Object.fromEntries(keys.map((k) => [k, this.resolve(obj[k])]));
  }

  string(value: unknown): string {
    const out = this.resolve(value);
    if (typeof out !== "string") throw new Error(`rehearsal: expected a string, got ${JSON.stringify(out)}`);
    return out;
  }
}
