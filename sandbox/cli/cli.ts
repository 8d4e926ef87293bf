/**
 * The in-sandbox CLI (seed 003 §6.11, issue 7 item 4): `services ...` talks to the sidecar,
 * `env apply|scrub` generates or removes env files locally (with the org's values from the
 * sidecar's socket when `SIDECAR_SOCKET` is set), `git-credential` is git's credential helper
 * (issue 23). `runCli` receives its environment, stdin and output as arguments so tests run
 * it in-process; `main.ts` wires the real process.
 * Exit codes: 0 done, 1 the operation failed (sidecar error, validation problems), 2 usage,
 * 130 interrupted.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { EnvCommandError, envApply, envScrub, sidecarEnvValues } from "./env-command";
import { gitCredentialCommand } from "./git-credential";
import { servicesCommand, UsageError } from "./services-command";
import { SidecarClient, SidecarRequestError, type SidecarClientOptions } from "./sidecar-client";
import type { SocketClientOptions } from "./socket-client";

export const USAGE = `usage:
  sandbox services list [--json]
  sandbox services start [NAME]        (no NAME: every defined service)
  sandbox services stop NAME | restart NAME
  sandbox services logs NAME           (follows until interrupted)
  sandbox services expose PORT
  sandbox env apply --spec FILE|JSON [--values FILE]
  sandbox env scrub --spec FILE|JSON
  sandbox git-credential [--socket PATH] get|store|erase   (git's credential helper)
environment: SIDECAR_URL (default http://127.0.0.1:4000), SIDECAR_TOKEN, WORKSPACE_DIR,
  SIDECAR_SOCKET (the sidecar's in-sandbox socket: git credentials, org values for env apply)`;

export interface CliDeps {
  env: Record<string, string | undefined>;
  out: (line: string) => void;
  err: (line: string) => void;
  signal?: AbortSignal;
  /** Overrides for the sidecar client (tests: fewer retries). */
  client?: Partial<SidecarClientOptions>;
  /** Overrides for the socket client (tests: clock, sleep, retry budget). */
  socket?: Partial<Omit<SocketClientOptions, "socketPath">>;
  /** git's request to `git-credential`; default none (EOF at once). */
  stdin?: AsyncIterable<string | Buffer> | Iterable<string | Buffer>;
}

export async function runCli(argv: string[], deps: CliDeps): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        spec: { type: "string" },
        values: { type: "string" },
        socket: { type: "string" },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    deps.err(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    return 2;
  }
  const { values: flags, positionals } = parsed;
  const [group, action, arg, ...extra] = positionals;
  if (flags.help || group === undefined) {
    deps.out(USAGE);
    return flags.help ? 0 : 2;
  }
  const socketPath = flags.socket ?? (deps.env.SIDECAR_SOCKET || undefined);
  const socket = { ...deps.socket, signal: deps.signal, socketPath };
  try {
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`);
    if (group === "git-credential") {
      // git runs `<helper> get`: the action is the first positional after the command.
      if (action === undefined) throw new UsageError("git-credential needs an action: get, store or erase");
      if (arg !== undefined) throw new UsageError(`unexpected argument: ${arg}`);
      await gitCredentialCommand(action, { socket, stdin: deps.stdin ?? [], out: deps.out, err: deps.err });
      return 0;
    }
    if (group === "services") {
      const client = new SidecarClient({ url: deps.env.SIDECAR_URL ?? "http://127.0.0.1:4000", token: deps.env.SIDECAR_TOKEN, ...deps.client });
      await servicesCommand({ client, out: deps.out, json: flags.json, signal: deps.signal }, action, arg);
      return 0;
    }
    if (group === "env") {
      if (arg !== undefined) throw new UsageError(`unexpected argument: ${arg}`);
      if (flags.spec === undefined) throw new UsageError(`env ${action ?? ""} needs --spec FILE`);
      const io = {
        workspaceDir: resolve(deps.env.WORKSPACE_DIR ?? "/home/user/workspace"),
        env: deps.env,
        out: deps.out,
        sidecarValues: socketPath ? () => sidecarEnvValues({ ...socket, socketPath }) : undefined,
      };
      if (action === "apply") await envApply(io, { spec: flags.spec, values: flags.values });
      else if (action === "scrub") await envScrub(io, { spec: flags.spec });
      else throw new UsageError(`unknown env command: ${action ?? "(none)"}`);
      return 0;
    }
    throw new UsageError(`unknown command: ${group}`);
  } catch (err) {
    if (deps.signal?.aborted) return 130;
    if (err instanceof UsageError) {
      deps.err(`${err.message}\n${USAGE}`);
      return 2;
    }
    if (err instanceof EnvCommandError) {
      deps.err(`env ${action ?? ""} failed; nothing was changed:`);
      for (const p of err.problems) deps.err(`  ${p}`);
      return 1;
    }
    if (err instanceof SidecarRequestError) {
      deps.err(`sidecar: ${err.status} ${err.code}: ${err.message}`);
      return 1;
    }
    deps.err(err instanceof Error ? err.message : String(err));
    return 1;
  }
}
