/** Helpers for the sidecar's in-sandbox Unix socket in tests (issue 23). */
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Unix socket paths must stay under 108 bytes: a short random name straight under the temp dir. */
export function shortSocketPath(): string {
  return join(tmpdir(), `sc-${randomBytes(4).toString("hex")}.sock`);
}

/** One HTTP request over the socket; `body` is JSON-encoded unless it is already a string. */
export function socketCall(socketPath: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const req = request({ socketPath, method, path, headers: payload === undefined ? {} : { "content-type": "application/json" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        try {
          resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}
