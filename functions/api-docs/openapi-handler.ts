/**
 * `GET /v1/openapi.json`: the OpenAPI 3.1 document of the served routes, generated from the
 * contract's zod schemas (functions/contract/openapi.ts) once per container. Unauthenticated,
 * like `GET /v1/health`: it describes the public API and holds no secret and no org data.
 */
import { openApiDocument, type ServedRoute } from "../contract/openapi";
import { httpRoute } from "../http/http-handler";

export function makeOpenApiHandler(served: () => ServedRoute[]) {
  let document: Record<string, unknown> | undefined;
  return httpRoute({ name: "OpenApiDocument", auth: false }, async () => {
    document ??= openApiDocument(served());
    return { status: 200, body: document, headers: { "cache-control": "public, max-age=300" } };
  });
}
