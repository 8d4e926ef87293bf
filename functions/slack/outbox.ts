/**
 * The Slack outbox (issue 17): every post has an idempotency key (per session, turn and part) and
 * an item in the table. A post is recorded as `sending` before `chat.postMessage`, and its `ts`
 * after. The message carries its key in Slack's message `metadata`, so a send that may have
 * reached Slack before a crash (the item says `sending` with no `ts`) is looked up in the channel
 * or thread (`conversations.history` / `conversations.replies` with `include_all_metadata`) and
 * recorded instead of posted again: a crash between sending and recording never posts twice.
 * Rate limits: `@slack/web-api` waits out a 429's `Retry-After` and retries the call itself.
 */
import type { WebClient } from "@slack/web-api";
import type { SlackStore } from "../ports/slack";

export const OUTBOX_EVENT_TYPE = "scp_outbox";

export interface OutboxMessage {
  channel: string;
  threadTs?: string;
  text: string;
  blocks?: unknown[];
}

interface MetadataMessage {
  ts?: string;
  metadata?: { event_type?: string; event_payload?: Record<string, unknown> };
}

export class SlackOutbox {
  private client: Promise<WebClient> | undefined;

  /** `web`: the client, or a function building it on the first post (the relay reads the bot token only when a Slack session needs it). */
  constructor(
    private readonly web: WebClient | (() => Promise<WebClient>),
    private readonly store: Pick<SlackStore, "beginPost" | "getPost" | "recordPostTs">,
    private readonly now: () => Date,
  ) {}

  private webClient(): Promise<WebClient> {
    const web = this.web;
    this.client ??= (typeof web === "function" ? web() : Promise.resolve(web)).catch((err: unknown) => {
      this.client = undefined;
      throw err;
    });
    return this.client;
  }

  /** Posts once per key; returns the message's `ts`. */
  async post(key: string, message: OutboxMessage): Promise<string> {
    const { post, fresh } = await this.store.beginPost(key, message.channel, this.now());
    if (post.ts) return post.ts;
    if (!fresh) {
      const found = await this.find(key, message, post.sendingSince);
      if (found) {
        await this.store.recordPostTs(key, found);
        return found;
      }
    }
    const web = await this.webClient();
    const out = await web.chat.postMessage({
      channel: message.channel,
      text: message.text,
      ...(message.threadTs ? { thread_ts: message.threadTs } : {}),
      ...(message.blocks ? { blocks: message.blocks as never } : {}),
      metadata: { event_type: OUTBOX_EVENT_TYPE, event_payload: { key } },
    });
    if (!out.ts) throw new Error(`chat.postMessage for ${key} returned no ts`);
    await this.store.recordPostTs(key, out.ts);
    return out.ts;
  }

  /** Edits a recorded post (the status line); false when it was never posted. */
  async update(key: string, message: Omit<OutboxMessage, "threadTs">): Promise<boolean> {
    const post = await this.store.getPost(key);
    if (!post?.ts) return false;
    await (await this.webClient()).chat.update({ channel: message.channel, ts: post.ts, text: message.text, ...(message.blocks ? { blocks: message.blocks as never } : {}) });
    return true;
  }

  private async find(key: string, message: OutboxMessage, since: string): Promise<string | null> {
    const oldest = String(Math.floor(Date.parse(since) / 1000) - 1);
    const web = await this.webClient();
    const out = message.threadTs
      ? await web.conversations.replies({ channel: message.channel, ts: message.threadTs, oldest, include_all_metadata: true, limit: 200 })
      : await web.conversations.history({ channel: message.channel, oldest, include_all_metadata: true, limit: 200 });
    const messages = (out.messages ?? []) as MetadataMessage[];
    const hit = messages.find((m) => m.metadata?.event_type === OUTBOX_EVENT_TYPE && m.metadata.event_payload?.key === key);
    return hit?.ts ?? null;
  }
}

/** Slack's section text limit is 3,000 characters: longer text goes out in parts, split at line breaks where possible. */
export const SLACK_TEXT_LIMIT = 3000;

export function splitForSlack(text: string, limit = SLACK_TEXT_LIMIT): string[] {
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let cut = rest.lastIndexOf("\n", limit);
    if (cut < limit / 2) cut = rest.lastIndexOf(" ", limit);
    if (cut < limit / 2) cut = limit;
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut).replace(/^\n/, "");
  }
  if (rest.length > 0 || parts.length === 0) parts.push(rest);
  return parts;
}
