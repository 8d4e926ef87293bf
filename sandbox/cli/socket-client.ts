/**
 * The CLI's client for the sidecar's in-sandbox socket (`SIDECAR_SOCKET`, issue 23): HTTP over
 * a Unix domain socket, no auth header (the socket's 0600 mode is the auth), JSON in and out,
 * the sidecar's `{"error":{code,message}}` surfaced as `SidecarRequestError`.
 *
 * The boot clones right after starting the sidecar, so git may ask before the socket exists:
 * a missing socket (ENOENT) or a refused connection is retried with a growing delay for up to
 * `retryForMs` in all, then given up.
 */
import { request } from "node:http";
import { SidecarRequestError } from "./sidecar-client";

export const SOCKET_RETRY_FOR_MS = 20_000;
export const SOCKET_REQUEST_TIMEOUT_MS = 15_000;
const MAX_ANSWER_BYTES = 1024 * 1024;

export interface SocketClientOptions {
  socketPath: string;
  /** Give up connecting after this long in all. */
  retryForMs?: number;
  /** One request, once connected (the sidecar's own control-plane call is bounded at 10 s). */
  timeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
  signal?: AbortSignal;
}

/** The socket is not there (yet) or nobody listens on it. */
export class SocketUnavailableError extends Error {
  constructor(
    readonly socketPath: string,
    readonly reason: string,
  ) {
    super(`the sidecar socket ${socketPath} is not accepting connections (${reason})`);
    this.name = "SocketUnavailableError";
  }
}

const RETRYABLE = new Set(["ENOENT", "ECONNREFUSED", "EAGAIN"]);

function once(opts: SocketClientOptions, method: string, path: string, body: string | undefined): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { accept: "application/json" };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(body);
    }
    const req = request(
      { socketPath: opts.socketPath, path, method, headers, timeout: opts.timeoutMs ?? SOCKET_REQUEST_TIMEOUT_MS, signal: opts.signal },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) req.destroy(new Error("the sidecar's answer is too large"));
          else chunks.push(chunk);
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`the sidecar did not answer ${method} ${path} in time`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** `method path` over the socket: the parsed JSON answer of a 2xx, else `SidecarRequestError`. */
export async function socketJson<T>(opts: SocketClientOptions, method: string, path: string, body?: unknown): Promise<T> {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const now = opts.now ?? Date.now;
  const deadline = now() + (opts.retryForMs ?? SOCKET_RETRY_FOR_MS);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  let delay = 50;
  let answer: { status: number; text: string };
  for (;;) {
    try {
      answer = await once(opts, method, path, payload);
      break;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (!code || !RETRYABLE.has(code) || opts.signal?.aborted) throw err;
      const left = deadline - now();
      if (left <= 0) throw new SocketUnavailableError(opts.socketPath, code);
      await sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, 1_000);
    }
  }
  let parsed: unknown;
  try {
    parsed = answer.text === "" ? {} : JSON.parse(answer.text);
  } catch {
    throw new SidecarRequestError(answer.status, "unknown", `the sidecar answered ${answer.status} with a body that is not JSON`);
  }
  if (answer.status >= 200 && answer.status < 300) return parsed as T;
  const error = (parsed as { error?: { code?: unknown; message?: unknown } }).error;
  throw new SidecarRequestError(
    answer.status,
    typeof error?.code === "string" ? error.code : "unknown",
    typeof error?.message === "string" ? error.message : `status ${answer.status}`,
  );
}
