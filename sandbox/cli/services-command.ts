/**
 * `services list|start [NAME]|stop NAME|restart NAME|logs NAME|expose PORT` (seed 003 §6.11):
 * thin calls to the sidecar API. `start` without a name starts every defined service, which is
 * what the boot sequence runs (seed 003 §6.4 phase 2 step 7).
 */
import { SidecarRequestError, type SidecarClient } from "./sidecar-client";

/** A command line the CLI cannot run as given (exit code 2). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

interface ServiceView {
  name: string;
  status: string;
  pid: number | null;
  command: string;
}

export interface ServicesIo {
  client: SidecarClient;
  out: (line: string) => void;
  json: boolean;
  /** Cancels the request in flight and ends `logs` (Ctrl-C in a terminal, the test's abort in tests). */
  signal?: AbortSignal;
}

function describe(s: ServiceView): string {
  return `${s.name}\t${s.status}\t${s.pid ?? "-"}\t${s.command}`;
}

export async function servicesCommand(io: ServicesIo, action: string | undefined, arg: string | undefined): Promise<void> {
  const { client, out } = io;
  const name = arg === undefined ? "" : encodeURIComponent(arg);
  switch (action) {
    case "list": {
      const body = await client.json<{ services: ServiceView[]; exposedPort: number | null }>("GET", "/services", undefined, io.signal);
      if (io.json) return out(JSON.stringify(body));
      out("NAME\tSTATUS\tPID\tCOMMAND");
      for (const s of body.services) out(describe(s));
      if (body.exposedPort !== null) out(`exposed port: ${body.exposedPort}`);
      return;
    }
    case "start":
    case "stop":
    case "restart": {
      if (arg === undefined && action !== "start") throw new UsageError(`services ${action} needs a service name`);
      if (arg !== undefined) {
        const { service } = await client.json<{ service: ServiceView }>("POST", `/services/${name}/${action}`, undefined, io.signal);
        out(io.json ? JSON.stringify(service) : describe(service));
        return;
      }
      // Start everything: one service failing does not keep the others down.
      const { services } = await client.json<{ services: ServiceView[] }>("GET", "/services", undefined, io.signal);
      const failed: string[] = [];
      for (const s of services) {
        try {
          const { service } = await client.json<{ service: ServiceView }>("POST", `/services/${encodeURIComponent(s.name)}/start`, undefined, io.signal);
          out(io.json ? JSON.stringify(service) : describe(service));
        } catch (err) {
          if (!(err instanceof SidecarRequestError)) throw err;
          failed.push(`${s.name}: ${err.status} ${err.code}: ${err.message}`);
        }
      }
      if (failed.length > 0) throw new Error(`could not start ${failed.join("; ")}`);
      return;
    }
    case "logs": {
      if (arg === undefined) throw new UsageError("services logs needs a service name");
      await client.stream(`/services/${name}/logs`, out, io.signal);
      return;
    }
    case "expose": {
      const port = Number(arg);
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError("services expose needs a port (1-65535)");
      const body = await client.json<{ exposedPort: number }>("POST", "/expose", { port }, io.signal);
      out(io.json ? JSON.stringify(body) : `exposed port ${body.exposedPort}`);
      return;
    }
    default:
      throw new UsageError(`unknown services command: ${action ?? "(none)"}`);
  }
}
