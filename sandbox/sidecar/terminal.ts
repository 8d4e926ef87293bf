/**
 * Interactive shell over WebSocket (seed 003 §6.9): one PTY per connection, `xterm-256color`,
 * cwd = the workspace. Client frames are keystrokes (text or binary) or the JSON control frame
 * `{"type":"resize","cols","rows"}`; server frames are PTY output as text. The upgrade itself is
 * authenticated by the server (header only, never a query string) before this runs.
 * Closing the socket hangs up the shell's process group; the shell exiting closes the socket;
 * the access token that opened it expiring closes both (1008 "access token expired").
 */
import { spawn as spawnPty, type IPty } from "@lydell/node-pty";
import type { RawData, WebSocket } from "ws";
import * as z from "zod";

const ResizeFrameSchema = z.object({
  type: z.literal("resize"),
  cols: z.number().int().min(1).max(1_000),
  rows: z.number().int().min(1).max(1_000),
});

export type ResizeFrame = z.infer<typeof ResizeFrameSchema>;

/**
 * A resize control frame; "invalid" for a `{"type":"resize"}` frame with bad dimensions (dropped,
 * never typed into the shell); null when the text is keystrokes (JSON-looking typing included).
 */
export function parseResizeFrame(text: string): ResizeFrame | "invalid" | null {
  if (!text.startsWith("{")) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || (value as { type?: unknown }).type !== "resize") return null;
  const parsed = ResizeFrameSchema.safeParse(value);
  return parsed.success ? parsed.data : "invalid";
}

export interface TerminalOptions {
  cwd: string;
  /** argv of the shell, e.g. `["bash", "-l"]`. */
  command: string[];
  env: NodeJS.ProcessEnv;
}

/** Stop reading the PTY while this much output waits to be sent, so a flood cannot exhaust memory. */
const HIGH_WATER = 1024 * 1024;

export interface TerminalSession {
  close(): void;
  /** The access token that opened it expired: a close frame saying so, then the shell hangs up. */
  expire(): void;
}

/** Close code and reason when the access token that opened a terminal expires (1008: policy violation). */
export const ACCESS_EXPIRED_CLOSE = { code: 1008, reason: "access token expired" } as const;

export function attachTerminal(ws: WebSocket, opts: TerminalOptions): TerminalSession {
  const [file = "bash", ...args] = opts.command;
  const pty: IPty = spawnPty(file, args, {
    name: "xterm-256color",
    cols: 80,
    rows: 24,
    cwd: opts.cwd,
    env: { ...opts.env, TERM: "xterm-256color" },
  });
  let exited = false;
  let paused = false;

  pty.onData((data) => {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(data, () => {
      if (paused && ws.bufferedAmount < HIGH_WATER / 4) {
        paused = false;
        pty.resume();
      }
    });
    if (!paused && ws.bufferedAmount > HIGH_WATER) {
      paused = true;
      pty.pause();
    }
  });
  pty.onExit(({ exitCode }) => {
    exited = true;
    if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(1000, `shell exited ${exitCode}`);
  });

  ws.on("message", (data: RawData, isBinary: boolean) => {
    const text = Buffer.isBuffer(data) ? data.toString("utf8") : Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data).toString("utf8");
    if (!isBinary) {
      const resize = parseResizeFrame(text);
      if (resize === "invalid") return;
      if (resize) {
        if (!exited) pty.resize(resize.cols, resize.rows);
        return;
      }
    }
    if (!exited) pty.write(text);
  });

  const hangUp = () => {
    if (exited) return;
    exited = true;
    try {
      // The shell leads its own session and group: SIGHUP reaches whatever it started too.
      process.kill(-pty.pid, "SIGHUP");
    } catch {
      pty.kill("SIGHUP");
    }
  };
  ws.on("close", hangUp);
  ws.on("error", hangUp);
  return {
    close: () => {
      hangUp();
      ws.terminate();
    },
    expire: () => {
      hangUp();
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(ACCESS_EXPIRED_CLOSE.code, ACCESS_EXPIRED_CLOSE.reason);
    },
  };
}
