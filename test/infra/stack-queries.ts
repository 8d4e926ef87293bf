/**
 * Reading a synthesized ControlPlaneStack for the infra tests: a synth without bundling (the
 * tests that look at wiring need no bundles; control-plane-stack.test.ts covers the bundles) and
 * lookups from constructs to their resources, roles, policy statements and environments.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { App, type CfnElement } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import type { IConstruct } from "constructs";
import { buildApp } from "../../infra/app";
import type { ControlPlaneStack } from "../../infra/control-plane-stack";

export type Resources = Record<string, { Type: string; Properties: Record<string, unknown>; DependsOn?: string[] }>;

export interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
}

export interface Synthesized {
  app: App;
  stack: ControlPlaneStack;
  template: Template;
  resources: Resources;
  /** The cloud assembly directory; the caller removes it. */
  dir: string;
}

/** The app as `cdk synth` builds it, with `context` added and Lambda bundling skipped. */
export function synthWithoutBundling(context: Record<string, unknown> = {}): Synthesized {
  const dir = mkdtempSync(path.join(tmpdir(), "cdk-out-"));
  const { app, stack } = buildApp(new App({ outdir: dir, context: { "aws:cdk:bundling-stacks": [], ...context } }));
  const template = Template.fromStack(stack);
  return { app, stack, template, resources: template.toJSON().Resources as Resources, dir };
}

export const asArray = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);
export const getAtt = (logicalId: string, attribute = "Arn") => ({ "Fn::GetAtt": [logicalId, attribute] });

export function resourcesFor(statements: Statement[], action: string): unknown[] {
  return statements.filter((s) => asArray(s.Action).includes(action)).flatMap((s) => asArray(s.Resource));
}

export function actionsOf(statements: Statement[]): string[] {
  return statements.flatMap((s) => asArray(s.Action));
}

/** Lookups in one synthesized stack. */
export function stackQueries({ stack, resources }: Pick<Synthesized, "stack" | "resources">) {
  const logicalIdOf = (construct: IConstruct | undefined): string => {
    if (!construct) throw new Error("construct missing");
    const cfn = (construct.node.defaultChild ?? construct) as CfnElement;
    return stack.getLogicalId(cfn);
  };
  /** Statements of every inline policy attached to a role. */
  const statementsOfRole = (roleLogicalId: string): Statement[] =>
    Object.values(resources)
      .filter((r) => r.Type === "AWS::IAM::Policy" && (r.Properties.Roles as unknown[]).some((ref) => JSON.stringify(ref) === JSON.stringify({ Ref: roleLogicalId })))
      .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
  const functionResource = (fnId: string) => {
    const fn = resources[logicalIdOf(stack.functions[fnId])];
    if (!fn) throw new Error(`no function ${fnId}`);
    return fn;
  };
  const roleOfFunction = (fnId: string): string => (functionResource(fnId).Properties.Role as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"][0];
  const statementsOfFunction = (fnId: string): Statement[] => statementsOfRole(roleOfFunction(fnId));
  const envOf = (fnId: string): Record<string, unknown> => (functionResource(fnId).Properties.Environment as { Variables: Record<string, unknown> }).Variables;
  return { logicalIdOf, statementsOfRole, roleOfFunction, statementsOfFunction, envOf };
}
