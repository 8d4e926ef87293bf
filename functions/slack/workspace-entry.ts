/** Lambda entry of the Slack workspace routes (`PUT|GET|DELETE /v1/slack/workspace`; infra/slack-stack.ts). */
import { awsRuntime } from "../composition/lambda";
import { composeSlackStore } from "../composition/slack-store";
import type { HttpDeps, HttpHandler } from "../http/http-handler";
import { lambdaRouteGroup } from "../http/lambda-entry";
import type { SlackStore } from "../ports/slack";
import { makeDeleteSlackWorkspaceHandler, makeGetSlackWorkspaceHandler, makePutSlackWorkspaceHandler } from "./workspace-routes";

let store: SlackStore | undefined;
const withStore =
  (make: (store: SlackStore) => (deps: HttpDeps) => HttpHandler) =>
  (deps: HttpDeps): HttpHandler => {
    const rt = awsRuntime();
    store ??= composeSlackStore(rt.doc, rt.config.TABLE_NAME);
    return make(store)(deps);
  };

export const ROUTES = {
  "PUT /v1/slack/workspace": withStore(makePutSlackWorkspaceHandler),
  "GET /v1/slack/workspace": withStore(makeGetSlackWorkspaceHandler),
  "DELETE /v1/slack/workspace": withStore(makeDeleteSlackWorkspaceHandler),
};

export const handler = lambdaRouteGroup(ROUTES);
