/**
 * GET /v1/health (API Gateway HTTP API route, no auth).
 * Answers `{ok: true, wsUrl}` so clients learn where the WebSocket API lives.
 */
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";

export const makeHealthHandler = httpRoute({ name: "Health", auth: false }, async (_req, deps) => ({
  status: 200,
  body: { ok: true, wsUrl: deps.config.WS_URL || null },
}));

export const handler = lambdaEntry(makeHealthHandler);
