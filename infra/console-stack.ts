/**
 * The web console as a static site (API.md "Clients"; issue 20), in a nested stack of its own
 * (the root stack is near CloudFormation's 500-resource limit):
 *
 * - a private S3 bucket (SSE, TLS only, no public access) holding the same build the local runtime
 *   serves (infra/console-build.ts, built at synth), written by a BucketDeployment together with a
 *   generated `console/config.json`: `{apiUrl, wsUrl}`;
 * - a CloudFront distribution: the bucket through origin access control, and `/v1/*` passed
 *   through uncached to the HTTP API, so the console calls its own origin (no CORS on the API).
 *   `apiUrl` is therefore the distribution's URL; `wsUrl` is the WebSocket API's stage URL
 *   (browsers connect cross-origin with a ticket, no CORS involved).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Duration, Fn, NestedStack, RemovalPolicy, Stack, Validations, type NestedStackProps } from "aws-cdk-lib";
import type { HttpApi, WebSocketStage } from "aws-cdk-lib/aws-apigatewayv2";
import { AllowedMethods, CacheHeaderBehavior, CachePolicy, CacheQueryStringBehavior, Distribution, OriginProtocolPolicy, OriginRequestPolicy, ViewerProtocolPolicy } from "aws-cdk-lib/aws-cloudfront";
import { HttpOrigin, S3BucketOrigin } from "aws-cdk-lib/aws-cloudfront-origins";
import { BlockPublicAccess, Bucket, BucketEncryption, type CfnBucket } from "aws-cdk-lib/aws-s3";
import { BucketDeployment, Source } from "aws-cdk-lib/aws-s3-deployment";
import type { Construct } from "constructs";
import { writeConsoleSync } from "./console-build";

export interface ConsoleStackProps extends NestedStackProps {
  httpApi: HttpApi;
  webSocketStage: WebSocketStage;
}

export class ConsoleStack extends NestedStack {
  readonly bucket: Bucket;
  readonly distribution: Distribution;
  readonly deployment: BucketDeployment;

  constructor(scope: Construct, id: string, props: ConsoleStackProps) {
    super(scope, id, props);

    this.bucket = new Bucket(this, "Site", {
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      encryption: BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      removalPolicy: RemovalPolicy.DESTROY,
      autoDeleteObjects: true,
    });

    // The API's requests pass through: every method, the query string, Authorization (a header
    // CloudFront forwards only when the cache policy names it), nothing cached (the API answers
    // `cache-control: no-store`; the policy's TTLs are 0 by default).
    const apiPolicy = new CachePolicy(this, "ApiPassThrough", {
      comment: "Console: /v1/* to the HTTP API, uncached, Authorization forwarded",
      defaultTtl: Duration.seconds(0),
      minTtl: Duration.seconds(0),
      maxTtl: Duration.seconds(1),
      headerBehavior: CacheHeaderBehavior.allowList("Authorization", "Idempotency-Key"),
      queryStringBehavior: CacheQueryStringBehavior.all(),
    });
    const apiDomain = `${props.httpApi.apiId}.execute-api.${Stack.of(this).region}.amazonaws.com`;
    this.distribution = new Distribution(this, "Distribution", {
      comment: "Web console",
      defaultRootObject: "index.html",
      defaultBehavior: { origin: S3BucketOrigin.withOriginAccessControl(this.bucket), viewerProtocolPolicy: ViewerProtocolPolicy.REDIRECT_TO_HTTPS },
      additionalBehaviors: {
        "/v1/*": {
          origin: new HttpOrigin(apiDomain, { protocolPolicy: OriginProtocolPolicy.HTTPS_ONLY }),
          viewerProtocolPolicy: ViewerProtocolPolicy.HTTPS_ONLY,
          allowedMethods: AllowedMethods.ALLOW_ALL,
          cachePolicy: apiPolicy,
          originRequestPolicy: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
        },
      },
    });

    const siteDir = mkdtempSync(join(tmpdir(), "console-site-"));
    writeConsoleSync(siteDir);
    this.deployment = new BucketDeployment(this, "Deploy", {
      destinationBucket: this.bucket,
      sources: [
        Source.asset(siteDir),
        Source.jsonData("console/config.json", { apiUrl: `https://${this.distribution.distributionDomainName}`, wsUrl: Fn.join("", [props.webSocketStage.url]) }),
      ],
      distribution: this.distribution,
      distributionPaths: ["/index.html", "/console/*"],
      memoryLimit: 256,
    });

    Validations.of(this).acknowledge(
      { id: "AwsSolutions::AwsSolutions-S1", reason: "The console bucket holds only the public build of the console (HTML, JS, CSS, config.json with public URLs); reads go through CloudFront only, and its logs would hold nothing an audit needs." },
      { id: "AwsSolutions::AwsSolutions-CFR1", reason: "The console is served to every region the API serves; geo restriction belongs to the operator's policy, not to the default stack." },
      { id: "AwsSolutions::AwsSolutions-CFR2", reason: "The distribution serves static files and passes /v1/* to the HTTP API, whose stage throttles and token auth protect it; a WAF web ACL costs more than the whole idle stack and is an operator's choice." },
      { id: "AwsSolutions::AwsSolutions-CFR3", reason: "Access logs would need a log bucket with ACLs enabled; the API's own access logs (HttpApiAccessLogs) already record every /v1 call that passes through." },
      { id: "AwsSolutions::AwsSolutions-CFR4", reason: "The default *.cloudfront.net certificate does not allow choosing the minimum TLS version; an operator with a custom domain sets TLSv1.2_2021 with its certificate." },
      { id: "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]", reason: "The CDK's BucketDeployment and auto-delete custom resources run with the basic execution role (logs only); their code is the CDK's." },
      ...[
        "Resource::*",
        "Action::s3:GetObject*",
        "Action::s3:GetBucket*",
        "Action::s3:List*",
        "Action::s3:DeleteObject*",
        "Action::s3:Abort*",
        "Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
        `Resource::<${this.getLogicalId(this.bucket.node.defaultChild as CfnBucket)}.Arn>/*`,
      ].map((finding) => ({
        id: `AwsSolutions::AwsSolutions-IAM5[${finding}]`,
        reason: "The CDK's BucketDeployment role copies the build from the CDK asset bucket to the console bucket (object wildcards are inherent to copying a directory) and invalidates this distribution (CloudFront invalidation has no resource-level permission).",
      })),
      { id: "AwsSolutions::AwsSolutions-L1", reason: "The BucketDeployment and auto-delete functions are the CDK's own singleton handlers; their runtime moves with the CDK version." },
    );
  }
}
