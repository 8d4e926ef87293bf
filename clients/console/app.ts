/**
 * The web console (issue 20): token sign-in, the session list with live statuses, a new-session
 * form, and the session view (the streamed turn, prompt box with queue position, lifecycle
 * actions, presence, the event timeline, the sidecar terminal). Preact without JSX (`h`), so the
 * repository's TypeScript settings stay as they are. It talks to the API only through api.ts.
 */
import { h, render, type ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { PendingPrompt, SessionSocket, ToolPart, TranscriptChange, TurnMessage, TurnPart } from "../api-client";
import { ApiError, ConsoleApi, type LifecycleEventView, type ServerFrame, type SessionView } from "./api";
import type { MountedTerminal } from "./terminal";

interface ConsoleConfig {
  /** "" = this page's origin. */
  apiUrl: string;
  /** null: ask `GET /v1/health`. */
  wsUrl: string | null;
}

const TOKEN_KEY = "console.apiToken";
const LIST_POLL_MS = 3000;

function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.status} ${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

function useHashRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return hash;
}

function StatusBadge({ status }: { status: string }) {
  return h("span", { class: `badge status-${status}`, "data-status": status }, status);
}

function formatTime(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  return `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
}

// ---------------------------------------------------------------------------------------------
// Sign-in

function SignIn({ api, onSignedIn }: { api: (token: string) => ConsoleApi; onSignedIn: (token: string) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api(token.trim()).listSessions();
      onSignedIn(token.trim());
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? "That token was not accepted." : errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return h(
    "form",
    { class: "card signin", onSubmit: submit },
    h("h2", null, "Sign in"),
    h("p", { class: "muted" }, "Paste an API token (the local runtime prints its development token at start)."),
    h("input", { name: "token", type: "password", placeholder: "API token", value: token, autoComplete: "off", onInput: (e: Event) => setToken((e.target as HTMLInputElement).value) }),
    h("button", { type: "submit", disabled: busy || !token.trim() }, busy ? "Checking..." : "Sign in"),
    error && h("p", { class: "error", role: "alert" }, error),
  );
}

// ---------------------------------------------------------------------------------------------
// Session list and new session

function NewSession({ api }: { api: ConsoleApi }) {
  const [repo, setRepo] = useState("");
  const [branch, setBranch] = useState("");
  const [title, setTitle] = useState("");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const session = await api.createSession({
        ...(title.trim() ? { title: title.trim() } : {}),
        ...(repo.trim() ? { repos: [{ url: repo.trim(), ...(branch.trim() ? { branch: branch.trim() } : {}) }] } : {}),
        ...(prompt.trim() ? { initialPrompt: prompt.trim() } : {}),
      });
      location.hash = `#/sessions/${session.id}`;
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const field = (name: string, label: string, value: string, set: (v: string) => void, placeholder: string) =>
    h("label", null, label, h("input", { name, value, placeholder, onInput: (e: Event) => set((e.target as HTMLInputElement).value) }));
  return h(
    "form",
    { class: "card new-session", onSubmit: submit },
    h("h2", null, "New session"),
    h("div", { class: "row" }, field("repo", "Repository", repo, setRepo, "https://github.com/owner/repo.git (optional)"), field("branch", "Branch", branch, setBranch, "default")),
    field("title", "Title", title, setTitle, "optional"),
    h("label", null, "First prompt", h("textarea", { name: "initialPrompt", rows: 3, value: prompt, placeholder: "What should the agent do? (optional)", onInput: (e: Event) => setPrompt((e.target as HTMLTextAreaElement).value) })),
    h("button", { type: "submit", disabled: busy }, busy ? "Creating..." : "Create session"),
    error && h("p", { class: "error", role: "alert" }, error),
  );
}

function SessionList({ api }: { api: ConsoleApi }) {
  const [sessions, setSessions] = useState<SessionView[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const items = await api.listSessions();
        if (!stopped) {
          setSessions(items);
          setError(null);
        }
      } catch (err) {
        if (!stopped) setError(errorText(err));
      }
      if (!stopped) timer = setTimeout(() => void load(), LIST_POLL_MS);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [api]);
  return h(
    "div",
    { class: "list-page" },
    h(NewSession, { api }),
    h(
      "section",
      { class: "card" },
      h("h2", null, "Sessions"),
      error && h("p", { class: "error" }, error),
      sessions === null
        ? h("p", { class: "muted" }, "Loading...")
        : sessions.length === 0
          ? h("p", { class: "muted" }, "No sessions yet.")
          : h(
              "table",
              { class: "sessions" },
              h("thead", null, h("tr", null, h("th", null, "Session"), h("th", null, "Status"), h("th", null, "Client"), h("th", null, "Created"))),
              h(
                "tbody",
                null,
                sessions.map((s) =>
                  h(
                    "tr",
                    { key: s.id, "data-session-id": s.id },
                    h("td", null, h("a", { href: `#/sessions/${s.id}` }, s.title || s.id), h("div", { class: "muted small" }, s.id)),
                    h("td", null, h(StatusBadge, { status: s.status }), s.pauseReason ? h("span", { class: "muted small" }, ` ${s.pauseReason}`) : null),
                    h("td", null, s.clientType ?? ""),
                    h("td", { class: "small" }, formatTime(s.createdAt)),
                  ),
                ),
              ),
            ),
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Session view

/** A tool call as the typed client's transcript holds it. */
type ToolView = Omit<ToolPart, "kind">;

interface MessageView {
  id: string;
  role: string;
  /** Text and tool parts in arrival order. */
  parts: TurnPart[];
  done: boolean;
  reason?: string;
  error?: string;
}

/**
 * A message of the typed client's transcript (clients/api-client/transcript.ts: the one place
 * turn frames are assembled, idempotently, reopened answers included), copied for rendering.
 */
function toView(m: TurnMessage): MessageView {
  const parts: TurnPart[] = m.parts.map((p) => ({ ...p }));
  if (parts.length === 0 && m.text) parts.push({ kind: "text", partId: "text", text: m.text });
  return { id: m.messageId, role: m.role, parts, done: m.done, ...(m.reason !== undefined ? { reason: m.reason } : {}), ...(m.error ? { error: m.error.message } : {}) };
}

/** The page's messages after a transcript change: the socket's transcript, plus prompts this page showed as they were sent. */
function applyChange(messages: MessageView[], change: TranscriptChange, all: () => TurnMessage[]): MessageView[] {
  if (change.kind === "reset") return all().map(toView);
  if (change.kind !== "message") return messages;
  const next = toView(change.message);
  const index = messages.findIndex((m) => m.id === next.id);
  return index >= 0 ? messages.map((m, i) => (i === index ? next : m)) : [...messages, next];
}

function ToolCall({ tool }: { tool: ToolView }) {
  return h(
    "details",
    { class: `tool tool-${tool.status}` },
    h("summary", null, h("span", { class: "tool-name" }, tool.tool), " ", h("span", { class: "muted" }, tool.title ?? ""), " ", h(StatusBadge, { status: tool.status })),
    tool.input && h("pre", null, JSON.stringify(tool.input, null, 2)),
    tool.output && h("pre", { class: "output" }, tool.output),
    tool.error && h("pre", { class: "error" }, tool.error),
  );
}

function Message({ message }: { message: MessageView }) {
  return h(
    "div",
    { class: `message role-${message.role}${message.done ? "" : " streaming"}`, "data-message-id": message.id },
    h("div", { class: "who" }, message.role === "user" ? "you" : message.role),
    message.parts.map((p) => (p.kind === "tool" ? h(ToolCall, { key: p.partId, tool: p }) : h("div", { key: p.partId, class: "text" }, p.text))),
    message.error && h("p", { class: "error" }, message.error),
  );
}

/** Prompts sent and not yet taken by the agent, apart from the transcript: each enters it, in order, when its turn starts. */
function QueuedPrompts({ pending }: { pending: PendingPrompt[] }) {
  if (pending.length === 0) return null;
  return h(
    "section",
    { class: "card queued" },
    h("h3", null, "Queued"),
    h(
      "ol",
      null,
      pending.map((p) =>
        h("li", { key: p.promptId, class: `queued-prompt ${p.status}`, "data-prompt-id": p.promptId }, h("span", { class: "badge position" }, p.status === "processing" ? "next" : `#${p.position}`), " ", h("span", { class: "text" }, p.content)),
      ),
    ),
  );
}

function Timeline({ events }: { events: LifecycleEventView[] }) {
  if (events.length === 0) return h("p", { class: "muted" }, "No lifecycle events yet.");
  return h(
    "ol",
    { class: "timeline" },
    events.map((e) => {
      const total = Object.values(e.timings).reduce((a, b) => a + b, 0);
      return h(
        "li",
        { key: e.eventId, class: `event outcome-${e.outcome}` },
        h("div", null, h("strong", null, e.flow), " ", h("span", { class: "muted" }, e.from === e.to ? e.to ?? "" : `${e.from ?? "-"} -> ${e.to ?? "-"}`), " ", h("span", { class: `badge outcome` }, e.outcome), " ", h("span", { class: "muted small" }, `${formatTime(e.at)} · ${e.actor}${e.reason ? ` · ${e.reason}` : ""}`)),
        h(
          "div",
          { class: "timings" },
          Object.entries(e.timings).map(([step, ms]) => h("span", { key: step, class: "timing" }, `${step} ${Math.round(ms)} ms`)),
          h("span", { class: "timing total" }, `total ${Math.round(total)} ms`),
        ),
        e.message && h("div", { class: "muted small" }, e.message),
      );
    }),
  );
}

/** xterm.js's stylesheet, built beside terminal.js; added once, when a terminal is first opened. */
function loadTerminalStyles(): void {
  if (document.getElementById("terminal-css")) return;
  const link = document.createElement("link");
  link.id = "terminal-css";
  link.rel = "stylesheet";
  link.href = new URL("console/terminal.css", document.baseURI).href;
  document.head.appendChild(link);
}

function TerminalPanel({ api, sessionId, status }: { api: ConsoleApi; sessionId: string; status: string }) {
  const host = useRef<HTMLDivElement>(null);
  const mounted = useRef<MountedTerminal | null>(null);
  const [state, setState] = useState<string | null>(null);
  useEffect(() => () => mounted.current?.close(), []);
  const open = async () => {
    setState("Opening...");
    try {
      const access = await api.sidecarAccess(sessionId);
      loadTerminalStyles();
      const { mountTerminal } = (await import(/* @vite-ignore */ new URL("console/terminal.js", document.baseURI).href)) as typeof import("./terminal");
      mounted.current?.close();
      if (!host.current) return;
      mounted.current = mountTerminal(host.current, access.terminalUrl, access.token, (reason) => setState(`Terminal closed: ${reason}`));
      setState(null);
    } catch (err) {
      setState(errorText(err));
    }
  };
  return h(
    "section",
    { class: "card terminal-card" },
    h("div", { class: "card-head" }, h("h3", null, "Terminal"), h("button", { onClick: () => void open(), disabled: status !== "running" }, mounted.current ? "Reconnect" : "Open terminal")),
    state && h("p", { class: "muted" }, state),
    h("div", { class: "terminal", ref: host }),
  );
}

/** The URL of a session view's or status frame's `preview` (`{url}` or null). */
function previewUrlOf(preview: unknown): string | null {
  const url = (preview as { url?: unknown } | null | undefined)?.url;
  return typeof url === "string" ? url : null;
}

interface Presence {
  connectedClients: number;
  users: string[];
}

function SessionPage({ api, config, sessionId }: { api: ConsoleApi; config: ConsoleConfig; sessionId: string }) {
  const [session, setSession] = useState<SessionView | null>(null);
  const [liveStatus, setLiveStatus] = useState<string | null>(null);
  // The sandbox's preview URL while it runs: from the view (init, HTTP) and the `running` status frame.
  const [preview, setPreview] = useState<string | null>(null);
  const [messages, setMessages] = useState<MessageView[]>([]);
  const [presence, setPresence] = useState<Presence>({ connectedClients: 0, users: [] });
  const [queue, setQueue] = useState<string | null>(null);
  const [events, setEvents] = useState<LifecycleEventView[]>([]);
  const [connection, setConnection] = useState<"connecting" | "open" | "closed">("closed");
  const [error, setError] = useState<string | null>(null);
  const [prompt, setPrompt] = useState("");
  const ws = useRef<SessionSocket | null>(null);
  const statusRef = useRef<string | null>(null);
  const alive = useRef(true);
  // Prompts sent whose user message the server has not delivered yet (the typed client's transcript `pending`).
  const [pending, setPending] = useState<PendingPrompt[]>([]);

  const refreshEvents = useCallback(() => {
    api.events(sessionId).then(setEvents, () => undefined);
  }, [api, sessionId]);

  const refreshSession = useCallback(async () => {
    try {
      const s = await api.getSession(sessionId);
      setSession(s);
      setPreview(previewUrlOf(s.preview));
      statusRef.current = s.status;
    } catch (err) {
      setError(errorText(err));
    }
  }, [api, sessionId]);

  const onFrame = useCallback(
    (frame: ServerFrame) => {
      switch (frame.type) {
        case "init": {
          const s = frame.session as SessionView;
          setSession(s);
          setPreview(previewUrlOf(s.preview));
          setLiveStatus(s.status);
          statusRef.current = s.status;
          const data = (frame.data ?? {}) as { connectedClients?: number; connectedUsers?: { userId: string }[]; promptsQueued?: number };
          setPresence({ connectedClients: data.connectedClients ?? 1, users: (data.connectedUsers ?? []).map((u) => u.userId) });
          if (data.promptsQueued) setQueue(`${data.promptsQueued} prompt(s) queued`);
          break;
        }
        case "status": {
          const status = frame.status as string;
          setLiveStatus(status);
          setPreview(status === "running" ? previewUrlOf(frame.preview) : null);
          statusRef.current = status;
          refreshEvents();
          void refreshSession();
          break;
        }
        case "user.joined":
          setPresence((p) => ({ connectedClients: p.connectedClients + 1, users: p.users.includes(frame.userId as string) ? p.users : [...p.users, frame.userId as string] }));
          break;
        case "user.left":
          setPresence((p) => ({ connectedClients: Math.max(1, p.connectedClients - 1), users: p.users.filter((u) => u !== frame.userId) }));
          break;
        case "prompt.queued": {
          const position = frame.position as number;
          const status = (frame.status as string) ?? "queued";
          setQueue(status === "processing" || position === 0 ? "Prompt is being processed" : `Prompt queued at position ${position}`);
          break;
        }
        case "message.finalize":
          setQueue(null);
          break;
        case "error":
          setError(`${frame.code as string}: ${frame.message as string}`);
          break;
        default:
          break;
      }
    },
    [refreshEvents, refreshSession],
  );

  const connect = useCallback(async () => {
    const current = ws.current;
    if (current && current.state !== "closed") return;
    setConnection("connecting");
    try {
      const socket = await api.connect(sessionId, config.wsUrl);
      if (!alive.current) {
        socket.close();
        return;
      }
      ws.current = socket;
      setConnection("open");
      socket.on("frame", onFrame);
      socket.on("transcript", (change) => {
        setMessages((m) => applyChange(m, change, () => socket.transcript.messages));
        setPending(socket.transcript.pending);
      });
      socket.on("state", (state) => {
        if (state !== "closed") return;
        if (ws.current === socket) ws.current = null;
        setConnection("closed");
        // Reconnect only while the session is meant to run: connecting wakes a paused session, and that is the user's call.
        const status = statusRef.current;
        if (alive.current && status && !["paused", "stopped", "error"].includes(status)) setTimeout(() => void connect(), 1000);
      });
    } catch (err) {
      setConnection("closed");
      setError(errorText(err));
    }
  }, [api, config.wsUrl, onFrame, sessionId]);

  useEffect(() => {
    alive.current = true;
    void refreshSession().then(() => {
      if (statusRef.current !== "stopped") void connect();
    });
    refreshEvents();
    return () => {
      alive.current = false;
      ws.current?.close();
      ws.current = null;
    };
  }, [connect, refreshEvents, refreshSession]);

  const send = async (e: Event) => {
    e.preventDefault();
    const content = prompt.trim();
    if (!content) return;
    setError(null);
    setPrompt("");
    // A paused session: the prompt over a fresh connection wakes it (API.md: prompts wake a paused session).
    if (!ws.current || ws.current.state === "closed") await connect();
    ws.current?.prompt(content);
  };

  const act = async (action: "pause" | "resume" | "snapshot" | "stop") => {
    setError(null);
    try {
      await api.action(sessionId, action);
      if (action === "resume") void connect();
      setTimeout(refreshEvents, 500);
    } catch (err) {
      setError(errorText(err));
    }
  };

  const status = liveStatus ?? session?.status ?? "unknown";
  return h(
    "div",
    { class: "session-page" },
    h("a", { href: "#/", class: "back" }, "< Sessions"),
    h(
      "section",
      { class: "card session-head" },
      h("div", null, h("h2", null, session?.title || sessionId), h("div", { class: "muted small" }, sessionId)),
      h("div", { class: "session-status" }, h(StatusBadge, { status }), session?.pauseReason && status === "paused" ? h("span", { class: "muted small" }, ` (${String(session.pauseReason)})`) : null),
      preview && status === "running" ? h("div", { class: "preview small" }, "Preview: ", h("a", { href: preview, target: "_blank", rel: "noopener noreferrer" }, preview)) : null,
      h(
        "div",
        { class: "presence", title: presence.users.join(", ") },
        h("span", { class: `dot conn-${connection}` }),
        ` ${connection === "open" ? `${presence.connectedClients} client${presence.connectedClients === 1 ? "" : "s"} connected` : connection}`,
        presence.users.length ? h("span", { class: "muted small" }, ` · ${presence.users.join(", ")}`) : null,
      ),
      h(
        "div",
        { class: "actions" },
        h("button", { onClick: () => void act("pause"), disabled: status !== "running" }, "Pause"),
        h("button", { onClick: () => void act("resume"), disabled: status === "running" || status === "stopped" }, "Resume"),
        h("button", { onClick: () => void act("snapshot"), disabled: status !== "running" }, "Snapshot"),
        h("button", { class: "danger", onClick: () => void act("stop"), disabled: status === "stopped" }, "Stop"),
      ),
    ),
    error && h("p", { class: "error", role: "alert" }, error),
    h(
      "div",
      { class: "columns" },
      h(
        "div",
        { class: "main-col" },
        h("section", { class: "card transcript" }, messages.length === 0 ? h("p", { class: "muted" }, "No messages yet.") : messages.map((m) => h(Message, { key: m.id, message: m }))),
        h(QueuedPrompts, { pending }),
        h(
          "form",
          { class: "card prompt-box", onSubmit: (e: Event) => void send(e) },
          h("textarea", {
            name: "prompt",
            rows: 3,
            value: prompt,
            placeholder: status === "stopped" ? "The session is stopped." : "Ask the agent... (Ctrl+Enter sends)",
            disabled: status === "stopped",
            onInput: (e: Event) => setPrompt((e.target as HTMLTextAreaElement).value),
            onKeyDown: (e: KeyboardEvent) => {
              if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void send(e);
            },
          }),
          h("div", { class: "prompt-row" }, h("span", { class: "muted queue" }, queue ?? ""), h("button", { type: "submit", disabled: status === "stopped" || !prompt.trim() }, "Send")),
        ),
      ),
      h(
        "div",
        { class: "side-col" },
        h("section", { class: "card" }, h("div", { class: "card-head" }, h("h3", null, "Lifecycle"), h("button", { class: "small", onClick: refreshEvents }, "Refresh")), h(Timeline, { events })),
        h(TerminalPanel, { api, sessionId, status }),
      ),
    ),
  );
}

// ---------------------------------------------------------------------------------------------

function Shell({ children, onSignOut }: { children?: ComponentChildren; onSignOut?: () => void }) {
  return h(
    "div",
    { class: "shell" },
    h("header", null, h("a", { href: "#/", class: "brand" }, "Sandboxes"), onSignOut && h("button", { class: "link", onClick: onSignOut }, "Sign out")),
    h("main", null, children),
  );
}

function App({ config }: { config: ConsoleConfig }) {
  const [token, setToken] = useState<string | null>(() => localStorage.getItem(TOKEN_KEY));
  const hash = useHashRoute();
  const makeApi = useCallback((t: string) => new ConsoleApi(config.apiUrl, t), [config.apiUrl]);
  const [api, setApi] = useState<ConsoleApi | null>(() => (token ? makeApi(token) : null));
  useEffect(() => setApi(token ? makeApi(token) : null), [token, makeApi]);
  if (!token || !api)
    return h(Shell, null, h(SignIn, {
      api: makeApi,
      onSignedIn: (t) => {
        localStorage.setItem(TOKEN_KEY, t);
        setToken(t);
      },
    }));
  const signOut = () => {
    localStorage.removeItem(TOKEN_KEY);
    setToken(null);
  };
  const match = /^#\/sessions\/([^/]+)$/.exec(hash);
  return h(Shell, { onSignOut: signOut }, match?.[1] ? h(SessionPage, { key: match[1], api, config, sessionId: decodeURIComponent(match[1]) }) : h(SessionList, { api }));
}

async function main(): Promise<void> {
  let config: ConsoleConfig = { apiUrl: "", wsUrl: null };
  try {
    const res = await fetch(new URL("console/config.json", document.baseURI));
    if (res.ok) config = { ...config, ...((await res.json()) as Partial<ConsoleConfig>) };
  } catch {
    /* no config: same origin */
  }
  const root = document.getElementById("app");
  if (root) render(h(App, { config }), root);
}

void main();
