/**
 * Long-running processes inside the sandbox (seed 003 §6.10). Each service runs as its own
 * process group (`sh -c <command>`, detached) with stdout and stderr appended to
 * `<stateDir>/logs/<name>.log`; stop signals the whole group; restart is stop then start.
 * Definitions, the desired state and the leader pid persist in `state.json`, so a sidecar that
 * restarts adopts services still running and starts again the ones lost while running (the
 * sandbox came back from a snapshot). A service that exited on its own stays stopped.
 * Operations on one service are serialised; different services proceed concurrently.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, open, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { groupIsOurs, killGroup, leaderAlive, processStartTime } from "../shared/process-group";
import { OutsideWorkspaceError, PathNotFoundError, resolveInsideWorkspace } from "../shared/workspace-path";
import { conflict, invalidRequest, notFound } from "./errors";
import {
  loadState,
  logFile,
  saveState,
  type ServiceDefinition,
  type ServiceRecord,
  type ServiceStatus,
  type SidecarState,
} from "./service-state";

/** What the API shows of a service (seed 003 §4 `ServiceInfo`, plus desired state and exit code). */
export interface ServiceInfo {
  name: string;
  command: string;
  cwd: string;
  pid: number | null;
  status: ServiceStatus;
  desired: "running" | "stopped";
  startedAt: number | null;
  exitCode: number | null;
  logFile: string;
}

export interface ServiceManagerOptions {
  workspaceDir: string;
  stateDir: string;
  /** Environment every service inherits (the caller strips the sidecar token from it). */
  env: NodeJS.ProcessEnv;
  now?: () => number;
  /** SIGTERM grace before SIGKILL on stop. */
  stopGraceMs?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

/** Typed partial update of a record (Object.assign alone would not check the field types). */
function settle(rec: ServiceRecord, change: Partial<ServiceRecord>): void {
  Object.assign(rec, change);
}

export class ServiceManager {
  private readonly children = new Map<string, ChildProcess>();
  private readonly stopping = new Set<number>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private saving: Promise<void> = Promise.resolve();
  /** A closed manager no longer writes the state file: a successor sidecar owns it now. */
  private closed = false;
  private readonly now: () => number;
  private readonly log: NonNullable<ServiceManagerOptions["log"]>;

  private constructor(
    private readonly opts: ServiceManagerOptions,
    private readonly state: SidecarState,
  ) {
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? (() => undefined);
  }

  static async open(opts: ServiceManagerOptions): Promise<ServiceManager> {
    const manager = new ServiceManager(opts, await loadState(opts.stateDir));
    await manager.recover();
    return manager;
  }

  /** Adopt live services, restart the ones lost while running, settle the rest as stopped. */
  private async recover(): Promise<void> {
    for (const rec of this.state.services) {
      if (rec.pid !== null && leaderAlive(rec.pid, rec.startTime)) {
        rec.status = "running";
        continue;
      }
      const lostWhileRunning = rec.status === "running";
      if (lostWhileRunning && rec.desired === "running") {
        try {
          await this.withLock(rec.name, () => this.startRecord(rec));
          this.log("service restored", { service: rec.name });
        } catch (err) {
          settle(rec, { status: "error", pid: null });
          this.log("service restore failed", { service: rec.name, error: err instanceof Error ? err.message : String(err) });
        }
        continue;
      }
      if (lostWhileRunning) rec.status = "stopped";
      rec.pid = null;
    }
    await this.save();
  }

  list(): ServiceInfo[] {
    this.refreshAdopted();
    return this.state.services.map((rec) => this.info(rec));
  }

  get(name: string): ServiceInfo {
    this.refreshAdopted();
    return this.info(this.record(name));
  }

  logFile(name: string): string {
    return logFile(this.opts.stateDir, this.record(name).name);
  }

  get exposedPort(): number | null {
    return this.state.exposedPort;
  }

  async setExposedPort(port: number): Promise<void> {
    this.state.exposedPort = port;
    await this.save();
  }

  /**
   * Defines (or redefines) a service. Redefining a running service with a different command or
   * cwd is a conflict: the running process would silently disagree with its definition.
   */
  async define(def: ServiceDefinition): Promise<{ created: boolean; service: ServiceInfo }> {
    await this.checkCwd(def.cwd, false);
    return this.withLock(def.name, async () => {
      const existing = this.state.services.find((s) => s.name === def.name);
      if (existing) {
        const same = existing.command === def.command && existing.cwd === def.cwd;
        if (!same && existing.status === "running") {
          throw conflict(`service "${def.name}" is running with another definition; stop it first`);
        }
        existing.command = def.command;
        existing.cwd = def.cwd;
        await this.save();
        return { created: false, service: this.info(existing) };
      }
      const rec: ServiceRecord = { ...def, desired: "stopped", status: "stopped", pid: null, pgid: null, startTime: null, startedAt: null, exitCode: null };
      this.state.services.push(rec);
      await this.save();
      return { created: true, service: this.info(rec) };
    });
  }

  /** Starts a defined service; starting one that runs is a no-op (idempotent for the boot sequence). */
  start(name: string): Promise<ServiceInfo> {
    // The record is looked up under the lock: a service removed meanwhile is a 404, never restarted.
    return this.withLock(name, async () => {
      const rec = this.record(name);
      await this.startRecord(rec);
      return this.info(rec);
    });
  }

  stop(name: string): Promise<ServiceInfo> {
    return this.withLock(name, async () => {
      const rec = this.record(name);
      await this.stopRecord(rec);
      return this.info(rec);
    });
  }

  restart(name: string): Promise<ServiceInfo> {
    return this.withLock(name, async () => {
      const rec = this.record(name);
      await this.stopRecord(rec);
      await this.startRecord(rec);
      return this.info(rec);
    });
  }

  /**
   * Stops the service (its whole process group, orphans included) and forgets it: definition,
   * persisted record and log file. A service that survives SIGKILL stays defined (the error says
   * so). Answers the service as it was last seen, stopped.
   */
  remove(name: string): Promise<ServiceInfo> {
    return this.withLock(name, async () => {
      const rec = this.record(name);
      await this.stopRecord(rec);
      const info = this.info(rec);
      this.state.services = this.state.services.filter((s) => s !== rec);
      this.children.delete(rec.name);
      await this.save();
      await rm(info.logFile, { force: true });
      this.log("service removed", { service: rec.name });
      return info;
    });
  }

  /** Waits for in-flight operations; services keep running unless `stopServices` (tests, shutdown of a scratch sidecar). */
  async close(opts: { stopServices?: boolean } = {}): Promise<void> {
    await Promise.all([...this.locks.values()]);
    if (opts.stopServices) {
      await Promise.all(this.state.services.map((rec) => this.withLock(rec.name, () => this.stopRecord(rec))));
    }
    await this.saving;
    this.closed = true;
    for (const child of this.children.values()) child.removeAllListeners("exit");
  }

  private record(name: string): ServiceRecord {
    const rec = this.state.services.find((s) => s.name === name);
    if (!rec) throw notFound(`no service named "${name}"`);
    return rec;
  }

  private info(rec: ServiceRecord): ServiceInfo {
    return {
      name: rec.name,
      command: rec.command,
      cwd: rec.cwd,
      pid: rec.pid,
      status: rec.status,
      desired: rec.desired,
      startedAt: rec.startedAt,
      exitCode: rec.exitCode,
      logFile: logFile(this.opts.stateDir, rec.name),
    };
  }

  private async checkCwd(cwd: string, mustExist: boolean): Promise<string> {
    try {
      return await resolveInsideWorkspace(this.opts.workspaceDir, cwd, { mustExist });
    } catch (err) {
      if (err instanceof OutsideWorkspaceError) throw invalidRequest(`cwd: ${err.message}`, "outside_workspace");
      if (err instanceof PathNotFoundError) throw invalidRequest(`cwd: ${err.message}`);
      throw err;
    }
  }

  /** Services adopted from an earlier sidecar have no exit event: their liveness is polled here. */
  private refreshAdopted(): void {
    for (const rec of this.state.services) {
      if (rec.pid === null || this.children.has(rec.name) || leaderAlive(rec.pid, rec.startTime)) continue;
      settle(rec, { status: "stopped", pid: null });
      void this.save();
    }
  }

  private async startRecord(rec: ServiceRecord): Promise<void> {
    if (rec.pid !== null && leaderAlive(rec.pid, rec.startTime)) return;
    // Orphans of an earlier run (the leader exited, children kept the group): never two copies.
    if (rec.pgid !== null && groupIsOurs(rec.pgid, rec.startTime)) await killGroup(rec.pgid, this.opts.stopGraceMs);
    const cwd = await this.checkCwd(rec.cwd, true);
    const file = logFile(this.opts.stateDir, rec.name);
    await mkdir(dirname(file), { recursive: true });
    const log = await open(file, "a", 0o600);
    let child: ChildProcess;
    // A command that exits at once (`exit 3`) may do so before the start is recorded: its exit is
    // held here and applied right after, never lost.
    const exit: { recorded: boolean; early?: { code: number | null } } = { recorded: false };
    try {
      await log.write(`[sidecar] ${new Date(this.now()).toISOString()} starting ${rec.name}\n`);
      child = spawn("sh", ["-c", rec.command], { cwd, detached: true, stdio: ["ignore", log.fd, log.fd], env: this.opts.env });
      const spawned = child;
      spawned.once("exit", (code) => {
        if (exit.recorded && spawned.pid !== undefined) this.onExit(rec, spawned, spawned.pid, code);
        else exit.early = { code };
      });
    } finally {
      await log.close();
    }
    const pid = child.pid;
    if (pid === undefined) {
      const [err] = (await once(child, "error")) as [Error];
      throw new Error(`service "${rec.name}" failed to spawn: ${err.message}`, { cause: err });
    }
    child.unref();
    this.children.set(rec.name, child);
    settle(rec, { pid, pgid: pid, startTime: processStartTime(pid), status: "running", desired: "running", startedAt: this.now(), exitCode: null });
    exit.recorded = true;
    if (exit.early) this.onExit(rec, child, pid, exit.early.code);
    await this.save();
    this.log("service started", { service: rec.name, pid });
  }

  private onExit(rec: ServiceRecord, child: ChildProcess, pid: number, code: number | null): void {
    if (this.children.get(rec.name) === child) this.children.delete(rec.name);
    // stopRecord owns the outcome of a stop it asked for; a stale exit of an older run is ignored.
    if (this.stopping.has(pid) || rec.pid !== pid) return;
    settle(rec, { status: code === 0 ? "stopped" : "error", exitCode: code, pid: null });
    void this.save();
    this.log("service exited", { service: rec.name, pid, exitCode: code });
  }

  private async stopRecord(rec: ServiceRecord): Promise<void> {
    rec.desired = "stopped";
    const pgid = rec.pgid ?? rec.pid;
    if (pgid !== null && groupIsOurs(pgid, rec.startTime)) {
      this.stopping.add(pgid);
      try {
        const gone = await killGroup(pgid, this.opts.stopGraceMs);
        if (!gone) throw new Error(`service "${rec.name}" (process group ${pgid}) survived SIGKILL`);
      } finally {
        this.stopping.delete(pgid);
      }
      this.log("service stopped", { service: rec.name, pgid });
    }
    settle(rec, { status: "stopped", pid: null, pgid: null, startTime: null, exitCode: rec.status === "running" ? null : rec.exitCode });
    await this.save();
  }

  private withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(name) ?? Promise.resolve();
    const next = previous.then(fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(name, settled);
    void settled.then(() => {
      if (this.locks.get(name) === settled) this.locks.delete(name);
    });
    return next;
  }

  private save(): Promise<void> {
    if (this.closed) return this.saving;
    this.saving = this.saving
      .then(() => saveState(this.opts.stateDir, this.state))
      .catch((err: unknown) => this.log("state save failed", { error: err instanceof Error ? err.message : String(err) }));
    return this.saving;
  }
}
