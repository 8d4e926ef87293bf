/**
 * The sidecar's one seam to the control plane (issue 23): git credentials and env values for
 * this session, asked with an access token the sidecar mints per call from the sandbox key
 * (`sca1`, this `SESSION_ID`, 60 s), which the control plane verifies with the session's key.
 * The sandbox key itself never leaves the sandbox.
 *
 * Every failure is a `SidecarError`: 404 `no_credential` (the control plane has none for that
 * repository), else 503 naming what went wrong (not configured, unreachable, the status it
 * answered, a malformed answer). Messages and log fields carry route names and status codes
 * only: never the token, a password or a value, and never the control plane's own error body.
 */
import * as z from "zod";
import { mintAccessToken } from "../shared/access-token";
import { SidecarError } from "./errors";

/** An access token minted for one call lives this long. */
export const CALL_TOKEN_LIFETIME_SECONDS = 60;
export const CONTROL_PLANE_TIMEOUT_MS = 10_000;

export const GIT_CREDENTIAL_ROUTE = "/v1/sandbox/git-credential";
export const ENV_VALUES_ROUTE = "/v1/sandbox/env-values";

export interface GitCredentialRequest {
  protocol: string;
  host: string;
  path?: string | undefined;
}

export interface GitCredential {
  username: string;
  password: string;
  /** Epoch milliseconds; null when the control plane gave no (readable) expiry. */
  expiresAt: number | null;
}

export interface ControlPlaneClientOptions {
  /** `CONTROL_PLANE_URL`; undefined: every call fails 503 `not_configured`. */
  url: string | undefined;
  /** The sandbox key (`SIDECAR_TOKEN`), which signs the per-call access token. */
  sandboxKey: string | undefined;
  sessionId: string | undefined;
  fetch?: typeof fetch;
  /** Epoch milliseconds; default `Date.now`. */
  now?: () => number;
  timeoutMs?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

const CredentialAnswerSchema = z.object({
  credential: z.object({
    username: z.string().min(1),
    password: z.string().min(1),
    expiresAt: z.string().optional(),
  }),
});

const EnvValuesAnswerSchema = z.object({ values: z.record(z.string(), z.string()) });

/** API.md's error shape, as the control plane answers a 4xx. */
const ErrorAnswerSchema = z.object({ error: z.object({ code: z.string(), message: z.string() }) });

/** A 404 the caller accepts as "none" (git credentials). */
class NotFoundAnswer extends Error {
  constructor() {
    super("not found");
    this.name = "NotFoundAnswer";
  }
}

const notConfigured = (what: string) => new SidecarError(503, "not_configured", `${what} is not set: the sidecar cannot reach the control plane`);
const unavailable = (message: string) => new SidecarError(503, "control_plane_unavailable", message);

/** A network failure's errno-like code (ECONNREFUSED, ENOTFOUND, ...) or the abort's name, never a URL or body. */
function failureReason(err: unknown): string {
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) return "timed out";
  const cause = (err as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === "string") return cause.code;
  return err instanceof Error ? err.name : "network error";
}

export class ControlPlaneClient {
  private readonly fetch: typeof fetch;
  private readonly now: () => number;
  private readonly log: NonNullable<ControlPlaneClientOptions["log"]>;

  constructor(private readonly opts: ControlPlaneClientOptions) {
    this.fetch = opts.fetch ?? fetch;
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? (() => undefined);
  }

  /** The credential for a repository, or null when the control plane has none for it (404). */
  async gitCredential(request: GitCredentialRequest): Promise<GitCredential | null> {
    const body = { protocol: request.protocol, host: request.host, ...(request.path ? { path: request.path } : {}) };
    const res = await this.post(GIT_CREDENTIAL_ROUTE, body, { allowNotFound: true });
    if (res === null) return null;
    const parsed = CredentialAnswerSchema.safeParse(await this.json(GIT_CREDENTIAL_ROUTE, res));
    if (!parsed.success) throw unavailable(`the control plane's answer to ${GIT_CREDENTIAL_ROUTE} is malformed`);
    const { username, password, expiresAt } = parsed.data.credential;
    const expiry = expiresAt === undefined ? Number.NaN : Date.parse(expiresAt);
    return { username, password, expiresAt: Number.isFinite(expiry) ? expiry : null };
  }

  /** The session's env values (org secrets), fresh on every call. */
  async envValues(): Promise<Record<string, string>> {
    const res = await this.post(ENV_VALUES_ROUTE, {}, { allowNotFound: false });
    const parsed = EnvValuesAnswerSchema.safeParse(await this.json(ENV_VALUES_ROUTE, res));
    if (!parsed.success) throw unavailable(`the control plane's answer to ${ENV_VALUES_ROUTE} is malformed`);
    return parsed.data.values;
  }

  /**
   * One call of an agent-tool route (sandbox/sidecar/agent-tools.ts): the answer's JSON on 2xx.
   * Unlike the credential routes, a 4xx is relayed with the control plane's own error code and
   * message (they name the field or the state for the agent; they never carry a value), bounded
   * in length; 401/403 and 5xx stay 503 naming only the status.
   */
  async agentToolCall(method: "GET" | "POST" | "PUT", route: string, body?: unknown): Promise<unknown> {
    const res = await this.send(method, route, body, { relayClientErrors: true });
    return this.json(route, res);
  }

  private accessToken(): string {
    const { sandboxKey, sessionId } = this.opts;
    if (!sandboxKey) throw notConfigured("SIDECAR_TOKEN");
    if (!sessionId) throw notConfigured("SESSION_ID");
    const iat = Math.floor(this.now() / 1000);
    return mintAccessToken(sandboxKey, { sid: sessionId, iat, exp: iat + CALL_TOKEN_LIFETIME_SECONDS });
  }

  private async post(route: string, body: unknown, opts: { allowNotFound: true }): Promise<Response | null>;
  private async post(route: string, body: unknown, opts: { allowNotFound: false }): Promise<Response>;
  private async post(route: string, body: unknown, opts: { allowNotFound: boolean }): Promise<Response | null> {
    try {
      return await this.send("POST", route, body, { relayClientErrors: false, allowNotFound: opts.allowNotFound });
    } catch (err) {
      if (err instanceof NotFoundAnswer) return null;
      throw err;
    }
  }

  private async send(method: string, route: string, body: unknown, opts: { relayClientErrors: boolean; allowNotFound?: boolean }): Promise<Response> {
    if (!this.opts.url) throw notConfigured("CONTROL_PLANE_URL");
    const token = this.accessToken();
    let res: Response;
    try {
      res = await this.fetch(`${this.opts.url.replace(/\/+$/, "")}${route}`, {
        method,
        headers: { authorization: `Bearer ${token}`, accept: "application/json", ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? CONTROL_PLANE_TIMEOUT_MS),
      });
    } catch (err) {
      const reason = failureReason(err);
      this.log("control plane unreachable", { route, reason });
      throw unavailable(`the control plane is unreachable (${reason})`);
    }
    this.log("control plane answered", { route, status: res.status });
    if (res.ok) return res;
    if (opts.relayClientErrors && res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403) {
      const answer = ErrorAnswerSchema.safeParse(await res.json().catch(() => null));
      const error = answer.success ? answer.data.error : { code: "rejected", message: `the control plane answered ${res.status} to ${route}` };
      throw new SidecarError(res.status, error.code.slice(0, 64), error.message.slice(0, 1_000));
    }
    // The control plane's error body is not relayed: only its status says what happened.
    await res.body?.cancel().catch(() => undefined);
    if (res.status === 404 && opts.allowNotFound) throw new NotFoundAnswer();
    if (res.status === 401 || res.status === 403) throw unavailable(`the control plane refused the sidecar's access token (${res.status})`);
    throw unavailable(`the control plane answered ${res.status} to ${route}`);
  }

  private async json(route: string, res: Response): Promise<unknown> {
    try {
      return (await res.json()) as unknown;
    } catch {
      throw unavailable(`the control plane's answer to ${route} is not JSON`);
    }
  }
}
