/**
 * The web console's static site (issue 20): its own nested stack (one resource in the root), a
 * private bucket reached through CloudFront's origin access control, `/v1/*` passed to the HTTP
 * API uncached with Authorization forwarded, and a deployment of the console's build with a
 * generated config.json naming the API (the distribution itself) and the WebSocket URL.
 * Synthesized without Lambda bundling; cdk-nag runs on the whole app in control-plane-stack.test.ts.
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { synthWithoutBundling, type Resources, type Synthesized } from "./stack-queries";

let synth: Synthesized;
let resources: Resources;
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

beforeAll(() => {
  synth = synthWithoutBundling();
  resources = Template.fromStack(synth.stack.console).toJSON().Resources as Resources;
});
afterAll(() => rmSync(synth.dir, { recursive: true, force: true }));

describe("the console nested stack", () => {
  it("is one resource in the root stack, which holds no bucket, distribution or deployment of it", () => {
    const rootId = synth.stack.getLogicalId(synth.stack.console.nestedStackResource as never);
    expect(synth.resources[rootId]?.Type).toBe("AWS::CloudFormation::Stack");
    expect(Object.values(synth.resources).filter((r) => ["AWS::CloudFront::Distribution", "Custom::CDKBucketDeployment"].includes(r.Type))).toEqual([]);
  });

  it("keeps the bucket private (no public access, SSE, TLS only) and serves it through origin access control", () => {
    const [[, bucket]] = ofType("AWS::S3::Bucket") as [[string, Resources[string]]];
    expect(bucket.Properties.PublicAccessBlockConfiguration).toEqual({ BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true });
    expect(JSON.stringify(bucket.Properties.BucketEncryption)).toContain("AES256");
    const policy = JSON.stringify(ofType("AWS::S3::BucketPolicy")[0]?.[1].Properties);
    expect(policy).toContain('"aws:SecureTransport":"false"');
    expect(policy).toContain("cloudfront.amazonaws.com");
    expect(ofType("AWS::CloudFront::OriginAccessControl")).toHaveLength(1);
  });

  it("serves index.html at / and passes /v1/* to the HTTP API uncached, with Authorization", () => {
    const [[, dist]] = ofType("AWS::CloudFront::Distribution") as [[string, Resources[string]]];
    const config = dist.Properties.DistributionConfig as { DefaultRootObject: string; CacheBehaviors: Record<string, unknown>[]; Origins: { DomainName: unknown; Id: string }[] };
    expect(config.DefaultRootObject).toBe("index.html");
    const api = config.CacheBehaviors.find((b) => b.PathPattern === "/v1/*");
    expect(api).toMatchObject({ ViewerProtocolPolicy: "https-only", AllowedMethods: ["GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"] });
    const origin = config.Origins.find((o) => o.Id === api?.TargetOriginId);
    expect(JSON.stringify(origin?.DomainName)).toContain(".execute-api.");
    const [[policyId, policy]] = ofType("AWS::CloudFront::CachePolicy") as [[string, Resources[string]]];
    expect(api?.CachePolicyId).toEqual({ Ref: policyId });
    const cfg = policy.Properties.CachePolicyConfig as { DefaultTTL: number; MinTTL: number; ParametersInCacheKeyAndForwardedToOrigin: { HeadersConfig: { Headers: string[] }; QueryStringsConfig: { QueryStringBehavior: string } } };
    expect(cfg.DefaultTTL).toBe(0);
    expect(cfg.MinTTL).toBe(0);
    expect(cfg.ParametersInCacheKeyAndForwardedToOrigin.HeadersConfig.Headers).toContain("Authorization");
    expect(cfg.ParametersInCacheKeyAndForwardedToOrigin.QueryStringsConfig.QueryStringBehavior).toBe("all");
  });

  it("deploys the console build and a config.json with the API (the distribution) and WebSocket URLs, then invalidates", () => {
    const [[, deploy]] = ofType("Custom::CDKBucketDeployment") as [[string, Resources[string]]];
    expect(deploy.Properties.SourceObjectKeys).toHaveLength(2);
    const markers = JSON.stringify(deploy.Properties.SourceMarkers);
    expect(markers).toContain("DomainName"); // the distribution's domain, for apiUrl
    expect(markers).toMatch(/WebSocket|wss:\/\//i); // the WebSocket stage URL, for wsUrl
    expect(deploy.Properties.DistributionPaths).toEqual(["/index.html", "/console/*"]);
    // The staged asset is the console's build: the page, its bundles, no config.json (generated).
    const site = readdirSync(synth.dir).map((d) => join(synth.dir, d)).find((d) => existsSync(join(d, "index.html")) && existsSync(join(d, "console", "app.js")));
    expect(site, "a staged asset with index.html and console/app.js").toBeDefined();
    for (const f of ["console/app.css", "console/terminal.js", "console/terminal.css"]) expect(existsSync(join(site as string, f)), f).toBe(true);
    expect(existsSync(join(site as string, "console", "config.json"))).toBe(false);
  });
});
