/**
 * `tail -f` for a service's log file, feeding the SSE log stream: first the last complete lines
 * (at most `LOG_TAIL_BYTES`), then every new complete line as it is appended. Services write
 * to the file directly (not through the sidecar), so logs survive a sidecar restart and the
 * follower only ever reads. A file that shrinks (truncated by hand) is followed from its start.
 */
import { watch, type FSWatcher } from "node:fs";
import { open, stat } from "node:fs/promises";

export const LOG_TAIL_BYTES = 64 * 1024;
const READ_CHUNK = 256 * 1024;
/** fs.watch can miss events on some filesystems (overlay, network); a slow poll backs it up. */
const POLL_MS = 1_000;

async function readRange(file: string, start: number, end: number): Promise<Buffer> {
  const handle = await open(file, "r");
  try {
    const buf = Buffer.alloc(end - start);
    const { bytesRead } = await handle.read(buf, 0, buf.length, start);
    return buf.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Splits at newlines; returns the complete lines and how many bytes they span. */
export function completeLines(buf: Buffer): { lines: string[]; consumed: number } {
  const last = buf.lastIndexOf(0x0a);
  if (last < 0) return { lines: [], consumed: 0 };
  const lines = buf
    .subarray(0, last)
    .toString("utf8")
    .split("\n")
    .map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  return { lines, consumed: last + 1 };
}

/** The last complete lines of `file` and the offset a follower continues from. */
export async function readTail(file: string, maxBytes = LOG_TAIL_BYTES): Promise<{ lines: string[]; offset: number }> {
  const { size } = await stat(file);
  const start = Math.max(0, size - maxBytes);
  let buf = await readRange(file, start, size);
  let base = start;
  if (start > 0) {
    // Started mid-file: drop the partial first line.
    const firstNewline = buf.indexOf(0x0a);
    if (firstNewline < 0) return { lines: [], offset: start };
    buf = buf.subarray(firstNewline + 1);
    base = start + firstNewline + 1;
  }
  const { lines, consumed } = completeLines(buf);
  return { lines, offset: base + consumed };
}

export class LogFollower {
  private watcher: FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;
  private draining = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly file: string,
    private offset: number,
    private readonly onLines: (lines: string[]) => void,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  start(): void {
    try {
      this.watcher = watch(this.file, () => this.kick());
      this.watcher.on("error", () => undefined);
    } catch {
      this.watcher = null; // polling alone still follows the file
    }
    this.timer = setInterval(() => this.kick(), POLL_MS);
    this.timer.unref();
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = true;
    void this.drain()
      .catch((err: unknown) => this.onError(err))
      .finally(() => {
        this.draining = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      let size: number;
      try {
        ({ size } = await stat(this.file));
      } catch (err) {
        // Deleted by hand: follow it again from the start once a service writes it anew.
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
        this.offset = 0;
        return;
      }
      if (size < this.offset) this.offset = 0;
      if (size === this.offset) return;
      const buf = await readRange(this.file, this.offset, Math.min(size, this.offset + READ_CHUNK));
      let { lines, consumed } = completeLines(buf);
      if (consumed === 0) {
        // No newline in a full chunk: a very long line, passed on as is rather than held forever.
        if (buf.length < READ_CHUNK) return;
        lines = [buf.toString("utf8")];
        consumed = buf.length;
      }
      this.offset += consumed;
      if (!this.stopped && lines.length > 0) this.onLines(lines);
    }
  }
}
