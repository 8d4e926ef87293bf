/**
 * The provider conformance suite (test/support/provider-conformance.ts) against the Modal
 * provider on the Modal stand-in (test/support/provider-standins/modal-standin.ts), on each
 * sandbox backend: Modal's documented semantics and its SDK's own input checks, with state.
 */
import { afterAll } from "vitest";
import { ModalSandboxProvider } from "../../../functions/providers/modal/modal-provider";
import { describeProviderConformance } from "../../support/provider-conformance";
import { MODAL_STANDIN_BASE_IMAGE, ModalStandIn } from "../../support/provider-standins/modal-standin";
import { removeStandInRoots } from "../../support/provider-standins/standin-machine";

afterAll(() => removeStandInRoots());

const TIMEOUT_SECONDS = 3600;

for (const backend of ["v2", "v1"] as const) {
  let current: ModalStandIn | null = null;
  const make = (): ModalSandboxProvider => {
    const sdk = new ModalStandIn(backend);
    current = sdk;
    return new ModalSandboxProvider(
      sdk,
      // An app that does not exist yet: the provider creates it.
      { appName: `conformance-${backend}`, baseImage: MODAL_STANDIN_BASE_IMAGE, timeoutSeconds: TIMEOUT_SECONDS, sandboxBackend: backend },
      { now: () => sdk.now, readiness: { fetch: sdk.fetch, sleep: async () => undefined } },
    );
  };
  describeProviderConformance({
    name: `modal ${backend} (Modal stand-in)`,
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
}
