/**
 * POST /v1/sessions/{id}/sidecar-access: short-lived access to the session's sidecar (the
 * in-sandbox API: services, logs, port exposure, git views, the terminal; sandbox/sidecar).
 *
 * The sandbox holds its session's sandbox key (SIDECAR_TOKEN, injected at create and never
 * returned by any route); this route signs an access token with it for a caller who may use
 * the session, valid for `ttlSeconds` (default SIDECAR_ACCESS_TTL_SECONDS, at most one hour).
 * The sidecar verifies the token itself. Only a running session has a sandbox to open: any
 * other status is 409 and nothing changes. Minting access is not activity (it does not keep
 * the sandbox awake); a terminal or editor the caller then opens registers as a proxy
 * connection (PUT …/proxy-connections/{proxyId}).
 */
import * as z from "zod";
import { ConflictError } from "../../domain/errors";
import { SessionId } from "../../domain/session";
import { mintAccessToken } from "../../../sandbox/shared/access-token";
import { httpRoute } from "../http-handler";
import { loadOwnedSession, requirePrincipal } from "../session-access";

export const SIDECAR_ACCESS_MAX_TTL_SECONDS = 3600;

export const SidecarAccessBody = z
  .object({ ttlSeconds: z.number().int().min(60).max(SIDECAR_ACCESS_MAX_TTL_SECONDS).optional() })
  .strict();

export const makeSidecarAccessHandler = httpRoute(
  { name: "CreateSidecarAccess", auth: true, params: z.object({ id: SessionId }).strict(), body: SidecarAccessBody },
  async ({ params, body, principal }, deps) => {
    const session = await loadOwnedSession(deps.sessions, requirePrincipal(principal), params.id);
    if (session.status !== "running" || !session.sandboxId) {
      throw new ConflictError(`session is ${session.status}: sidecar access needs a running sandbox (resume the session first)`);
    }
    const provider = await deps.provider(session.provider);
    const tunnels = await provider.resolveTunnels(session.sandboxId);
    if (!tunnels.sidecarUrl) throw new ConflictError(`the ${session.provider} sandbox of session ${session.id} exposes no sidecar`);
    const nowSeconds = Math.floor(deps.now().getTime() / 1000);
    const ttl = Math.min(body.ttlSeconds ?? deps.config.SIDECAR_ACCESS_TTL_SECONDS, SIDECAR_ACCESS_MAX_TTL_SECONDS);
    const token = mintAccessToken(await deps.sandboxKeys.sandboxKey(session.id), { sid: session.id, iat: nowSeconds, exp: nowSeconds + ttl });
    const url = tunnels.sidecarUrl.replace(/\/+$/, "");
    return {
      status: 201,
      headers: { "cache-control": "no-store" },
      body: {
        sidecarAccess: {
          sandboxId: session.sandboxId,
          url,
          terminalUrl: `${url.replace(/^http/, "ws")}/terminal`,
          token,
          expiresAt: new Date((nowSeconds + ttl) * 1000).toISOString(),
        },
      },
    };
  },
);
