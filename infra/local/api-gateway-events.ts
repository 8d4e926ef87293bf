/**
 * Builds API Gateway HTTP API (payload format 2.0) events from local requests, so the local
 * runtime calls the very same Lambda handlers with the very same event shape as AWS.
 */
import { randomUUID } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { APIGatewayProxyEventV2, Context } from "aws-lambda";

export interface LocalRequest {
  method: string;
  /** Path and query string as received. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  sourceIp: string;
}

export function buildHttpApiEvent(req: LocalRequest, routeKey: string, pathParameters: Record<string, string> | undefined): APIGatewayProxyEventV2 {
  const url = new URL(req.url, "http://local");
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (lower === "cookie") cookies.push(...String(value).split(/;\s*/));
    else headers[lower] = Array.isArray(value) ? value.join(",") : value;
  }
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) query[k] = k in query ? `${query[k]},${v}` : v;
  const now = new Date();
  const contentType = headers["content-type"] ?? "";
  const isText = req.body.length === 0 || /json|text|x-www-form-urlencoded|xml/i.test(contentType) || !contentType;
  return {
    version: "2.0",
    routeKey,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    ...(cookies.length ? { cookies } : {}),
    headers,
    ...(Object.keys(query).length ? { queryStringParameters: query } : {}),
    ...(pathParameters && Object.keys(pathParameters).length ? { pathParameters } : {}),
    requestContext: {
      accountId: "000000000000",
      apiId: "local",
      domainName: headers.host ?? "localhost",
      domainPrefix: "local",
      http: {
        method: req.method,
        path: url.pathname,
        protocol: "HTTP/1.1",
        sourceIp: req.sourceIp,
        userAgent: headers["user-agent"] ?? "",
      },
      requestId: randomUUID(),
      routeKey,
      stage: "$default",
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(req.body.length ? { body: isText ? req.body.toString("utf8") : req.body.toString("base64") } : {}),
    isBase64Encoded: !isText,
  };
}

export function buildLambdaContext(functionName: string, requestId: string): Context {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: "256",
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: "local",
    getRemainingTimeInMillis: () => 30_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
