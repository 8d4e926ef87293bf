/**
 * What a first (or a second) `cdk deploy` needs from the template, found by the deploy review
 * (issue 13): schedule and group ordering, secrets retained with the table, alarms that notify
 * someone, the Application Auto Scaling service-linked role, and physical names that let a second
 * stack live in the same account and region.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Template } from "aws-cdk-lib/assertions";
import { DEFAULT_STACK_NAME, METRICS_NAMESPACE, type ControlPlaneStack } from "../../infra/control-plane-stack";
import { stackQueries, synthWithoutBundling, type Resources, type Synthesized } from "./stack-queries";

const dirs: string[] = [];
function synth(context: Record<string, unknown> = {}): Synthesized {
  const s = synthWithoutBundling(context);
  dirs.push(s.dir);
  return s;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let stack: ControlPlaneStack;
let resources: Resources;
let q: ReturnType<typeof stackQueries>;
beforeAll(() => {
  ({ stack, resources } = synth());
  q = stackQueries({ stack, resources });
});

const ofType = (r: Resources, type: string) => Object.entries(r).filter(([, v]) => v.Type === type);

describe("deploy ordering", () => {
  it("the sweeper's schedule depends on its schedule group (created after it, deleted before it)", () => {
    const schedule = resources[stack.getLogicalId(stack.sweeperSchedule)];
    const group = ofType(resources, "AWS::Scheduler::ScheduleGroup").find(([, g]) => String(g.Properties.Name).endsWith("-maintenance"));
    expect(group).toBeDefined();
    expect(schedule?.DependsOn).toContain(group?.[0]);
  });
});

describe("secrets", () => {
  it("the provider credentials and the sandbox access key are retained when the stack is deleted (the retained table needs them)", () => {
    const secrets = ofType(resources, "AWS::SecretsManager::Secret");
    expect(secrets.map(([, s]) => s.Properties.Name).sort()).toEqual([`${stack.stackName}/sandbox-access-key`, `${stack.stackName}/sandbox-providers`]);
    for (const [id] of secrets) {
      const raw = Template.fromStack(stack).toJSON().Resources[id] as { DeletionPolicy?: string; UpdateReplacePolicy?: string };
      expect(raw.DeletionPolicy, id).toBe("Retain");
      expect(raw.UpdateReplacePolicy, id).toBe("Retain");
    }
  });
});

describe("alarms", () => {
  it("every alarm notifies the alarm topic on ALARM and OK; the topic refuses plain HTTP", () => {
    const topicId = q.logicalIdOf(stack.alarmTopic);
    const alarms = ofType(resources, "AWS::CloudWatch::Alarm");
    expect(alarms.length).toBeGreaterThan(40);
    for (const [id, alarm] of alarms) {
      expect(alarm.Properties.AlarmActions, id).toEqual([{ Ref: topicId }]);
      expect(alarm.Properties.OKActions, id).toEqual([{ Ref: topicId }]);
    }
    const policies = ofType(resources, "AWS::SNS::TopicPolicy");
    expect(JSON.stringify(policies)).toContain('"aws:SecureTransport":"false"');
    expect(ofType(resources, "AWS::SNS::Subscription")).toEqual([]);
  });

  it("-c alarmEmail subscribes that address to the topic", () => {
    const { stack: withEmail, resources: r } = synth({ alarmEmail: "ops@example.com" });
    const subs = ofType(r, "AWS::SNS::Subscription");
    expect(subs).toHaveLength(1);
    expect(subs[0]?.[1].Properties).toMatchObject({ Protocol: "email", Endpoint: "ops@example.com", TopicArn: { Ref: withEmail.getLogicalId(withEmail.alarmTopic.node.defaultChild as never) } });
  });
});

describe("Application Auto Scaling service-linked role", () => {
  it("is not created by default (an account that scaled ECS before has it; creating it twice fails)", () => {
    expect(ofType(resources, "AWS::IAM::ServiceLinkedRole")).toEqual([]);
  });

  it("-c createAutoScalingServiceLinkedRole=true creates it before the relay's scalable target", () => {
    const { resources: r } = synth({ createAutoScalingServiceLinkedRole: "true" });
    const roles = ofType(r, "AWS::IAM::ServiceLinkedRole");
    expect(roles).toHaveLength(1);
    expect(roles[0]?.[1].Properties.AWSServiceName).toBe("ecs.application-autoscaling.amazonaws.com");
    const [target] = ofType(r, "AWS::ApplicationAutoScaling::ScalableTarget");
    expect(target?.[1].DependsOn).toContain(roles[0]?.[0]);
  });
});

describe("a second stack in the same account and region", () => {
  /** Every literal physical name the template sets (name-like properties that are plain strings). */
  function physicalNames(r: Resources): string[] {
    const keys = ["Name", "FunctionName", "StateMachineName", "LogGroupName", "TableName", "TopicName", "RoleName", "ClusterName", "ServiceName", "RepositoryName", "GroupName"];
    return Object.values(r).flatMap((res) => keys.map((k) => res.Properties?.[k]).filter((v): v is string => typeof v === "string"));
  }

  it("-c stackName gives every physical name and the metrics namespace the stack's own prefix, none shared with the default stack", () => {
    expect(stack.stackName).toBe(DEFAULT_STACK_NAME);
    const second = synth({ stackName: "SandboxControlPlaneStaging" });
    expect(second.stack.stackName).toBe("SandboxControlPlaneStaging");
    const first = physicalNames(resources);
    const names = physicalNames(second.resources);
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((n) => !n.includes("SandboxControlPlaneStaging"))).toEqual([]);
    expect(names.filter((n) => first.includes(n))).toEqual([]);
    // Functions and the relay publish to the stack's own namespace: alarms and scaling see only their stack.
    const env = stackQueries({ stack: second.stack, resources: second.resources }).envOf("Health");
    expect(env.POWERTOOLS_METRICS_NAMESPACE).toBe(`${METRICS_NAMESPACE}/SandboxControlPlaneStaging`);
    expect(q.envOf("Health").POWERTOOLS_METRICS_NAMESPACE).toBe(METRICS_NAMESPACE);
  });
});
