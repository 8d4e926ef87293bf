/**
 * Org secrets in the stack (API.md "Secrets"): the customer-managed KMS key that wraps each
 * secret's data key, and least privilege on it: only what stores values may Encrypt, only what
 * reveals them (the provision step, the sandbox credential routes) may Decrypt, always with the
 * org and name as encryption context; nothing else touches the key or learns its ARN.
 * Synthesized without bundling (cdk-nag runs in control-plane-stack.test.ts).
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Template } from "aws-cdk-lib/assertions";
import type { ControlPlaneStack } from "../../infra/control-plane-stack";
import { FLOW_STEPS } from "../../functions/flows/steps";
import { HTTP_ROUTES } from "../../functions/http/routes";
import { actionsOf, asArray, getAtt, stackQueries, synthWithoutBundling, type Resources, type Statement } from "./stack-queries";

let stack: ControlPlaneStack;
let template: Template;
let resources: Resources;
let outdir: string;
let q: ReturnType<typeof stackQueries>;

beforeAll(() => {
  ({ stack, template, resources, dir: outdir } = synthWithoutBundling());
  q = stackQueries({ stack, resources });
});
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

const keyArn = (): unknown => getAtt(q.logicalIdOf(stack.secretsKey));
const kmsStatements = (statements: Statement[]): Statement[] => statements.filter((s) => asArray(s.Action).some((a) => a.startsWith("kms:")));
const kmsActionsOf = (fnId: string): string[] => actionsOf(kmsStatements(q.statementsOfFunction(fnId))).sort();

describe("secrets key", () => {
  it("is a customer-managed symmetric key with rotation, retained when the stack goes (the table keeps its ciphertexts)", () => {
    const keys = Object.entries(resources).filter(([, r]) => r.Type === "AWS::KMS::Key");
    expect(keys.map(([id]) => id)).toEqual([q.logicalIdOf(stack.secretsKey)]);
    const [, key] = keys[0] ?? ["", undefined];
    expect(key?.Properties).toMatchObject({ EnableKeyRotation: true });
    expect(key?.Properties.KeySpec ?? "SYMMETRIC_DEFAULT").toBe("SYMMETRIC_DEFAULT");
    template.hasResource("AWS::KMS::Key", { DeletionPolicy: "Retain", UpdateReplacePolicy: "Retain" });
  });
});

describe("who may use the secrets key", () => {
  const decrypters = (): string[] => [...HTTP_ROUTES.filter((r) => r.secretAccess === "decrypt").map((r) => r.id), ...FLOW_STEPS.filter((s) => s.secretAccess === "decrypt").map((s) => s.id)];
  const encrypters = (): string[] => HTTP_ROUTES.filter((r) => r.secretAccess === "encrypt").map((r) => r.id);

  it("the secrets routes declare what they do: PUT encrypts, reads and DELETE are metadata only", () => {
    const access = Object.fromEntries(HTTP_ROUTES.filter((r) => r.path.startsWith("/v1/secrets")).map((r) => [r.id, [r.method, r.path, r.secretAccess]]));
    expect(access).toEqual({
      PutSecret: ["PUT", "/v1/secrets/{name}", "encrypt"],
      ListSecrets: ["GET", "/v1/secrets", "metadata"],
      GetSecret: ["GET", "/v1/secrets/{name}", "metadata"],
      DeleteSecret: ["DELETE", "/v1/secrets/{name}", "metadata"],
    });
  });

  it("only the provision step and the routes declared `decrypt` can decrypt; only PUT /v1/secrets can encrypt", () => {
    expect(decrypters()).toContain("ProvisionStep");
    expect(encrypters()).toEqual(["PutSecret"]);
    for (const id of ["PutSecret", "GetSecret", "ListSecrets", "DeleteSecret", "CreateSession", "Sweeper", "ScheduleFired", "SendInit", "WsConnect", "WsDefault", "WsDisconnect", "FinishStep", "SnapshotStep"]) {
      if (stack.functions[id]) expect(decrypters(), id).not.toContain(id);
    }
    for (const id of Object.keys(stack.functions)) {
      const expected = decrypters().includes(id) ? ["kms:Decrypt"] : encrypters().includes(id) ? ["kms:Encrypt"] : [];
      expect(kmsActionsOf(id), id).toEqual(expected);
      expect(q.envOf(id).SECRETS_KMS_KEY_ARN, id).toEqual(expected.length ? keyArn() : undefined);
    }
  });

  it("every grant is on this key only and requires the org and name encryption context", () => {
    const granted = Object.keys(stack.functions).flatMap((id) => kmsStatements(q.statementsOfFunction(id)));
    expect(granted.length).toBeGreaterThanOrEqual(2);
    for (const statement of granted) {
      expect(statement.Resource).toEqual(keyArn());
      expect(statement.Condition).toEqual({
        "ForAllValues:StringEquals": { "kms:EncryptionContextKeys": ["orgId", "name"] },
        Null: { "kms:EncryptionContext:orgId": "false", "kms:EncryptionContext:name": "false" },
      });
    }
  });

  it("no role outside the declared functions may use the key (the relay and the state machines included)", () => {
    // The relay decrypts too: an automation run that ends there signs its webhook notification with the sealed secret.
    const declared = new Set([...[...decrypters(), ...encrypters()].map((id) => q.roleOfFunction(id)), q.logicalIdOf(stack.relay.taskRole)]);
    const kmsPolicies = Object.values(resources)
      .filter((r) => r.Type === "AWS::IAM::Policy")
      .filter((r) => kmsStatements((r.Properties.PolicyDocument as { Statement: Statement[] }).Statement).length > 0)
      .flatMap((r) => (r.Properties.Roles as { Ref: string }[]).map((ref) => ref.Ref));
    expect(new Set(kmsPolicies)).toEqual(declared);
    expect(kmsStatements(q.statementsOfRole(q.logicalIdOf(stack.relay.taskRole))).flatMap((s) => actionsOf([s]))).toEqual(["kms:Decrypt"]);
  });
});
