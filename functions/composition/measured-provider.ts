/**
 * Provider call figures (issue 19): every sandbox provider operation that talks to the provider
 * (PROVIDER_OPERATIONS) is timed, `ProviderCallDuration` by provider and operation, and one that
 * throws also counts `ProviderCallErrors`. One wrapper, applied by the composition root to every
 * runtime's providers (AWS, local, tests), so no provider or caller measures on its own.
 */
import type { ProviderType } from "../domain/session";
import { PROVIDER_OPERATIONS } from "../observability/metric-registry";
import { METRIC_NAMES, type MetricsSink } from "../ports/metrics-sink";
import type { SandboxProvider } from "../ports/sandbox-provider";

const MEASURED: ReadonlySet<PropertyKey> = new Set(PROVIDER_OPERATIONS);

export function measuredProvider(provider: SandboxProvider, metrics: MetricsSink): SandboxProvider {
  return new Proxy(provider, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function" || !MEASURED.has(prop)) return value;
      const operation = String(prop);
      const fn = value as (...args: unknown[]) => Promise<unknown>;
      return async (...args: unknown[]) => {
        const startedAt = performance.now();
        const dimensions = { Provider: target.type, Operation: operation };
        try {
          return await fn.apply(target, args);
        } catch (err) {
          metrics.put(METRIC_NAMES.providerCallErrors, 1, "Count", dimensions);
          throw err;
        } finally {
          metrics.put(METRIC_NAMES.providerCallDuration, performance.now() - startedAt, "Milliseconds", dimensions);
        }
      };
    },
  });
}

/** A runtime's provider factory with every provider it returns measured (one wrapper per provider instance). */
export function measuredProviders(factory: (type: ProviderType) => Promise<SandboxProvider>, metrics: MetricsSink): (type: ProviderType) => Promise<SandboxProvider> {
  const wrapped = new WeakMap<SandboxProvider, SandboxProvider>();
  return async (type) => {
    const provider = await factory(type);
    let measured = wrapped.get(provider);
    if (!measured) {
      measured = measuredProvider(provider, metrics);
      wrapped.set(provider, measured);
    }
    return measured;
  };
}
