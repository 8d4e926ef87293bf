/**
 * Lambda entry of the `/v1/automations` routes (one route-group function: infra/automations-stack.ts).
 * A run ended here (run now or the webhook trigger whose session cannot start) has its
 * notifications awaited before the response (settle-notifications.ts).
 */
import { awsRuntime } from "../composition/lambda";
import { composeAwsAutomations } from "../composition/automations-aws";
import type { AutomationComposition } from "../composition/automations";
import { processEnvironment } from "../config/config";
import type { HttpDeps, HttpHandler } from "../http/http-handler";
import { lambdaRouteGroup } from "../http/lambda-entry";
import { AUTOMATION_ROUTES, makeAutomationHandlers, type AutomationRouteId } from "./automation-routes";
import { settlingNotifications } from "./settle-notifications";

let parts: AutomationComposition | undefined;
const route =
  (id: AutomationRouteId) =>
  (deps: HttpDeps): HttpHandler => {
    parts ??= composeAwsAutomations(awsRuntime(), processEnvironment());
    return makeAutomationHandlers(parts)[id](deps);
  };

export const ROUTES = Object.fromEntries(AUTOMATION_ROUTES.map((r) => [`${r.method} ${r.path}`, route(r.id)]));

export const handler = settlingNotifications(lambdaRouteGroup(ROUTES), () => parts?.notifier);
