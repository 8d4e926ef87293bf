/**
 * The provider conformance suite (test/support/provider-conformance.ts) against the E2B provider
 * on the E2B stand-in (test/support/provider-standins/e2b-standin.ts): E2B's documented semantics
 * with state, including sandboxes that come back from a snapshot with their processes running.
 */
import { afterAll } from "vitest";
import { E2BSandboxProvider } from "../../../functions/providers/e2b/e2b-provider";
import { describeProviderConformance } from "../../support/provider-conformance";
import { E2BStandIn } from "../../support/provider-standins/e2b-standin";
import { removeStandInRoots } from "../../support/provider-standins/standin-machine";

afterAll(() => removeStandInRoots());

const TEMPLATE = "sandbox:standin";
const TIMEOUT_SECONDS = 3600;
let current: E2BStandIn | null = null;

function make(): E2BSandboxProvider {
  const sdk = new E2BStandIn([TEMPLATE]);
  current = sdk;
  return new E2BSandboxProvider(sdk, { template: TEMPLATE, timeoutSeconds: TIMEOUT_SECONDS }, { now: () => sdk.now, readiness: { fetch: sdk.fetch, sleep: async () => undefined } });
}

describeProviderConformance({
  name: "e2b (E2B stand-in)",
  make,
  now: () => current?.now ?? 0,
  fetch: async (url, headers) => {
    if (!current) throw new Error("no stand-in");
    return current.fetch(url, headers ? { headers } : undefined);
  },
  expiry: {
    make,
    expire: async () => {
      current?.advance(TIMEOUT_SECONDS * 1_000);
    },
  },
});
