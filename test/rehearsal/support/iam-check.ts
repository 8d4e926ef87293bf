/**
 * Checks an AWS call against a role of the synthesized template with an IAM policy simulator
 * (@cloud-copilot/iam-simulate): the role's identity policies (every AWS::IAM::Policy attached
 * to it, its inline `Policies`), with intrinsics resolved to the rehearsal's fake account, and
 * the resource's policy where the service has one the template declares (a KMS key policy).
 */
import { runSimulation, type Simulation } from "@cloud-copilot/iam-simulate";
import { ACCOUNT, resourcesOfType, type Assembly, type TemplateResolver } from "./assembly";

export interface IamRequest {
  action: string;
  resource: string;
  context?: Record<string, string | string[]>;
}

export interface IamDecision {
  allowed: boolean;
  /** The simulator's overall result (`Allowed`, `ImplicitlyDenied`, `ExplicitlyDenied`) or its validation errors. */
  detail: string;
}

type PolicyDocument = { Version?: string; Statement: unknown[] };

/**
 * The simulator validates context keys against the service's condition keys and matches a
 * variable key only in its `prefix/<name>` form (`aws:RequestTag/<tag>`), so it ignores KMS's
 * `kms:EncryptionContext:<key>` (and a policy's `Null` on one would never see it set). The same
 * string semantics under a name it does resolve: each `kms:EncryptionContext:<key>`, in the
 * request's context and in every condition of the policies, becomes `aws:RequestTag/<key>`.
 * Any context key the simulator still ignores fails the check (nothing is silently dropped).
 */
const ENCRYPTION_CONTEXT_KEY = /^kms:EncryptionContext:(.+)$/i;
const asSimulatorKey = (key: string): string => {
  const m = ENCRYPTION_CONTEXT_KEY.exec(key);
  return m ? `aws:RequestTag/${m[1]}` : key;
};

function withSimulatorKeys(policy: PolicyDocument): PolicyDocument {
  const statements = policy.Statement.map((statement) => {
    const st = statement as { Condition?: Record<string, Record<string, unknown>> };
    if (!st.Condition) return statement;
    const condition = Object.fromEntries(Object.entries(st.Condition).map(([op, keys]) => [op, Object.fromEntries(Object.entries(keys).map(([k, v]) => [asSimulatorKey(k), v]))]));
    return { ...st, Condition: condition };
  });
  return { ...policy, Statement: statements };
}

export class IamChecker {
  private readonly policies = new Map<string, { name: string; policy: PolicyDocument }[]>();

  /** `root`: a nested stack's checker looks up the root's KMS key policies (a key the root declares, granted in a nested role). */
  constructor(
    private readonly assembly: Assembly,
    private readonly resolver: TemplateResolver,
    private readonly root?: IamChecker,
  ) {}

  /** The identity policies of a role, by the role's logical id. */
  policiesOfRole(roleLogicalId: string): { name: string; policy: PolicyDocument }[] {
    const cached = this.policies.get(roleLogicalId);
    if (cached) return cached;
    const role = this.assembly.resources[roleLogicalId];
    if (!role || role.Type !== "AWS::IAM::Role") throw new Error(`${roleLogicalId} is no role of the template`);
    if (role.Properties.ManagedPolicyArns) throw new Error(`${roleLogicalId} has managed policies: the rehearsal cannot resolve them`);
    const out: { name: string; policy: PolicyDocument }[] = [];
    for (const inline of (role.Properties.Policies ?? []) as { PolicyName: string; PolicyDocument: unknown }[]) {
      out.push({ name: inline.PolicyName, policy: this.resolver.resolve(inline.PolicyDocument) as PolicyDocument });
    }
    for (const [id, policy] of resourcesOfType(this.assembly, "AWS::IAM::Policy")) {
      const roles = (policy.Properties.Roles ?? []) as unknown[];
      if (!roles.some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleLogicalId }))) continue;
      out.push({ name: id, policy: this.resolver.resolve(policy.Properties.PolicyDocument) as PolicyDocument });
    }
    this.policies.set(roleLogicalId, out);
    return out;
  }

  roleArn(roleLogicalId: string): string {
    return this.resolver.getAtt(roleLogicalId, "Arn");
  }

  /** The key policy of the KMS key with this ARN, when the template declares the key. */
  resourcePolicy(resource: string): PolicyDocument | undefined {
    for (const [id, key] of resourcesOfType(this.assembly, "AWS::KMS::Key")) {
      if (this.resolver.getAtt(id, "Arn") === resource) return this.resolver.resolve(key.Properties.KeyPolicy) as PolicyDocument;
    }
    return this.root?.resourcePolicy(resource);
  }

  /**
   * May a service (API Gateway) invoke a function, by the function's resource policy: every
   * AWS::Lambda::Permission of the template on that function, as the statements Lambda builds
   * from them (the service principal, `aws:SourceArn` and `aws:SourceAccount` conditions).
   */
  async checkInvoke(functionArn: string, service: string, sourceArn: string): Promise<IamDecision> {
    const statements = resourcesOfType(this.assembly, "AWS::Lambda::Permission")
      .map(([, permission]) => this.resolver.resolve(permission.Properties) as { Action: string; FunctionName: string; Principal: string; SourceArn?: string; SourceAccount?: string })
      .filter((p) => p.FunctionName === functionArn)
      .map((p) => ({
        Effect: "Allow",
        Principal: p.Principal.endsWith(".amazonaws.com") ? { Service: p.Principal } : { AWS: p.Principal },
        Action: p.Action,
        Resource: functionArn,
        ...(p.SourceArn || p.SourceAccount
          ? { Condition: { ...(p.SourceArn ? { ArnLike: { "AWS:SourceArn": p.SourceArn } } : {}), ...(p.SourceAccount ? { StringEquals: { "AWS:SourceAccount": p.SourceAccount } } : {}) } }
          : {}),
      }));
    if (statements.length === 0) return { allowed: false, detail: "the function has no resource policy (no AWS::Lambda::Permission)" };
    const result = await runSimulation(
      {
        request: { principal: service, action: "lambda:InvokeFunction", resource: { resource: functionArn, accountId: ACCOUNT }, contextVariables: { "aws:SourceArn": sourceArn, "aws:SourceAccount": ACCOUNT } },
        identityPolicies: [],
        serviceControlPolicies: [],
        resourceControlPolicies: [],
        resourcePolicy: { Version: "2012-10-17", Statement: statements },
      },
      {},
    );
    if (result.resultType === "error") return { allowed: false, detail: `simulator refused the request: ${JSON.stringify(result.errors)}` };
    return { allowed: result.overallResult === "Allowed", detail: result.overallResult };
  }

  async check(roleLogicalId: string, request: IamRequest): Promise<IamDecision> {
    const resourcePolicy = this.resourcePolicy(request.resource);
    const context = Object.fromEntries(Object.entries(request.context ?? {}).map(([k, v]) => [asSimulatorKey(k), v]));
    const simulation: Simulation = {
      request: {
        principal: this.roleArn(roleLogicalId),
        action: request.action,
        resource: { resource: request.resource, accountId: ACCOUNT },
        contextVariables: context,
      },
      identityPolicies: this.policiesOfRole(roleLogicalId).map((p) => ({ name: p.name, policy: withSimulatorKeys(p.policy) })),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(resourcePolicy ? { resourcePolicy: withSimulatorKeys(resourcePolicy) } : {}),
    };
    const result = await runSimulation(simulation, {});
    if (result.resultType === "error") return { allowed: false, detail: `simulator refused the request: ${JSON.stringify(result.errors)}` };
    const ignored = result.resultType === "single" ? (result.result.ignoredContextKeys ?? []) : result.results.flatMap((r) => r.ignoredContextKeys ?? []);
    if (ignored.length) return { allowed: false, detail: `simulator ignored context keys ${ignored.join(", ")}` };
    return { allowed: result.overallResult === "Allowed", detail: result.overallResult };
  }
}
