/** Lambda entry of the SandboxAgentTools route group (routes.ts; handlers in ./sandbox-agent-tools.ts). */
import { lambdaRouteGroup } from "../lambda-entry";
import {
  makeSandboxEnvFilesHandler,
  makeSandboxEnvRequestHandler,
  makeSandboxSaveSnapshotHandler,
  makeSandboxServiceCommandsHandler,
  makeSandboxSnapshotStatusHandler,
  makeSandboxVerificationHandler,
} from "./sandbox-agent-tools";

/** Route key -> handler; test/unit/http-route-groups.test.ts keeps it equal to the route table. */
export const ROUTES = {
  "POST /v1/sandbox/snapshots": makeSandboxSaveSnapshotHandler,
  "GET /v1/sandbox/snapshots/{execution}": makeSandboxSnapshotStatusHandler,
  "PUT /v1/sandbox/service-commands": makeSandboxServiceCommandsHandler,
  "PUT /v1/sandbox/env-files": makeSandboxEnvFilesHandler,
  "POST /v1/sandbox/env-requests": makeSandboxEnvRequestHandler,
  "POST /v1/sandbox/verifications": makeSandboxVerificationHandler,
};

export const handler = lambdaRouteGroup(ROUTES);
