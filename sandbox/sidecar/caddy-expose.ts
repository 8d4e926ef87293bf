/**
 * Exposes a sandbox port on the preview proxy through Caddy's admin API (seed 003 §6.10
 * `exposePort`). The sidecar owns one route, tagged `@id: sidecar-expose`, placed first in the
 * preview server's routes so it wins over the default multi-port fallback:
 *   - if Caddy already has that route: `PATCH /id/sidecar-expose` replaces its upstream;
 *   - otherwise it is inserted at index 0 of the server listening on the preview port (20000),
 *     or of the only/first HTTP server when none listens there.
 * The route never matches the sidecar's own path on the preview proxy (`/_sandbox/sidecar/*`, the
 * Caddyfile's `handle_path`): placed first, an unmatched route would take every request and the
 * control plane would lose the sidecar as soon as a port is exposed.
 * The boot sequence needs nothing special in its Caddyfile; only the admin API must be enabled.
 */
import { unavailable } from "./errors";

export const EXPOSE_ROUTE_ID = "sidecar-expose";
/**
 * Where the preview proxy serves the sidecar (sandbox/image/Caddyfile: `handle_path
 * /_sandbox/sidecar/*`); a unit test pins the two equal.
 */
export const SIDECAR_PROXY_PREFIX = "/_sandbox/sidecar";
/** seed 003 §4 "Standard Ports": the Caddy preview proxy. */
const PREVIEW_PORT = 20000;
const ADMIN_TIMEOUT_MS = 5_000;

export function exposeRoute(port: number): Record<string, unknown> {
  return {
    "@id": EXPOSE_ROUTE_ID,
    // Everything but the sidecar's own path (Caddy JSON: a `not` matcher around a `path` matcher).
    match: [{ not: [{ path: [`${SIDECAR_PROXY_PREFIX}/*`] }] }],
    handle: [{ handler: "reverse_proxy", upstreams: [{ dial: `127.0.0.1:${port}` }] }],
  };
}

type CaddyServers = Record<string, { listen?: string[] }>;

/** The preview server's name: the one listening on :20000, else the first. */
export function previewServerName(servers: CaddyServers): string | null {
  const names = Object.keys(servers);
  const preview = names.find((n) => (servers[n]?.listen ?? []).some((l) => l.endsWith(`:${PREVIEW_PORT}`)));
  return preview ?? names[0] ?? null;
}

async function admin(base: string, method: string, path: string, body?: unknown): Promise<Response> {
  try {
    return await fetch(`${base.replace(/\/+$/, "")}${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(ADMIN_TIMEOUT_MS),
    });
  } catch (err) {
    throw unavailable(`Caddy admin API unreachable: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function expectOk(res: Response, what: string): Promise<void> {
  if (res.ok) return;
  const text = (await res.text()).slice(0, 300);
  throw unavailable(`Caddy admin API refused ${what}: ${res.status} ${text}`);
}

export async function exposePort(caddyAdminUrl: string | undefined, port: number): Promise<void> {
  if (!caddyAdminUrl) throw unavailable("port exposure is unavailable: CADDY_ADMIN_URL is not configured");
  const route = exposeRoute(port);
  const existing = await admin(caddyAdminUrl, "GET", `/id/${EXPOSE_ROUTE_ID}`);
  if (existing.ok) {
    await expectOk(await admin(caddyAdminUrl, "PATCH", `/id/${EXPOSE_ROUTE_ID}`, route), "the route update");
    return;
  }
  await existing.text();
  const serversRes = await admin(caddyAdminUrl, "GET", "/config/apps/http/servers");
  await expectOk(serversRes, "the server listing");
  const servers = ((await serversRes.json()) ?? {}) as CaddyServers;
  const server = previewServerName(servers);
  if (server === null) throw unavailable("Caddy has no HTTP server to expose the port on");
  // PUT on an array index inserts before it: the route becomes the first one matched.
  const put = await admin(caddyAdminUrl, "PUT", `/config/apps/http/servers/${encodeURIComponent(server)}/routes/0`, route);
  await expectOk(put, "the route insertion");
}
