/**
 * `sandbox git-credential <get|store|erase> --socket PATH`: git's credential helper (issue 23,
 * https://git-scm.com/docs/git-credential), configured by the boot as
 * `credential.helper=!node <cli> git-credential --socket <SIDECAR_SOCKET>` (git appends the
 * action). git writes `key=value` lines and a blank line to stdin; for `get` the helper prints
 * `username=` and `password=` lines, which git uses for that one request and never writes to
 * `.git/config` or disk. The credential comes from the sidecar's socket (the sidecar asks the
 * control plane), so the org's token is never in the agent's environment.
 *
 * Every failure (no socket, sidecar or control plane down, no credential for the repository)
 * prints nothing and exits 0, with a one-line reason on stderr: git then tries its next helper
 * or fails with its own message. `store` and `erase` do nothing (nothing is ever stored). Only
 * http and https are asked for.
 */
import { SocketUnavailableError, socketJson, type SocketClientOptions } from "./socket-client";
import { SidecarRequestError } from "./sidecar-client";

const MAX_INPUT_BYTES = 64 * 1024;

/** git's attributes for one request; multi-valued `key[]` attributes (wwwauth[], capability[]) are not needed here and dropped. */
export type CredentialAttributes = Record<string, string>;

export interface CredentialRequest {
  protocol: "http" | "https";
  host: string;
  path?: string;
}

/** Parses git's `key=value` lines up to the first blank line; later values of a key win, as in git. */
export function parseCredentialInput(text: string): CredentialAttributes {
  const attributes: CredentialAttributes = {};
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line === "") break;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    if (key.endsWith("[]")) continue;
    attributes[key] = line.slice(eq + 1);
  }
  return attributes;
}

/**
 * The request to forward, or null when the helper should stay silent (not http/https, no host).
 * git breaks a URL into protocol/host/path for helpers; a bare `url=` (from `git credential
 * fill`) is broken up the same way.
 */
export function credentialRequest(attributes: CredentialAttributes): CredentialRequest | null {
  let { protocol, host, path } = attributes;
  if ((protocol === undefined || host === undefined) && attributes.url) {
    try {
      const url = new URL(attributes.url);
      protocol = url.protocol.replace(/:$/, "");
      host = url.host;
      path = url.pathname.replace(/^\//, "") || undefined;
    } catch {
      return null;
    }
  }
  if (protocol !== "http" && protocol !== "https") return null;
  if (!host) return null;
  return path ? { protocol, host, path } : { protocol, host };
}

/** The lines `get` prints; a value git could not read back as one line is refused. */
export function formatCredential(credential: { username: string; password: string }): string[] {
  for (const value of [credential.username, credential.password]) {
    if (value === "" || /[\0\r\n]/.test(value)) throw new Error("the credential is not a single-line value");
  }
  return [`username=${credential.username}`, `password=${credential.password}`];
}

/** Reads stdin up to the blank line that ends git's request (or EOF). */
export async function readCredentialInput(stdin: AsyncIterable<string | Buffer> | Iterable<string | Buffer>): Promise<string> {
  let text = "";
  for await (const chunk of stdin) {
    text += typeof chunk === "string" ? chunk : chunk.toString("utf8");
    if (/(^|\n)\r?\n/.test(text) || text.length > MAX_INPUT_BYTES) break;
  }
  return text;
}

export interface GitCredentialIo {
  /** `--socket`, else `SIDECAR_SOCKET`. */
  socket: Omit<SocketClientOptions, "socketPath"> & { socketPath: string | undefined };
  stdin: AsyncIterable<string | Buffer> | Iterable<string | Buffer>;
  out: (line: string) => void;
  err: (line: string) => void;
}

function describe(request: CredentialRequest): string {
  return `${request.protocol}://${request.host}${request.path ? `/${request.path}` : ""}`;
}

/** Runs one helper action; never throws for a failed `get` (git must fall back, not crash). */
export async function gitCredentialCommand(action: string, io: GitCredentialIo): Promise<void> {
  const input = await readCredentialInput(io.stdin);
  // store/erase: nothing is ever stored. git asks helpers to ignore operations they do not know.
  if (action !== "get") return;
  const request = credentialRequest(parseCredentialInput(input));
  if (!request) return;
  const { socketPath } = io.socket;
  if (!socketPath) {
    io.err("git-credential: no sidecar socket (--socket or SIDECAR_SOCKET); no credential given");
    return;
  }
  try {
    const credential = await socketJson<{ username?: unknown; password?: unknown }>({ ...io.socket, socketPath }, "POST", "/git/credential", request);
    if (typeof credential.username !== "string" || typeof credential.password !== "string") {
      throw new Error("the sidecar's answer has no username and password");
    }
    const lines = formatCredential({ username: credential.username, password: credential.password });
    for (const line of lines) io.out(line);
  } catch (err) {
    io.err(`git-credential: no credential for ${describe(request)}: ${reason(err)}`);
  }
}

/** A one-line reason without secrets: the sidecar's error code and message, or a connection failure. */
function reason(err: unknown): string {
  if (err instanceof SidecarRequestError) return `${err.status} ${err.code}: ${err.message}`;
  if (err instanceof SocketUnavailableError) return err.message;
  const code = (err as NodeJS.ErrnoException).code;
  if (err instanceof Error) return code ? `${err.message} (${code})` : err.message;
  return "unknown error";
}
