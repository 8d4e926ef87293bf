/** Starts the local runtime for end-to-end tests and gives a small JSON client over real sockets. */
import type { SessionRecord } from "../../functions/domain/session";
import { startLocalRuntime, type LocalRuntime, type LocalRuntimeOptions } from "../../infra/local/runtime";
import { waitFor as poll } from "./wait-for";

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

export interface ApiClient {
  request(method: string, path: string, options?: { token?: string | null; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> }): Promise<ApiResponse>;
}

export function apiClient(baseUrl: string, defaultToken: string): ApiClient {
  return {
    async request(method, path, options = {}) {
      const token = options.token === undefined ? defaultToken : options.token;
      const headers: Record<string, string> = { ...(options.headers ?? {}) };
      if (token) headers.authorization = `Bearer ${token}`;
      let body: string | Buffer | undefined;
      if (options.rawBody !== undefined) body = options.rawBody;
      else if (options.body !== undefined) {
        body = JSON.stringify(options.body);
        headers["content-type"] ??= "application/json";
      }
      const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
      const text = await res.text();
      let parsed: unknown = undefined;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: res.status, headers: res.headers, body: parsed, text };
    },
  };
}

export async function startRuntimeForTest(options: LocalRuntimeOptions = {}): Promise<{ runtime: LocalRuntime; api: ApiClient }> {
  const runtime = await startLocalRuntime({ port: 0, ...options });
  return { runtime, api: apiClient(runtime.url, runtime.devApiToken) };
}

/** The e2e shorthand of `waitFor` (./wait-for): `probe` until truthy, every 200 ms, up to `timeoutMs`. */
export function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 90_000): Promise<T> {
  return poll(probe, { message: what, timeoutMs, intervalMs: 200 }) as Promise<T>;
}

/** The stored session (the store, not the API: includes what the view hides). */
export async function storedSession(runtime: LocalRuntime, id: string): Promise<SessionRecord> {
  const s = await runtime.deps.sessions.getSession(id);
  if (!s) throw new Error(`no session ${id}`);
  return s;
}
