/**
 * The console's view of the public contract: the typed client module (clients/api-client) and
 * nothing else; the console imports no server code at run time. Thin: the calls the views make,
 * and the session WebSocket (`SessionSocket`, ws-ticket auth so the API token never goes into a
 * URL) without its automatic reconnect, since connecting wakes a paused session and the console
 * reconnects only while the session is meant to run (app.ts).
 */
import { ApiClient, ApiError, SessionSocket, type Contract, type ServerFrame, type SessionView } from "../api-client";

export { ApiError, type ServerFrame, type SessionView };
export type LifecycleEventView = Contract.EventPage["items"][number];

export type SidecarAccess = Contract.SidecarAccessView["sidecarAccess"];

export class ConsoleApi {
  readonly client: ApiClient;

  /** `apiUrl` "" means the page's own origin (the local runtime serves both). */
  constructor(apiUrl: string, token: string) {
    this.client = new ApiClient({ baseUrl: apiUrl || location.origin, token });
  }

  async listSessions(): Promise<SessionView[]> {
    return (await this.client.listSessions({ limit: 50 })).items;
  }

  getSession(id: string): Promise<SessionView> {
    return this.client.getSession(id);
  }

  createSession(input: Contract.CreateSessionInput): Promise<SessionView> {
    return this.client.createSession({ clientType: "web", ...input });
  }

  async action(id: string, action: "pause" | "resume" | "snapshot" | "stop"): Promise<void> {
    if (action === "pause") await this.client.pauseSession(id);
    else if (action === "resume") await this.client.resumeSession(id);
    else if (action === "snapshot") await this.client.snapshotSession(id);
    else await this.client.stopSession(id);
  }

  async events(id: string): Promise<LifecycleEventView[]> {
    return (await this.client.listEvents(id, { limit: 100 })).items;
  }

  sidecarAccess(id: string): Promise<SidecarAccess> {
    return this.client.createSidecarAccess(id, { ttlSeconds: 900 });
  }

  /** The session's WebSocket, open (ticket auth); `wsUrl` null: `GET /v1/health` tells it. */
  async connect(id: string, wsUrl: string | null): Promise<SessionSocket> {
    let url = wsUrl ?? (await this.client.health()).wsUrl;
    if (!url) throw new Error("the API announces no WebSocket URL");
    url = new URL(url, location.href).toString().replace(/^http/, "ws");
    const socket = new SessionSocket({ wsUrl: url, sessionId: id, auth: { ticket: async () => (await this.client.createWsTicket(id)).ticket }, reconnect: false, history: () => this.client.allMessages(id) });
    await socket.connect();
    return socket;
  }
}
