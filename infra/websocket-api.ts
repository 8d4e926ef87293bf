/**
 * The WebSocket API (ARCHITECTURE.md §1: clients connect to API Gateway, servers push with
 * `PostToConnection`): one stage, `live`, whose routes are the functions of `WS_ROUTES`.
 *
 * What must stay true: functions know the API by its id only (WS_URL, WS_MANAGEMENT_ENDPOINT and
 * the ManageConnections ARN are built from the id and the literal stage name). Routes and the
 * stage reference the functions; a function referring to a route or to the stage resource would
 * close a dependency cycle.
 */
import { RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import { AccessLogFormat } from "aws-cdk-lib/aws-apigateway";
import { LogGroupLogDestination, WebSocketApi, WebSocketStage, type CfnApi, type WebSocketRoute } from "aws-cdk-lib/aws-apigatewayv2";
import { PolicyStatement, type IRole } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import type { Construct } from "constructs";

export const WS_STAGE_NAME = "live";

export interface WebSocketEndpoint {
  api: WebSocketApi;
  /** `wss://…/live`: what clients connect to (`WS_URL`, reported by `GET /v1/health`). */
  url: string;
  /** `https://…/live`: the Management API endpoint pushes go to (`WS_MANAGEMENT_ENDPOINT`). */
  managementEndpoint: string;
  /** `PostToConnection` on this API's `live` stage, any connection (connection ids exist only at run time). */
  connectionsArn: string;
  /** `DeleteConnection` on the same stage: closing a connection whose API token was revoked or expired. */
  deleteConnectionsArn: string;
}

export function createWebSocketApi(scope: Construct, id: string): WebSocketEndpoint {
  const stack = Stack.of(scope);
  const api = new WebSocketApi(scope, id, { apiName: `${Stack.of(scope).stackName}-websocket`, description: "Sandbox control plane WebSocket API (session clients)" });
  const host = `${api.apiId}.execute-api.${stack.region}.${stack.urlSuffix}`;
  return {
    api,
    url: `wss://${host}/${WS_STAGE_NAME}`,
    managementEndpoint: `https://${host}/${WS_STAGE_NAME}`,
    connectionsArn: stack.formatArn({ service: "execute-api", resource: api.apiId, resourceName: `${WS_STAGE_NAME}/POST/@connections/*` }),
    deleteConnectionsArn: stack.formatArn({ service: "execute-api", resource: api.apiId, resourceName: `${WS_STAGE_NAME}/DELETE/@connections/*` }),
  };
}

/**
 * What pushing to clients takes (`ApiGatewayClientPush` only posts): the Management API endpoint
 * and `execute-api:ManageConnections` on this stage's connections. Without the endpoint the flow
 * dependencies fall back to a push that reports every connection gone, so every pusher needs both.
 */
export function pushGrant(endpoint: WebSocketEndpoint): { environment: Record<string, string>; statement: PolicyStatement } {
  return {
    environment: { WS_MANAGEMENT_ENDPOINT: endpoint.managementEndpoint },
    statement: new PolicyStatement({ actions: ["execute-api:ManageConnections"], resources: [endpoint.connectionsArn] }),
  };
}

/** Acknowledges the one wildcard `pushGrant` puts in a role: the connection id. */
export function acknowledgePushWildcard(role: IRole, endpoint: WebSocketEndpoint): void {
  const stack = Stack.of(endpoint.api);
  const apiLogicalId = stack.getLogicalId(endpoint.api.node.defaultChild as CfnApi);
  Validations.of(role).acknowledge({
    id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<${apiLogicalId}>/${WS_STAGE_NAME}/POST/@connections/*]`,
    reason: "Connection ids exist only at run time; the grant is PostToConnection on this API's live stage and nothing else.",
  });
}

/** `pushGrant` bound to a Lambda function (its environment and its role). */
export function allowPush(fn: LambdaFunction, endpoint: WebSocketEndpoint): void {
  const { environment, statement } = pushGrant(endpoint);
  for (const [name, value] of Object.entries(environment)) fn.addEnvironment(name, value);
  fn.addToRolePolicy(statement);
  if (fn.role) acknowledgePushWildcard(fn.role, endpoint);
}

/**
 * `DeleteConnection` on this stage's connections (issue 14 item 5): `$default` closes a
 * connection whose API token was revoked or has expired when it refuses its frame.
 */
export function allowClosingConnections(fn: LambdaFunction, endpoint: WebSocketEndpoint): void {
  fn.addToRolePolicy(new PolicyStatement({ actions: ["execute-api:ManageConnections"], resources: [endpoint.deleteConnectionsArn] }));
  if (!fn.role) return;
  const stack = Stack.of(endpoint.api);
  const apiLogicalId = stack.getLogicalId(endpoint.api.node.defaultChild as CfnApi);
  Validations.of(fn.role).acknowledge({
    id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<${apiLogicalId}>/${WS_STAGE_NAME}/DELETE/@connections/*]`,
    reason: "Connection ids exist only at run time; the grant is DeleteConnection on this API's live stage and nothing else.",
  });
}

export interface WebSocketStageProps {
  /** Stage-wide throttling (requests and messages per second, burst). */
  throttle: { rateLimit: number; burstLimit: number };
  /**
   * Access logs to a log group of the stack. WebSocket stages can log only once the account's
   * API Gateway CloudWatch Logs role is set (AWS::ApiGateway::Account, one per account and
   * region); without it the stage fails to deploy, so this is opt-in.
   */
  accessLogs: boolean;
  /** Created before the stage, so its first automatic deployment already has them. */
  routes: readonly WebSocketRoute[];
}

export function createWebSocketStage(scope: Construct, endpoint: WebSocketEndpoint, props: WebSocketStageProps): WebSocketStage {
  const accessLogs = props.accessLogs
    ? new LogGroup(scope, "WebSocketAccessLogs", { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY })
    : undefined;
  const stage = new WebSocketStage(scope, "WebSocketStage", {
    webSocketApi: endpoint.api,
    stageName: WS_STAGE_NAME,
    autoDeploy: true,
    throttle: props.throttle,
    ...(accessLogs
      ? {
          accessLogSettings: {
            destination: new LogGroupLogDestination(accessLogs),
            format: AccessLogFormat.custom(
              JSON.stringify({
                requestId: "$context.requestId",
                connectionId: "$context.connectionId",
                eventType: "$context.eventType",
                routeKey: "$context.routeKey",
                status: "$context.status",
                sourceIp: "$context.identity.sourceIp",
                requestTime: "$context.requestTimeEpoch",
                integrationError: "$context.integration.error",
              }),
            ),
          },
        }
      : {}),
  });
  for (const route of props.routes) stage.node.addDependency(route);
  if (!accessLogs) {
    Validations.of(stage).acknowledge({
      id: "AwsSolutions::AwsSolutions-APIG1",
      reason: "WebSocket access logs need the account-wide API Gateway CloudWatch Logs role, which this stack does not own (context webSocketAccessLogs=true turns them on where it is set); every $connect, $disconnect and frame is logged by its handler with the connection id.",
    });
  }
  return stage;
}
