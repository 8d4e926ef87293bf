/**
 * `sbxctl`: the command-line client (API.md v1.1 "Clients"), over the typed client
 * (clients/api-client) and nothing of the server. Exit codes: 0 ok, 1 error (the API refused,
 * the network failed, a wait ended badly), 2 usage (unknown command, missing argument, bad flag).
 * Every read command takes `--json` (one JSON document on stdout). Progress goes to stderr.
 */
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { parseArgs, type ParseArgsConfig } from "node:util";
import WebSocket from "ws";
import { ApiClient, ApiError, SessionSocket, type Contract, type SessionView, type ServerFrame, type TurnPart, type WebSocketConstructor } from "../api-client/index";
import { configPath, readConfig, writeConfig } from "./config";

export class UsageError extends Error {}

const USAGE = `usage: sbxctl <command> [options]

  login [--api-url URL] [--token TOKEN]    store the API URL and token (token read from stdin when not given)
  sessions ls [--status S] [--limit N]     list sessions
  sessions new | new [--repo URL]... [--title T] [--prompt TEXT] [--provider P] [--no-start] [--attach]
                                           create a session (and start it, waiting until it runs)
  sessions show <id>                       one session
  sessions rm <id>                         stop a session (terminates its sandbox)
  attach <id>                              stream the agent's turns live; type a line to prompt; Ctrl-C detaches
  prompt <id> <text> [--wait]              queue a prompt (--wait: stream the answer until the turn ends)
  pause <id> | resume <id> | stop <id>     lifecycle actions (waits for the result; --no-wait to return at once)
  events <id> [--limit N]                  the lifecycle audit with step timings (every page; --limit: the first N)
  logs <id> [--limit N]                    the session's transcript (every page; --limit: the first N)

  --json on every read command prints JSON. Exit codes: 0 ok, 1 error, 2 usage.
  Environment: SBXCTL_API_URL and SBXCTL_TOKEN override the stored login; XDG_CONFIG_HOME is respected.`;

export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

const OPTIONS = {
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  "api-url": { type: "string" },
  token: { type: "string" },
  status: { type: "string" },
  limit: { type: "string" },
  repo: { type: "string", multiple: true },
  title: { type: "string" },
  prompt: { type: "string" },
  provider: { type: "string" },
  "no-start": { type: "boolean" },
  "no-wait": { type: "boolean" },
  attach: { type: "boolean" },
  wait: { type: "boolean" },
} as const satisfies ParseArgsConfig["options"];

type Flags = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K] extends { multiple: true } ? string[] : (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };

/** A spinner on a terminal, one line per phase otherwise (logs, pipes). */
class Progress {
  private timer: ReturnType<typeof setInterval> | null = null;
  private frame = 0;
  private text = "";
  constructor(private readonly out: CliIo["stderr"]) {}
  update(text: string): void {
    if (text === this.text) return;
    this.text = text;
    if (!this.out.isTTY) {
      this.out.write(`${text}...\n`);
      return;
    }
    this.timer ??= setInterval(() => this.render(), 100);
    this.render();
  }
  private render(): void {
    const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
    this.out.write(`\r\x1b[2K${frames[this.frame++ % frames.length]} ${this.text}`);
  }
  done(text?: string): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.out.isTTY) this.out.write("\r\x1b[2K");
    if (text) this.out.write(`${text}\n`);
    this.text = "";
  }
}

function need(positionals: string[], index: number, what: string): string {
  const value = positionals[index];
  if (!value) throw new UsageError(`missing ${what}`);
  return value;
}

function printJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function sessionLine(s: SessionView): string {
  const reason = s.status === "paused" && s.pauseReason ? ` (${s.pauseReason})` : s.status === "stopped" && s.stopReason ? ` (${s.stopReason})` : "";
  return `${s.id}  ${`${s.status}${reason}`.padEnd(22)}  ${s.createdAt}  ${s.title ?? ""}`;
}

function toolLine(part: Extract<TurnPart, { kind: "tool" }>): string {
  const mark = part.status === "completed" ? "✓" : part.status === "error" ? "✗" : "…";
  const arg = part.title ?? (part.input ? Object.values(part.input).find((v) => typeof v === "string") : undefined);
  const detail = typeof arg === "string" ? `: ${arg.replace(/\s+/g, " ").slice(0, 80)}` : "";
  return `  ⚙ ${part.tool}${detail} ${mark}`;
}

/** Waits (with progress) until the session reaches one of `want`; `error` or an unexpected end is a failure. */
async function waitForStatus(api: ApiClient, io: CliIo, id: string, want: string[], label: string): Promise<SessionView> {
  const progress = new Progress(io.stderr);
  progress.update(label);
  try {
    for (;;) {
      const s = await api.getSession(id);
      if (want.includes(s.status)) {
        progress.done();
        return s;
      }
      if (s.status === "error" || (s.status === "stopped" && !want.includes("stopped"))) {
        progress.done();
        throw new Error(`session ${id} is ${s.status}${s.stopReason ? ` (${s.stopReason})` : ""}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    progress.done();
  }
}

/**
 * How long `prompt --wait` waits after its answer finished empty for that answer to be reopened
 * with its text, or for the prompt to be answered again, before it ends with the empty answer.
 */
const EMPTY_ANSWER_GRACE_MS = 10_000;

interface AttachOptions {
  /** Return once the turn following this prompt finished (prompt --wait); otherwise until Ctrl-C. */
  untilTurnEnds?: boolean;
  /** Send this prompt once connected. */
  prompt?: string;
  /** Read prompts from stdin lines (interactive attach). */
  interactive?: boolean;
}

/** Streams a session's turns to the terminal; resolves on detach (Ctrl-C) or when the awaited turn ends. */
async function attach(api: ApiClient, io: CliIo, id: string, options: AttachOptions): Promise<number> {
  const progress = new Progress(io.stderr);
  progress.update("connecting");
  const socket = new SessionSocket({
    wsUrl: await wsUrlOf(api),
    sessionId: id,
    auth: { ticket: async () => (await api.createWsTicket(id)).ticket },
    WebSocket: WebSocket as unknown as WebSocketConstructor,
  });
  const printed = new Map<string, number>();
  const toolsShown = new Map<string, string>();
  let sawInit = false;
  let resolveDone: (code: number) => void = () => undefined;
  const done = new Promise<number>((r) => (resolveDone = r));
  let emptyAnswerWait: ReturnType<typeof setTimeout> | null = null;

  socket.on("frame", (frame: ServerFrame) => {
    if (frame.type === "status") {
      if (frame.status === "running") progress.done(sawInit ? "● running" : undefined);
      else if (frame.status === "creating" || frame.status === "resuming" || frame.status === "migrating") progress.update(frame.status);
      else {
        progress.done(`● ${frame.status}${frame.message ? `: ${frame.message}` : ""}`);
        if (frame.status === "stopped" || frame.status === "error") resolveDone(frame.status === "error" ? 1 : 0);
      }
    } else if (frame.type === "error") {
      progress.done();
      io.stderr.write(`error: ${frame.code}: ${frame.message}\n`);
    } else if (frame.type === "prompt.queued") {
      io.stderr.write(`(prompt queued, position ${frame.position})\n`);
    } else if (frame.type === "init") {
      if (!sawInit) {
        // Recent history: the last few finished messages.
        for (const m of frame.messages.slice(-4)) io.stdout.write(`${m.role === "user" ? "> " : ""}${m.text}\n`);
        sawInit = true;
      }
    }
  });
  socket.on("transcript", (change) => {
    if (change.kind !== "message") return;
    const m = change.message;
    if (m.role !== "assistant") return;
    // Stream the new text, and each tool call once per status change.
    for (const part of m.parts) {
      if (part.kind === "tool") {
        const key = `${m.messageId}:${part.partId}`;
        if (toolsShown.get(key) !== part.status && (part.status === "running" || part.status === "completed" || part.status === "error")) {
          toolsShown.set(key, part.status);
          io.stdout.write(`${toolLine(part)}\n`);
        }
      }
    }
    const before = printed.get(m.messageId) ?? 0;
    if (m.text.length > before && m.text.startsWith(m.text.slice(0, before))) {
      io.stdout.write(m.text.slice(before));
      printed.set(m.messageId, m.text.length);
    }
    if (emptyAnswerWait) clearTimeout(emptyAnswerWait);
    emptyAnswerWait = null;
    if (change.finished || change.revised) {
      io.stdout.write("\n");
      if (m.error) io.stderr.write(`agent error: ${m.error.code}: ${m.error.message}\n`);
      if (options.untilTurnEnds && options.prompt !== undefined) {
        const prompt = options.prompt;
        const end = () => void answeredSoon(api, id, prompt).then((ok) => ok && resolveDone(m.error ? 1 : 0));
        // An answer finished with nothing in it may still be reopened with its text, or asked
        // again (functions/relay: the server sends no turn-end frame): wait a while for either.
        if (m.text === "" && !m.error && !m.parts.some((p) => p.kind === "tool")) emptyAnswerWait = setTimeout(end, EMPTY_ANSWER_GRACE_MS);
        else end();
      }
    }
  });

  try {
    await socket.connect();
  } catch (err) {
    progress.done();
    throw err;
  }
  if (options.prompt !== undefined) socket.prompt(options.prompt);

  let rl: ReturnType<typeof createInterface> | null = null;
  const detach = () => {
    progress.done();
    io.stderr.write("\ndetached (the session keeps running)\n");
    resolveDone(0);
  };
  if (options.interactive) {
    rl = createInterface({ input: io.stdin, terminal: false });
    rl.on("line", (line) => {
      if (line.trim()) socket.prompt(line);
    });
    io.stderr.write("(type a prompt and press Enter; Ctrl-C detaches)\n");
  }
  process.on("SIGINT", detach);
  const code = await done;
  if (emptyAnswerWait) clearTimeout(emptyAnswerWait);
  process.off("SIGINT", detach);
  rl?.close();
  socket.close();
  return code;
}

/**
 * A listing's pages, following `nextCursor` until the end or until `limit` items: the items, and
 * the cursor to go on from (null: nothing more).
 */
async function allPages<T>(list: (query: { limit: number; cursor?: string }) => Promise<{ items: T[]; nextCursor: string | null }>, pageSize: number, limit?: number): Promise<{ items: T[]; nextCursor: string | null }> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const want = limit === undefined ? pageSize : Math.min(pageSize, limit - items.length);
    const page = await list({ limit: want, ...(cursor ? { cursor } : {}) });
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor && (limit === undefined || items.length < limit));
  return { items, nextCursor: cursor };
}

/**
 * Whether the prompt's own turn has finished: the agent is idle (a turn of several steps
 * finishes a message per step; the relay records the agent idle at the turn's end) and the
 * stored transcript has an assistant message completed after the last user message with this
 * text (turns queued before it finish first).
 */
async function answered(api: ApiClient, id: string, prompt: string): Promise<boolean> {
  if ((await api.getSession(id)).agentBusy) return false;
  const { items: messages } = await allPages((q) => api.listMessages(id, q), 200);
  let asked = -1;
  messages.forEach((m, i) => {
    if (m.role === "user" && m.text.trim() === prompt.trim()) asked = i;
  });
  return asked >= 0 && messages.slice(asked + 1).some((m) => m.role === "assistant" && m.completedAt !== null);
}

/** `answered`, allowing the store a moment to catch up with the finalize it just streamed. */
async function answeredSoon(api: ApiClient, id: string, prompt: string): Promise<boolean> {
  for (let i = 0; i < 20; i++) {
    if (await answered(api, id, prompt)) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

async function wsUrlOf(api: ApiClient): Promise<string> {
  const health = await api.health();
  if (!health.wsUrl) throw new Error("the API does not tell its WebSocket URL (GET /v1/health)");
  return health.wsUrl;
}

async function readLine(io: CliIo): Promise<string> {
  const rl = createInterface({ input: io.stdin, terminal: false });
  try {
    for await (const line of rl) return line.trim();
    return "";
  } finally {
    rl.close();
  }
}

function clientFor(io: CliIo): ApiClient {
  const config = readConfig(io.env);
  if (!config.apiUrl || !config.token) throw new Error(`not logged in: run \`sbxctl login --api-url <url>\` (or set SBXCTL_API_URL and SBXCTL_TOKEN)`);
  return new ApiClient({ baseUrl: config.apiUrl, token: config.token });
}

function intFlag(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}

async function createSession(io: CliIo, flags: Flags): Promise<number> {
  const api = clientFor(io);
  const body: Contract.CreateSessionInput = { clientType: "cli" };
  if (flags.repo?.length) body.repos = flags.repo.map((url) => ({ url }));
  if (flags.title) body.title = flags.title;
  if (flags.prompt) body.initialPrompt = flags.prompt;
  if (flags.provider) body.provider = flags.provider as Contract.CreateSessionInput["provider"];
  const progress = new Progress(io.stderr);
  progress.update("creating");
  let session = await api.createSession(body);
  progress.done();
  if (!flags["no-start"]) {
    await api.resumeSession(session.id);
    session = await waitForStatus(api, io, session.id, ["running"], `creating sandbox for ${session.id}`);
  }
  if (flags.json) printJson(io, { session });
  else io.stdout.write(`${session.id}\n`);
  if (flags.attach) return attach(api, io, session.id, { interactive: true });
  return 0;
}

async function lifecycle(io: CliIo, action: "pause" | "resume" | "stop", id: string, flags: Flags): Promise<number> {
  const api = clientFor(io);
  const want = { pause: ["paused"], resume: ["running"], stop: ["stopped"] }[action];
  const label = { pause: "pausing (snapshot, then terminate)", resume: "resuming", stop: "stopping" }[action];
  let session = action === "pause" ? await api.pauseSession(id) : action === "resume" ? await api.resumeSession(id) : await api.stopSession(id);
  if (!flags["no-wait"]) session = await waitForStatus(api, io, id, want, label);
  if (flags.json) printJson(io, { session });
  else io.stdout.write(`${sessionLine(session)}\n`);
  return 0;
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  let parsed: { values: Flags; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true }) as unknown as { values: Flags; positionals: string[] };
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values: flags, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (flags.help || !command) {
    io.stdout.write(`${USAGE}\n`);
    return command || flags.help ? 0 : 2;
  }
  switch (command) {
    case "login": {
      const apiUrl = (flags["api-url"] ?? readConfig(io.env).apiUrl ?? "").replace(/\/+$/, "");
      if (!/^https?:\/\//.test(apiUrl)) throw new UsageError("--api-url must be an http(s) URL");
      if (!flags.token && io.stdin.isTTY) io.stderr.write("API token: ");
      const token = flags.token ?? (await readLine(io));
      if (!token) throw new UsageError("no token given (--token, or on stdin)");
      const api = new ApiClient({ baseUrl: apiUrl, token });
      await api.health();
      // Checks the token itself (a list of one session).
      await api.listSessions({ limit: 1 });
      const file = writeConfig({ apiUrl, token }, io.env);
      io.stderr.write(`logged in to ${apiUrl} (saved in ${file})\n`);
      return 0;
    }
    case "sessions": {
      const [sub, id] = rest;
      if (sub === "ls" || sub === "list") {
        const api = clientFor(io);
        const page = await api.listSessions({
          ...(flags.status ? { status: flags.status as Contract.ListSessionsInput["status"] } : {}),
          ...(flags.limit ? { limit: intFlag(flags.limit, "limit") } : {}),
        });
        if (flags.json) printJson(io, page);
        else if (page.items.length === 0) io.stderr.write("no sessions\n");
        else for (const s of page.items) io.stdout.write(`${sessionLine(s)}\n`);
        return 0;
      }
      if (sub === "new") return createSession(io, flags);
      if (sub === "show") {
        const session = await clientFor(io).getSession(need(rest, 1, "session id"));
        if (flags.json) printJson(io, { session });
        else {
          io.stdout.write(`${sessionLine(session)}\n`);
          for (const key of ["provider", "sandboxId", "snapshotId", "pauseReason", "lastActivityAt", "activeSeconds"] as const) {
            if (session[key] !== undefined && session[key] !== null) io.stdout.write(`  ${key}: ${String(session[key])}\n`);
          }
        }
        return 0;
      }
      if (sub === "rm") return lifecycle(io, "stop", need(rest, 1, "session id"), flags);
      throw new UsageError(sub ? `unknown sessions command: ${sub}${id ? ` ${id}` : ""}` : "sessions: ls, new, show or rm");
    }
    case "new":
      return createSession(io, flags);
    case "attach":
      return attach(clientFor(io), io, need(rest, 0, "session id"), { interactive: true });
    case "prompt": {
      const id = need(rest, 0, "session id");
      const content = need(rest, 1, "prompt text");
      const api = clientFor(io);
      if (flags.wait) return attach(api, io, id, { prompt: content, untilTurnEnds: true });
      // One key per invocation: a retry after a lost answer stores the prompt once.
      const key = randomUUID();
      let answer: Contract.PromptBody;
      try {
        answer = await api.createPrompt(id, content, { idempotencyKey: key });
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 0) throw err;
        answer = await api.createPrompt(id, content, { idempotencyKey: key });
      }
      if (flags.json) printJson(io, answer);
      else io.stdout.write(`${answer.prompt.id} ${answer.prompt.status}${answer.prompt.position !== undefined ? ` (position ${answer.prompt.position})` : ""}\n`);
      return 0;
    }
    case "pause":
    case "resume":
    case "stop":
      return lifecycle(io, command, need(rest, 0, "session id"), flags);
    case "events": {
      const id = need(rest, 0, "session id");
      const api = clientFor(io);
      const page = await allPages((q) => api.listEvents(id, q), 100, intFlag(flags.limit, "limit"));
      if (flags.json) printJson(io, page);
      else
        for (const e of page.items) {
          const total = Object.values(e.timings).reduce((a, b) => a + b, 0);
          const steps = Object.entries(e.timings).map(([k, v]) => `${k} ${v}ms`).join(", ");
          io.stdout.write(`${e.at}  ${e.flow.padEnd(15)} ${e.outcome.padEnd(10)} ${e.from ?? "-"} -> ${e.to ?? "-"}  ${e.reason ?? ""}  by ${e.actor}  ${total}ms${steps ? ` (${steps})` : ""}\n`);
        }
      return 0;
    }
    case "logs": {
      const id = need(rest, 0, "session id");
      const api = clientFor(io);
      const page = await allPages((q) => api.listMessages(id, q), 200, intFlag(flags.limit, "limit"));
      if (flags.json) printJson(io, page);
      else
        for (const m of page.items) {
          io.stdout.write(`[${m.createdAt}] ${m.role}: ${m.text}\n`);
          for (const p of m.parts) if (p.type === "tool") io.stdout.write(`  ⚙ ${p.tool ?? "tool"}${p.title ? `: ${p.title}` : ""} ${p.status === "error" ? "✗" : "✓"}\n`);
        }
      return 0;
    }
    case "config-path":
      io.stdout.write(`${configPath(io.env)}\n`);
      return 0;
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
}

/** The process entry: exit code 2 for usage errors, 1 for every other failure (the message on stderr). */
export async function main(argv: string[]): Promise<number> {
  const io: CliIo = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };
  try {
    return await run(argv, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`sbxctl: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    if (err instanceof ApiError) io.stderr.write(`sbxctl: ${err.message} (${err.status || "no answer"} ${err.code})\n`);
    else io.stderr.write(`sbxctl: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
