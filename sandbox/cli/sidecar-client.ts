/**
 * The CLI's client for the sidecar API: bearer auth from SIDECAR_TOKEN, JSON in and out, the
 * sidecar's `{"error":{code,message}}` surfaced as `SidecarRequestError`, and the seed's retry
 * policy (seed 003 §5 "Reliability": up to 10 tries, 1 s apart, while the sidecar is not
 * listening yet, since the boot sequence may run the CLI before the sidecar is up).
 */

export class SidecarRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "SidecarRequestError";
  }
}

export interface SidecarClientOptions {
  url: string;
  token: string | undefined;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  attempts?: number;
  retryDelayMs?: number;
}

function connectionRefused(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code === "ECONNREFUSED" || (err instanceof TypeError && err.message === "fetch failed");
}

export class SidecarClient {
  private readonly fetch: typeof fetch;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly opts: SidecarClientOptions) {
    this.fetch = opts.fetch ?? fetch;
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  private async send(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    const attempts = this.opts.attempts ?? 10;
    const headers: Record<string, string> = {};
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.fetch(`${this.opts.url.replace(/\/+$/, "")}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal,
        });
      } catch (err) {
        if (attempt >= attempts || !connectionRefused(err) || signal?.aborted) throw err;
        await this.sleep(this.opts.retryDelayMs ?? 1_000);
      }
    }
  }

  private async fail(res: Response): Promise<never> {
    const text = await res.text();
    try {
      const { error } = JSON.parse(text) as { error: { code: string; message: string } };
      throw new SidecarRequestError(res.status, error.code, error.message);
    } catch (err) {
      if (err instanceof SidecarRequestError) throw err;
      throw new SidecarRequestError(res.status, "unknown", text.slice(0, 300) || res.statusText);
    }
  }

  async json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const res = await this.send(method, path, body, signal);
    if (!res.ok) return this.fail(res);
    return (await res.json()) as T;
  }

  /** Follows an SSE stream, calling `onData` with each event's data, until the server ends it or `signal` aborts. */
  async stream(path: string, onData: (data: string) => void, signal?: AbortSignal): Promise<void> {
    const res = await this.send("GET", path, undefined, signal);
    if (!res.ok) return this.fail(res);
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame
            .split("\n")
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(l.startsWith("data: ") ? 6 : 5));
          if (data.length > 0) onData(data.join("\n"));
        }
      }
    } catch (err) {
      if (!signal?.aborted) throw err;
    }
  }
}
