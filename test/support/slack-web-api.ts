/**
 * A local HTTP server speaking Slack's Web API (tests point `SLACK_API_URL` / `slackApiUrl` at it):
 * `POST /api/<method>` with a form or JSON body and the bot token as `Authorization: Bearer`,
 * answering `{ok: true, ...}` as Slack documents. It keeps the messages posted (with their
 * `metadata`, so `conversations.history` / `conversations.replies` with `include_all_metadata`
 * find them), records every call in order, and can answer the next call of a method with a 429
 * and `Retry-After` (Slack's rate limit).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface SlackCall {
  method: string;
  args: Record<string, unknown>;
  token: string | null;
  /** Answered with a 429 (the client must retry after Retry-After). */
  rateLimited: boolean;
}

interface StoredMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  text: string;
  metadata?: unknown;
}

const JSON_ARGS = new Set(["blocks", "metadata", "attachments"]);

export interface SlackWebApiStandIn {
  url: string;
  calls: SlackCall[];
  messages: StoredMessage[];
  /** The next `count` calls of `method` answer 429 with `Retry-After: retryAfterSeconds`. */
  rateLimitNext(method: string, retryAfterSeconds: number, count?: number): void;
  /** Calls of one method, in order (rate-limited attempts left out unless asked). */
  callsOf(method: string, options?: { includeRateLimited?: boolean }): SlackCall[];
  close(): Promise<void>;
}

export async function startSlackWebApi(): Promise<SlackWebApiStandIn> {
  const calls: SlackCall[] = [];
  const messages: StoredMessage[] = [];
  const limits = new Map<string, { retryAfter: number; count: number }>();
  let clock = 1_700_000_000;
  let seq = 0;
  const nextTs = () => `${clock++}.${String(++seq).padStart(6, "0")}`;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const method = (req.url ?? "").replace(/^\/api\//, "").split("?")[0] ?? "";
      const raw = Buffer.concat(chunks).toString("utf8");
      const args: Record<string, unknown> = {};
      if ((req.headers["content-type"] ?? "").includes("json")) Object.assign(args, raw ? (JSON.parse(raw) as Record<string, unknown>) : {});
      else
        for (const [k, v] of new URLSearchParams(raw)) {
          args[k] = JSON_ARGS.has(k) ? (JSON.parse(v) as unknown) : v;
        }
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? null;
      const limit = limits.get(method);
      if (limit && limit.count > 0) {
        limit.count--;
        calls.push({ method, args, token, rateLimited: true });
        res.writeHead(429, { "content-type": "application/json", "retry-after": String(limit.retryAfter) });
        res.end(JSON.stringify({ ok: false, error: "ratelimited" }));
        return;
      }
      calls.push({ method, args, token, rateLimited: false });
      const answer = (body: Record<string, unknown>) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ok: true, ...body }));
      };
      const channel = String(args.channel ?? "");
      switch (method) {
        case "chat.postMessage": {
          const message: StoredMessage = { channel, ts: nextTs(), text: String(args.text ?? ""), ...(args.thread_ts ? { thread_ts: String(args.thread_ts) } : {}), ...(args.metadata ? { metadata: args.metadata } : {}) };
          messages.push(message);
          return answer({ channel, ts: message.ts, message });
        }
        case "chat.update": {
          const found = messages.find((m) => m.channel === channel && m.ts === args.ts);
          if (!found) {
            res.writeHead(200, { "content-type": "application/json" });
            res.end(JSON.stringify({ ok: false, error: "message_not_found" }));
            return;
          }
          found.text = String(args.text ?? "");
          return answer({ channel, ts: found.ts, text: found.text });
        }
        case "chat.postEphemeral":
          return answer({ message_ts: nextTs() });
        case "conversations.replies": {
          const ts = String(args.ts ?? "");
          return answer({ messages: messages.filter((m) => m.channel === channel && (m.ts === ts || m.thread_ts === ts)), has_more: false });
        }
        case "conversations.history":
          return answer({ messages: messages.filter((m) => m.channel === channel && !m.thread_ts).reverse(), has_more: false });
        default:
          return answer({});
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/api/`,
    calls,
    messages,
    rateLimitNext: (method, retryAfter, count = 1) => limits.set(method, { retryAfter, count }),
    callsOf: (method, options = {}) => calls.filter((c) => c.method === method && (options.includeRateLimited || !c.rateLimited)),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Signs a request body as Slack does (v0), for the tests' requests. */
export { slackSignature } from "../../functions/slack/signature";
