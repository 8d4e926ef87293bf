/**
 * Request/response plumbing for the sidecar's plain `node:http` server: bounded JSON bodies
 * (413 past the limit), JSON answers, and the `{"error":{"code","message"}}` shape.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { invalidRequest, payloadTooLarge } from "./errors";

export const MAX_BODY_BYTES = 64 * 1024;

export async function readJsonBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<unknown> {
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limit) throw payloadTooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw payloadTooLarge(limit);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidRequest("request body is not valid JSON");
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(payload) });
  res.end(payload);
}

export function sendError(res: ServerResponse, status: number, code: string, message: string, extra: Record<string, unknown> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { error: { code, message, ...extra } });
}
