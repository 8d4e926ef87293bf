/** Lambda entry for PUT /v1/sessions/{id}/proxy-connections/{proxyId} (./proxy-connections.ts). */
import { lambdaEntry } from "../lambda-entry";
import { makePutProxyConnectionHandler } from "./proxy-connections";

export const handler = lambdaEntry(makePutProxyConnectionHandler);
