/**
 * The Slack ack function (API.md "Slack"; ARCHITECTURE.md §9): verifies Slack's signature over
 * the raw body, records the delivery with a conditional write (a redelivery, `X-Slack-Retry-Num`
 * or a repeated `event_id` / `trigger_id`, finds it recorded and is answered without being
 * enqueued again), enqueues it for the worker and answers at once. It never reads the session
 * table's other items and loads nothing heavy: Slack wants an answer within 3 s, cold.
 * A bad or missing signature, or a timestamp more than 300 s off, is 401 and nothing is stored.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import type { SlackDelivery, SlackQueue, SlackStore } from "../ports/slack";
import { verifySlackSignature } from "./signature";
import { SLACK_USAGE } from "./usage";

export interface SlackAckDeps {
  signingSecret: () => Promise<string>;
  store: Pick<SlackStore, "recordDelivery" | "forgetDelivery">;
  queue: SlackQueue;
  now: () => Date;
  /** Logs without the body or headers (never the signature or secrets). */
  log: (message: string, fields: Record<string, unknown>) => void;
}

export type SlackRoute = "commands" | "events" | "interactions";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

function reply(statusCode: number, body?: unknown): APIGatewayProxyStructuredResultV2 {
  return { statusCode, headers: JSON_HEADERS, body: body === undefined ? "" : JSON.stringify(body) };
}

function fail(statusCode: number, code: string, message: string): APIGatewayProxyStructuredResultV2 {
  return reply(statusCode, { error: { code, message } });
}

function header(event: APIGatewayProxyEventV2, name: string): string | undefined {
  return event.headers?.[name] ?? undefined;
}

/** The body Slack signed, byte for byte (API Gateway base64-encodes what it takes for binary). */
export function rawBodyOf(event: APIGatewayProxyEventV2): string {
  if (!event.body) return "";
  return event.isBase64Encoded ? Buffer.from(event.body, "base64").toString("utf8") : event.body;
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v.length > 0 ? v : undefined);

/** The dedupe key, or an answer that needs no worker (url_verification, help, a refused body). */
export function classify(route: SlackRoute, body: string): { key: string } | { answer: APIGatewayProxyStructuredResultV2 } {
  if (route === "commands") {
    const form = new URLSearchParams(body);
    const trigger = str(form.get("trigger_id"));
    if (!trigger || !str(form.get("team_id"))) return { answer: fail(400, "invalid_request", "body: a slash command needs team_id and trigger_id") };
    const text = (form.get("text") ?? "").trim();
    if (text === "" || text.toLowerCase() === "help") return { answer: reply(200, { response_type: "ephemeral", text: SLACK_USAGE }) };
    return { key: `command:${trigger}` };
  }
  if (route === "events") {
    const payload = parseJson(body);
    if (!payload) return { answer: fail(400, "invalid_json", "body: not a JSON object") };
    if (payload.type === "url_verification") return { answer: reply(200, { challenge: str(payload.challenge) ?? "" }) };
    // Other envelopes (`app_rate_limited`, ...) carry nothing to do: acknowledged, not stored.
    if (payload.type !== "event_callback") return { answer: reply(200) };
    const eventId = str(payload.event_id);
    if (!eventId) return { answer: fail(400, "invalid_request", "body: an event_callback needs an event_id") };
    return { key: `event:${eventId}` };
  }
  const payload = parseJson(new URLSearchParams(body).get("payload") ?? "");
  if (!payload) return { answer: fail(400, "invalid_request", "body: an interaction needs a JSON payload field") };
  const actions = Array.isArray(payload.actions) ? (payload.actions as Record<string, unknown>[]) : [];
  const id = str(payload.trigger_id) ?? str(actions[0]?.action_ts);
  if (!id) return { answer: fail(400, "invalid_request", "body: an interaction needs a trigger_id") };
  return { key: `interaction:${id}` };
}

export function makeSlackAckHandler(route: SlackRoute, deps: SlackAckDeps): (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2> {
  return async (event) => {
    const body = rawBodyOf(event);
    const verdict = verifySlackSignature({
      signingSecret: await deps.signingSecret(),
      signature: header(event, "x-slack-signature"),
      timestamp: header(event, "x-slack-request-timestamp"),
      rawBody: body,
      nowSeconds: Math.floor(deps.now().getTime() / 1000),
    });
    if (!verdict.ok) {
      deps.log("slack request refused", { route, reason: verdict.reason });
      return fail(401, "unauthorized", verdict.reason === "stale" ? "the request timestamp is more than 300 s off" : "invalid or missing Slack signature");
    }
    const kind = classify(route, body);
    if ("answer" in kind) return kind.answer;
    const now = deps.now();
    const retry = header(event, "x-slack-retry-num");
    if (!(await deps.store.recordDelivery(kind.key, now))) {
      deps.log("slack redelivery ignored", { route, key: kind.key, retry: retry ?? null });
      return route === "commands" ? reply(200, { response_type: "ephemeral", text: "Already on it." }) : reply(200);
    }
    const delivery: SlackDelivery = { kind: route === "commands" ? "command" : route === "events" ? "event" : "interaction", key: kind.key, body, receivedAt: now.toISOString() };
    try {
      await deps.queue.enqueue(delivery);
    } catch (err) {
      // Not enqueued: forget it so Slack's retry is taken, and answer 500 so Slack retries.
      await deps.store.forgetDelivery(kind.key);
      throw err;
    }
    deps.log("slack delivery enqueued", { route, key: kind.key, retry: retry ?? null });
    return route === "commands" ? reply(200, { response_type: "ephemeral", text: "Working on it…" }) : reply(200);
  };
}
