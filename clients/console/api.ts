/**
 * The console's calls to the public contract (API.md), and nothing else: the console imports no
 * server code. Until the typed client module (clients/, issue 20) lands, this file is the one place
 * the console builds requests; every view goes through `ConsoleApi`.
 */

export interface SessionView {
  id: string;
  title: string | null;
  status: string;
  clientType?: string;
  pauseReason?: string | null;
  stopReason?: string | null;
  createdAt: string;
  updatedAt?: string;
  [key: string]: unknown;
}

export interface LifecycleEventView {
  eventId: string;
  at: string;
  flow: string;
  outcome: string;
  from: string | null;
  to: string | null;
  reason: string | null;
  actor: string;
  message: string | null;
  timings: Record<string, number>;
}

export interface SidecarAccess {
  url: string;
  terminalUrl: string;
  token: string;
  expiresAt: string;
}

export interface CreateSessionInput {
  title?: string;
  repos?: { url: string; branch?: string }[];
  initialPrompt?: string;
}

/** The API's error body, `{"error": {code, message}}`, as an exception. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Server -> client WebSocket frames the console reads (API.md "WebSocket"); others pass through. */
export type ServerFrame = { type: string; [key: string]: unknown };

export class ConsoleApi {
  /** `apiUrl` "" means the page's own origin (the local runtime serves both). */
  constructor(
    readonly apiUrl: string,
    private readonly token: string,
  ) {}

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${this.apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    const parsed = text ? (JSON.parse(text) as unknown) : undefined;
    if (!res.ok) {
      const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new ApiError(res.status, error?.code ?? "http_error", error?.message ?? `${method} ${path}: ${res.status}`);
    }
    return parsed as T;
  }

  health(): Promise<{ ok: boolean; wsUrl: string | null }> {
    return this.call("GET", "/v1/health");
  }

  async listSessions(): Promise<SessionView[]> {
    return (await this.call<{ items: SessionView[] }>("GET", "/v1/sessions?limit=50")).items;
  }

  async getSession(id: string): Promise<SessionView> {
    return (await this.call<{ session: SessionView }>("GET", `/v1/sessions/${encodeURIComponent(id)}`)).session;
  }

  async createSession(input: CreateSessionInput): Promise<SessionView> {
    return (await this.call<{ session: SessionView }>("POST", "/v1/sessions", { clientType: "web", ...input })).session;
  }

  async action(id: string, action: "pause" | "resume" | "snapshot" | "stop"): Promise<void> {
    if (action === "stop") await this.call("DELETE", `/v1/sessions/${encodeURIComponent(id)}`);
    else await this.call("POST", `/v1/sessions/${encodeURIComponent(id)}/${action}`);
  }

  async events(id: string): Promise<LifecycleEventView[]> {
    return (await this.call<{ items: LifecycleEventView[] }>("GET", `/v1/sessions/${encodeURIComponent(id)}/events?limit=100`)).items;
  }

  async sidecarAccess(id: string): Promise<SidecarAccess> {
    return (await this.call<{ sidecarAccess: SidecarAccess }>("POST", `/v1/sessions/${encodeURIComponent(id)}/sidecar-access`, { ttlSeconds: 900 })).sidecarAccess;
  }

  /**
   * Opens the session's WebSocket with a single-use connect ticket (API.md "WebSocket connect
   * tickets"): the API token never goes into a URL.
   */
  async connect(id: string, wsUrl: string): Promise<WebSocket> {
    const { ticket } = await this.call<{ ticket: string }>("POST", `/v1/sessions/${encodeURIComponent(id)}/ws-ticket`);
    const url = new URL(wsUrl, location.href);
    if (url.protocol === "http:") url.protocol = "ws:";
    if (url.protocol === "https:") url.protocol = "wss:";
    url.searchParams.set("sessionId", id);
    url.searchParams.set("ticket", ticket);
    return new WebSocket(url.toString());
  }
}
