/** Lambda entry for DELETE /v1/sessions/{id}/proxy-connections/{proxyId} (./proxy-connections.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makeDeleteProxyConnectionHandler } from "./proxy-connections";

export const handler = lambdaEntry(makeDeleteProxyConnectionHandler);
