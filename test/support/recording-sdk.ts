/**
 * Records every call a provider makes on an SDK surface (a stand-in from ./provider-standins),
 * without changing what the calls do: `recordSdk(standIn, calls)` returns a proxy whose method
 * calls, namespaces included (`sandboxes.create`, `images.delete`), are appended to `calls` with
 * their arguments, and whose results that are sandbox handles (objects with a `sandboxId`) are
 * recorded too, as `sandbox.<method>` (`sandbox.exec`, `sandbox.files.write`) with the handle's id.
 * Tests assert the exact calls a flow made at the SDK surface.
 */

export interface SdkCall {
  /** `apps.fromName`, `sandboxes.create`, `sandbox.exec`, `createSnapshot`, ... */
  method: string;
  /** The handle's id for `sandbox.*` calls. */
  sandboxId?: string;
  args: unknown[];
}

/** A sandbox handle (methods to call), not a description of one (`getInfo`'s data). */
function isHandle(value: unknown): value is { sandboxId: string } {
  if (typeof value !== "object" || value === null || typeof (value as { sandboxId?: unknown }).sandboxId !== "string") return false;
  return Object.values(value).some((v) => typeof v === "function" || (isPlainObject(v) && Object.values(v).some((w) => typeof w === "function")));
}

function isPlainObject(value: unknown): value is object {
  return typeof value === "object" && value !== null && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null);
}

function wrapResult(result: unknown, calls: SdkCall[]): unknown {
  if (result instanceof Promise) return result.then((r) => wrapResult(r, calls));
  if (isHandle(result)) return record(result, calls, "sandbox", result.sandboxId);
  return result;
}

function record<T extends object>(target: T, calls: SdkCall[], path: string, sandboxId?: string): T {
  return new Proxy(target, {
    get(obj, prop) {
      const value: unknown = Reflect.get(obj, prop);
      if (typeof prop !== "string" || prop === "then") return value;
      const method = path ? `${path}.${prop}` : prop;
      if (typeof value === "function") {
        return (...args: unknown[]) => {
          calls.push({ method, ...(sandboxId ? { sandboxId } : {}), args });
          return wrapResult((value as (...a: unknown[]) => unknown).apply(obj, args), calls);
        };
      }
      // Namespaces (`sandboxes`, `images`, a handle's `files` and `commands`).
      if (isPlainObject(value)) return record(value, calls, method, sandboxId);
      return value;
    },
  });
}

/** `target` with every SDK call recorded into `calls` (the `fetch` of a stand-in's tunnels is not an SDK call: pass the stand-in's own). */
export function recordSdk<T extends object>(target: T, calls: SdkCall[]): T {
  return record(target, calls, "");
}
