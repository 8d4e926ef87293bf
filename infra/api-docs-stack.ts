/**
 * The API's OpenAPI document (`GET /v1/openapi.json`, issue 20) in a CloudFormation nested stack
 * of its own, because the root stack is close to CloudFormation's 500-resource limit: one
 * function (no table access, no secrets: the document is built from the contract's schemas and
 * the route tables) and its route on the root's HTTP API.
 */
import { Duration, NestedStack, type NestedStackProps } from "aws-cdk-lib";
import { HttpMethod, HttpRoute, HttpRouteKey, type HttpApi } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { Table } from "aws-cdk-lib/aws-dynamodb";
import type { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { Validations } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { API_DOC_ROUTES } from "../functions/api-docs/routes";
import { createHandlerFunction } from "./handler-function";

export interface ApiDocsStackProps extends NestedStackProps {
  table: Table;
  httpApi: HttpApi;
  /** The functions' base environment (the runtime every HTTP handler is composed from reads it). */
  environment: Record<string, string>;
}

export class ApiDocsStack extends NestedStack {
  readonly openApi: NodejsFunction;

  constructor(scope: Construct, id: string, props: ApiDocsStackProps) {
    super(scope, id, { ...props, description: "The API's OpenAPI document, GET /v1/openapi.json (issue 20)" });
    this.openApi = createHandlerFunction(this, {
      id: "OpenApiDocument",
      entry: "functions/api-docs/openapi-entry.ts",
      purpose: "the OpenAPI document route (GET /v1/openapi.json)",
      alarmDescription: "OpenApiDocument handler threw (5xx) in the last 5 minutes",
      environment: { ...props.environment, NODE_OPTIONS: "--enable-source-maps" },
      memorySize: 512,
      timeout: Duration.seconds(10),
      table: props.table,
      tableAccess: "none",
    });
    const integration = new HttpLambdaIntegration("OpenApiDocumentIntegration", this.openApi);
    for (const route of API_DOC_ROUTES) {
      const r = new HttpRoute(this, `${route.id}Route`, { httpApi: props.httpApi, routeKey: HttpRouteKey.with(route.path, HttpMethod[route.method]), integration });
      Validations.of(r).acknowledge({
        id: "AwsSolutions::AwsSolutions-APIG4",
        reason: "The OpenAPI document is public by design (like GET /v1/health): it describes the API and holds no secret and no org data.",
      });
    }
  }
}
