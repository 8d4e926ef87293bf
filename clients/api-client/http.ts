/**
 * The typed HTTP client of the public contract (API.md). Runs anywhere with a global `fetch`
 * (Node 20, browsers); no Node imports. Types come from the server's own zod schemas through
 * the contract module (functions/contract), imported for types only.
 */
import type * as C from "../../functions/contract/http";
import type { ServerFrame } from "../../functions/contract/frames";

export type { C as Contract, ServerFrame };

/** An error answer of the API (`{"error": {code, message}}`), or a transport failure (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId?: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export interface ApiClientOptions {
  /** The API's base URL, e.g. `http://localhost:8787` (no trailing `/v1`). */
  baseUrl: string;
  /** The API token (`Authorization: Bearer`). Omitted: only unauthenticated routes work. */
  token?: string;
  /** Another fetch (tests, proxies); default the global one. */
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | undefined | null>;

function queryString(query: Query | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, String(v));
  const text = params.toString();
  return text ? `?${text}` : "";
}

const seg = (id: string): string => encodeURIComponent(id);

export class ApiClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ApiClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetchImpl = options.fetch ?? ((...args) => globalThis.fetch(...args));
  }

  /** One request: JSON in, JSON out; a non-2xx answer throws `ApiError` with the server's code and message. */
  async request<T>(method: string, path: string, options: { body?: unknown; query?: Query; headers?: Record<string, string> } = {}): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json", ...(options.headers ?? {}) };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] = "application/json";
    }
    let res: Response;
    try {
      res = await this.fetchImpl(`${this.baseUrl}${path}${queryString(options.query)}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    } catch (err) {
      throw new ApiError(0, "network_error", `cannot reach ${this.baseUrl}: ${err instanceof Error ? err.message : String(err)}`);
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    if (!res.ok) {
      const error = (parsed as Partial<C.ErrorBody> | undefined)?.error;
      throw new ApiError(res.status, error?.code ?? `http_${res.status}`, error?.message ?? `${method} ${path}: HTTP ${res.status}`, error?.requestId);
    }
    return parsed as T;
  }

  // Meta
  health(): Promise<C.Health> {
    return this.request("GET", "/v1/health");
  }
  openApiDocument(): Promise<Record<string, unknown>> {
    return this.request("GET", "/v1/openapi.json");
  }

  // Sessions
  async createSession(body: C.CreateSessionInput = {}): Promise<C.SessionView> {
    return (await this.request<C.SessionBody>("POST", "/v1/sessions", { body })).session;
  }
  listSessions(query: C.ListSessionsInput = {}): Promise<C.SessionPage> {
    return this.request("GET", "/v1/sessions", { query });
  }
  async getSession(id: string): Promise<C.SessionView> {
    return (await this.request<C.SessionBody>("GET", `/v1/sessions/${seg(id)}`)).session;
  }
  async resumeSession(id: string): Promise<C.SessionView> {
    return (await this.request<C.SessionBody>("POST", `/v1/sessions/${seg(id)}/resume`)).session;
  }
  async pauseSession(id: string): Promise<C.SessionView> {
    return (await this.request<C.SessionBody>("POST", `/v1/sessions/${seg(id)}/pause`)).session;
  }
  async snapshotSession(id: string): Promise<C.SessionView> {
    return (await this.request<C.SessionBody>("POST", `/v1/sessions/${seg(id)}/snapshot`)).session;
  }
  /** `DELETE /v1/sessions/{id}`: terminate, `stopped`. */
  async stopSession(id: string): Promise<C.SessionView> {
    return (await this.request<C.SessionBody>("DELETE", `/v1/sessions/${seg(id)}`)).session;
  }
  async heartbeat(id: string): Promise<void> {
    await this.request("POST", `/v1/sessions/${seg(id)}/heartbeat`);
  }
  /**
   * Queue a prompt. With `idempotencyKey`, a retry of the same request (a lost answer, a
   * reconnect) stores nothing more and answers with the prompt stored first.
   */
  createPrompt(id: string, content: string, options: { idempotencyKey?: string } = {}): Promise<C.PromptBody> {
    const headers: Record<string, string> = options.idempotencyKey ? { "idempotency-key": options.idempotencyKey } : {};
    return this.request("POST", `/v1/sessions/${seg(id)}/prompts`, { body: { content }, headers });
  }
  listMessages(id: string, query: C.PageInput = {}): Promise<C.MessagePage> {
    return this.request("GET", `/v1/sessions/${seg(id)}/messages`, { query });
  }
  /** The whole transcript, oldest first (every page). */
  async allMessages(id: string): Promise<C.MessagePage["items"]> {
    const items: C.MessagePage["items"] = [];
    let cursor: string | undefined;
    do {
      const page = await this.listMessages(id, { limit: 200, ...(cursor ? { cursor } : {}) });
      items.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return items;
  }
  listEvents(id: string, query: C.PageInput = {}): Promise<C.EventPage> {
    return this.request("GET", `/v1/sessions/${seg(id)}/events`, { query });
  }
  /** A single-use WebSocket connect ticket (browsers never put the API token in a URL). */
  createWsTicket(id: string): Promise<C.WsTicket> {
    return this.request("POST", `/v1/sessions/${seg(id)}/ws-ticket`);
  }
  /** A sidecar access token (terminal, editor, preview) for a running session. */
  async createSidecarAccess(id: string, body: C.SidecarAccessInput = {}): Promise<C.SidecarAccessView["sidecarAccess"]> {
    return (await this.request<C.SidecarAccessView>("POST", `/v1/sessions/${seg(id)}/sidecar-access`, { body })).sidecarAccess;
  }

  // Org, usage, limits
  getOrg(): Promise<C.OrgView> {
    return this.request("GET", "/v1/org");
  }
  putOrgLimits(body: C.OrgLimitsInput): Promise<C.OrgView> {
    return this.request("PUT", "/v1/org/limits", { body });
  }
  getUsage(query: C.UsageInput = {}): Promise<C.UsageView> {
    return this.request("GET", "/v1/usage", { query });
  }
  /** The org's default model chain. */
  getOrgModel(): Promise<C.OrgModelView> {
    return this.request("GET", "/v1/org/model");
  }
  /** Set the org's default model chain (admin). */
  putOrgModel(body: C.OrgModelInput): Promise<C.OrgModelView> {
    return this.request("PUT", "/v1/org/model", { body });
  }

  // Secrets (values go in, never come out)
  async putSecret(name: string, body: C.PutSecretInput): Promise<C.SecretView> {
    return (await this.request<{ secret: C.SecretView }>("PUT", `/v1/secrets/${seg(name)}`, { body })).secret;
  }
  async listSecrets(): Promise<C.SecretView[]> {
    return (await this.request<{ items: C.SecretView[] }>("GET", "/v1/secrets")).items;
  }
  async getSecret(name: string): Promise<C.SecretView> {
    return (await this.request<{ secret: C.SecretView }>("GET", `/v1/secrets/${seg(name)}`)).secret;
  }
  async deleteSecret(name: string): Promise<void> {
    await this.request("DELETE", `/v1/secrets/${seg(name)}`);
  }

  // Repositories and prebuilds
  async createRepo(body: C.CreateRepoInput): Promise<C.RepoView> {
    return (await this.request<{ repo: C.RepoView }>("POST", "/v1/repos", { body })).repo;
  }
  listRepos(): Promise<{ items: C.RepoView[]; nextCursor: string | null }> {
    return this.request("GET", "/v1/repos");
  }
  async getRepo(id: string): Promise<C.RepoView> {
    return (await this.request<{ repo: C.RepoView }>("GET", `/v1/repos/${seg(id)}`)).repo;
  }
  async patchRepo(id: string, body: C.PatchRepoInput): Promise<C.RepoView> {
    return (await this.request<{ repo: C.RepoView }>("PATCH", `/v1/repos/${seg(id)}`, { body })).repo;
  }
  async deleteRepo(id: string): Promise<void> {
    await this.request("DELETE", `/v1/repos/${seg(id)}`);
  }
  async refreshRepo(id: string): Promise<C.BuildView[]> {
    return (await this.request<{ builds: C.BuildView[] }>("POST", `/v1/repos/${seg(id)}/refresh`)).builds;
  }
  async createPrebuild(body: C.CreatePrebuildInput): Promise<C.PrebuildView> {
    return (await this.request<{ prebuild: C.PrebuildView }>("POST", "/v1/prebuilds", { body })).prebuild;
  }
  listPrebuilds(): Promise<{ items: C.PrebuildView[]; nextCursor: string | null }> {
    return this.request("GET", "/v1/prebuilds");
  }
  async getPrebuild(id: string): Promise<C.PrebuildView> {
    return (await this.request<{ prebuild: C.PrebuildView }>("GET", `/v1/prebuilds/${seg(id)}`)).prebuild;
  }
  async patchPrebuild(id: string, body: C.PatchPrebuildInput): Promise<C.PrebuildView> {
    return (await this.request<{ prebuild: C.PrebuildView }>("PATCH", `/v1/prebuilds/${seg(id)}`, { body })).prebuild;
  }
  async deletePrebuild(id: string): Promise<void> {
    await this.request("DELETE", `/v1/prebuilds/${seg(id)}`);
  }
  async buildPrebuild(id: string): Promise<C.BuildView> {
    return (await this.request<{ build: C.BuildView }>("POST", `/v1/prebuilds/${seg(id)}/builds`)).build;
  }
  async listPrebuildBuilds(id: string, query: { limit?: number } = {}): Promise<C.BuildView[]> {
    return (await this.request<{ items: C.BuildView[] }>("GET", `/v1/prebuilds/${seg(id)}/builds`, { query })).items;
  }

  // Slack workspace binding
  async putSlackWorkspace(body: C.PutSlackWorkspaceInput): Promise<C.SlackWorkspaceView> {
    return (await this.request<{ workspace: C.SlackWorkspaceView }>("PUT", "/v1/slack/workspace", { body })).workspace;
  }
  async getSlackWorkspace(): Promise<C.SlackWorkspaceView> {
    return (await this.request<{ workspace: C.SlackWorkspaceView }>("GET", "/v1/slack/workspace")).workspace;
  }
  async deleteSlackWorkspace(): Promise<void> {
    await this.request("DELETE", "/v1/slack/workspace");
  }

  // Automations (API.md "Automations")
  /** The answer holds the automation's webhook secret, this once. */
  async createAutomation(body: C.CreateAutomationInput): Promise<C.CreatedAutomationView> {
    return (await this.request<{ automation: C.CreatedAutomationView }>("POST", "/v1/automations", { body })).automation;
  }
  listAutomations(query: C.PageInput = {}): Promise<{ items: C.AutomationView[]; nextCursor: string | null }> {
    return this.request("GET", "/v1/automations", { query });
  }
  async getAutomation(id: string): Promise<C.AutomationView> {
    return (await this.request<{ automation: C.AutomationView }>("GET", `/v1/automations/${seg(id)}`)).automation;
  }
  async patchAutomation(id: string, body: C.PatchAutomationInput): Promise<C.AutomationView> {
    return (await this.request<{ automation: C.AutomationView }>("PATCH", `/v1/automations/${seg(id)}`, { body })).automation;
  }
  async deleteAutomation(id: string): Promise<void> {
    await this.request("DELETE", `/v1/automations/${seg(id)}`);
  }
  /** Run now. */
  async runAutomation(id: string): Promise<C.AutomationRunView> {
    return (await this.request<{ run: C.AutomationRunView }>("POST", `/v1/automations/${seg(id)}/runs`)).run;
  }
  listAutomationRuns(id: string, query: C.PageInput = {}): Promise<{ items: C.AutomationRunView[]; nextCursor: string | null }> {
    return this.request("GET", `/v1/automations/${seg(id)}/runs`, { query });
  }
}
