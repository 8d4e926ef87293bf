/**
 * The API document's route (API.md v1.1 "Clients"; issue 20): `GET /v1/openapi.json`, in a
 * nested stack of its own (infra/api-docs-stack.ts), not in the root stack's route table
 * (functions/http/routes.ts): CloudFormation's 500-resource limit.
 */
export const API_DOC_ROUTES = [{ id: "GetOpenApiDocument", method: "GET", path: "/v1/openapi.json" }] as const;
