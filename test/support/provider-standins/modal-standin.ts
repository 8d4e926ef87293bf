/**
 * Modal as its SDK (modal@0.11.1) documents and validates it, at the SDK surface the provider
 * uses (`ModalSdk`), with state and a clock, for the conformance suite (issue 22 §2, §5, §6).
 *
 * - `apps.fromName(name, {createIfMissing})`: NotFoundError for a missing app unless asked to create it.
 * - `sandboxes.create`: the SDK's own checks first (`timeoutMs` a positive multiple of 1000,
 *   env names `^[a-zA-Z_][a-zA-Z0-9_]*$`); names are unique among the app's running sandboxes
 *   (AlreadyExistsError). Tunnels: one per port opened at create; on the V2 backend encrypted
 *   (TLS) tunnels only, so an unencrypted port gets none. At its timeout a sandbox ends.
 * - `exec`: running sandboxes only; `timeoutMs` a multiple of 1000, `workdir` absolute (the
 *   SDK throws otherwise, before any request).
 * - `snapshotFilesystem`: an image of the filesystem (`im-...`), no processes.
 * - `experimentalSnapshot`: only for sandboxes created with `experimentalEnableSnapshot`;
 *   memory and processes; restorable for 7 days (then the restore fails NOT_FOUND). On the V1
 *   backend it is the SDK's own two calls below with one 55 s wait.
 * - `cpClient.sandboxSnapshot` / `sandboxSnapshotWait` (V1 memory snapshots): the snapshot is
 *   taken at once but becomes ready `memorySnapshotMs` later (simulated clock); a wait holds up to
 *   its `timeout` seconds (the clock moves) and answers `GenericResult` status 1 (success) once
 *   ready, 4 (timeout) before, as Modal's server does. `memorySnapshotFailure` makes it fail (2).
 * - `experimentalFromSnapshot`: a new sandbox whose processes already run, with the snapshotted
 *   sandbox's ports and timeout.
 * - `fromId`: lazy; operations on an unknown or ended sandbox fail NOT_FOUND (nice-grpc ClientError).
 * - `list({appId, tags})`: running sandboxes carrying all the tags.
 */
import { AlreadyExistsError, InvalidError, NotFoundError, type SandboxCreateParams, type SandboxListParams } from "modal";
import type { ModalAppRef, ModalImageRef, ModalProcessLike, ModalSandboxLike, ModalSdk, ModalSnapshotRef, ModalTunnelLike } from "../../../functions/providers/modal/modal-provider";
import { SANDBOX_PORTS } from "../../../functions/providers/sandbox-boot";
import { StandInMachine, type StandInProcesses } from "./standin-machine";

const MEMORY_SNAPSHOT_TTL_MS = 7 * 24 * 3600_000;
const ENV_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function grpcNotFound(what: string): Error {
  return Object.assign(new Error(`/modal.client.ModalClient/Call 5: ${what} not found`), { name: "ClientError", code: 5 });
}

interface Box {
  id: string;
  appId: string;
  name: string | null;
  machine: StandInMachine;
  running: boolean;
  exitCode: number | null;
  tags: Record<string, string>;
  ports: { encrypted: number[]; unencrypted: number[] };
  timeoutMs: number;
  endAt: number;
  snapshotEnabled: boolean;
}

interface Image {
  root: string | null;
  processes: null;
}

interface MemorySnapshot {
  image: { root: string; processes: StandInProcesses | null };
  createdAt: number;
  ports: Box["ports"];
  timeoutMs: number;
  appId: string;
}

export class ModalStandIn implements ModalSdk {
  now = 1_750_000_000_000;
  readonly boxes = new Map<string, Box>();
  readonly appNames = new Set<string>();
  private readonly imageStore = new Map<string, Image>();
  private readonly memorySnapshots = new Map<string, MemorySnapshot>();
  /** V1 memory snapshots being taken: ready at this time (simulated clock). */
  private readonly pendingMemorySnapshots = new Map<string, number>();
  private next = 0;
  /** How long a V1 memory snapshot takes to become ready (Modal: seconds to minutes, by memory size). */
  memorySnapshotMs = 0;
  /** When set, V1 snapshot waits answer failure with this exception text. */
  memorySnapshotFailure: string | null = null;
  /** Every `sandboxSnapshotWait` request, in order. */
  readonly snapshotWaits: { snapshotId: string; timeout: number }[] = [];

  /** `v2`: the backend the client was built for (modal-provider `sandboxBackend`). */
  constructor(readonly backend: "v1" | "v2" = "v2") {}

  /** The clock moves: sandboxes past their timeout end (Modal has no pause). */
  advance(ms: number): void {
    this.now += ms;
    for (const box of this.boxes.values()) {
      if (box.running && box.endAt <= this.now) this.end(box, 0);
    }
  }

  fetch = async (url: string, init?: { headers: Record<string, string> }): Promise<{ ok: boolean; status: number }> => {
    const parsed = new URL(url);
    const match = /^(.+)-(\d+)\.modal\.standin$/.exec(parsed.hostname);
    const box = match ? this.boxes.get(match[1] ?? "") : undefined;
    if (!match || !box || !box.running) throw new Error(`fetch failed: ${parsed.hostname} unreachable`);
    const status = box.machine.answer(Number(match[2]) === SANDBOX_PORTS.opencode ? "opencode" : "preview", parsed.pathname, init?.headers);
    if (status === null) throw new Error(`fetch failed: connection refused on port ${match[2]}`);
    return { ok: status >= 200 && status < 300, status };
  };

  apps = {
    fromName: async (name: string, params?: { createIfMissing?: boolean }): Promise<ModalAppRef> => {
      if (!this.appNames.has(name)) {
        if (!params?.createIfMissing) throw new NotFoundError(`App '${name}' not found`);
        this.appNames.add(name);
      }
      return { appId: `ap-${name}` };
    },
  };

  images = {
    fromId: async (imageId: string): Promise<ModalImageRef> => {
      if (!this.imageStore.has(imageId)) throw new NotFoundError(`Image '${imageId}' not found`);
      return { imageId };
    },
    fromRegistry: (tag: string): ModalImageRef => ({ registry: tag }),
    /** Irreversible, as `images.delete` is: a missing image throws `NotFoundError`. */
    delete: async (imageId: string): Promise<void> => {
      if (!this.imageStore.delete(imageId)) throw new NotFoundError(`Image '${imageId}' not found`);
    },
  };

  sandboxes = {
    create: async (app: ModalAppRef, image: ModalImageRef, params: SandboxCreateParams = {}): Promise<ModalSandboxLike> => {
      if (params.timeoutMs !== undefined && params.timeoutMs <= 0) throw new Error(`timeoutMs must be positive, got ${params.timeoutMs}`);
      if (params.timeoutMs && params.timeoutMs % 1000 !== 0) throw new Error(`timeoutMs must be a multiple of 1000ms, got ${params.timeoutMs}`);
      for (const key of Object.keys(params.env ?? {})) if (!ENV_NAME.test(key)) throw new InvalidError(`Secret key name ${JSON.stringify(key)} is invalid for environment variables.`);
      if (params.name && this.running(app.appId).some((b) => b.name === params.name)) throw new AlreadyExistsError(`Sandbox with name '${params.name}' already exists`);
      const from = "imageId" in image ? this.imageStore.get(String((image as { imageId: string }).imageId)) : undefined;
      const box = this.add({
        appId: app.appId,
        name: params.name ?? null,
        machine: new StandInMachine(from?.root ? { root: from.root, processes: null } : undefined),
        tags: { ...(params.tags ?? {}) },
        ports: { encrypted: params.encryptedPorts ?? [], unencrypted: params.unencryptedPorts ?? [] },
        timeoutMs: params.timeoutMs ?? 300_000,
        snapshotEnabled: params.experimentalEnableSnapshot ?? false,
      });
      return this.handle(box);
    },
    fromId: async (sandboxId: string): Promise<ModalSandboxLike> => {
      const box = this.boxes.get(sandboxId);
      return box ? this.handle(box) : this.ghost(sandboxId);
    },
    fromName: async (appName: string, name: string): Promise<ModalSandboxLike> => {
      const box = this.running(`ap-${appName}`).find((b) => b.name === name);
      if (!box) throw new NotFoundError(`Sandbox with name '${name}' not found in App '${appName}'`);
      return this.handle(box);
    },
    experimentalFromSnapshot: async (snapshot: ModalSnapshotRef, params?: { name?: string | null }): Promise<ModalSandboxLike> => {
      const id = String((snapshot as { snapshotId: string }).snapshotId);
      const snap = this.memorySnapshots.get(id);
      if (!snap || this.now - snap.createdAt > MEMORY_SNAPSHOT_TTL_MS) throw grpcNotFound(`snapshot ${id}`);
      const name = params?.name ?? null;
      if (name && this.running(snap.appId).some((b) => b.name === name)) throw new AlreadyExistsError(`Sandbox with name '${name}' already exists`);
      const box = this.add({ appId: snap.appId, name, machine: new StandInMachine(snap.image), tags: {}, ports: snap.ports, timeoutMs: snap.timeoutMs, snapshotEnabled: true });
      return this.handle(box);
    },
    list: (params: SandboxListParams = {}): AsyncIterable<ModalSandboxLike> => {
      const matching = [...this.boxes.values()].filter(
        (b) => b.running && (!params.appId || b.appId === params.appId) && Object.entries(params.tags ?? {}).every(([k, v]) => b.tags[k] === v),
      );
      const handles = matching.map((b) => this.handle(b));
      return (async function* () {
        yield* handles;
      })();
    },
  };

  /** As in modal@0.11: `fromId` only, no call deletes a memory snapshot (it lives until its 7 days pass). */
  sandboxSnapshots = {
    fromId: async (snapshotId: string): Promise<ModalSnapshotRef> => ({ snapshotId }),
  };

  cpClient = {
    sandboxSnapshot: async (request: { sandboxId: string }): Promise<{ snapshotId: string }> => {
      const box = this.boxes.get(request.sandboxId);
      if (!box || !box.running) throw grpcNotFound(`Sandbox ${request.sandboxId}`);
      if (!box.snapshotEnabled) throw new InvalidError("Sandbox was not created with experimentalEnableSnapshot");
      const snapshotId = this.takeMemorySnapshot(box);
      this.pendingMemorySnapshots.set(snapshotId, this.now + this.memorySnapshotMs);
      return { snapshotId };
    },
    sandboxSnapshotWait: async (request: { snapshotId: string; timeout: number }): Promise<{ result: { status: number; exception: string } }> => {
      this.snapshotWaits.push({ ...request });
      const readyAt = this.pendingMemorySnapshots.get(request.snapshotId);
      if (readyAt === undefined) throw grpcNotFound(`snapshot ${request.snapshotId}`);
      if (this.memorySnapshotFailure !== null) return { result: { status: 2, exception: this.memorySnapshotFailure } };
      const holdMs = Math.min(request.timeout * 1_000, Math.max(0, readyAt - this.now));
      this.advance(holdMs);
      return this.now >= readyAt ? { result: { status: 1, exception: "" } } : { result: { status: 4, exception: "" } };
    },
  };

  private takeMemorySnapshot(box: Box): string {
    this.next += 1;
    const snapshotId = `sn-${this.next}`;
    this.memorySnapshots.set(snapshotId, { image: box.machine.image(true), createdAt: this.now, ports: box.ports, timeoutMs: box.timeoutMs, appId: box.appId });
    return snapshotId;
  }

  private running(appId: string): Box[] {
    return [...this.boxes.values()].filter((b) => b.running && b.appId === appId);
  }

  private add(init: Omit<Box, "id" | "running" | "exitCode" | "endAt">): Box {
    this.next += 1;
    const box: Box = { ...init, id: `sb-${this.next}`, running: true, exitCode: null, endAt: this.now + init.timeoutMs };
    this.boxes.set(box.id, box);
    return box;
  }

  private end(box: Box, code: number): void {
    box.running = false;
    box.exitCode = code;
    box.machine.halt();
  }

  private handle(box: Box): ModalSandboxLike {
    const live = () => {
      if (!box.running) throw grpcNotFound(`Sandbox ${box.id}`);
    };
    return {
      sandboxId: box.id,
      exec: async (command: string[], params?: { workdir?: string; timeoutMs?: number }): Promise<ModalProcessLike> => {
        if (params?.timeoutMs !== undefined && params.timeoutMs <= 0) throw new Error(`timeoutMs must be positive, got ${params.timeoutMs}`);
        if (params?.timeoutMs && params.timeoutMs % 1000 !== 0) throw new Error(`timeoutMs must be a multiple of 1000ms, got ${params.timeoutMs}`);
        if (params?.workdir !== undefined && !params.workdir.startsWith("/")) throw new InvalidError(`workdir must be an absolute path, got: ${params.workdir}`);
        live();
        let stdin = "";
        let closed!: () => void;
        const stdinClosed = new Promise<void>((resolve) => (closed = resolve));
        // Modal starts the process at once; a process reading stdin sees it once it is closed.
        const reads = command.includes("-") || command.join(" ").includes("cat >");
        const result = (reads ? stdinClosed : Promise.resolve()).then(() => box.machine.exec(command, { ...(params?.workdir ? { cwd: params.workdir } : {}), ...(params?.timeoutMs ? { timeoutMs: params.timeoutMs } : {}), stdin }));
        return {
          stdin: {
            writeText: async (text: string) => {
              stdin += text;
            },
            close: async () => closed(),
          },
          stdout: { readText: async () => (await result).stdout },
          stderr: { readText: async () => (await result).stderr },
          wait: async () => (await result).exitCode,
        };
      },
      tunnels: async (): Promise<Record<number, ModalTunnelLike>> => {
        live();
        const out: Record<number, ModalTunnelLike> = {};
        for (const port of box.ports.encrypted) {
          const host = `${box.id}-${port}.modal.standin`;
          out[port] = { url: `https://${host}`, host, port: 443 };
        }
        // The V2 backend's docs list encrypted tunnels only.
        if (this.backend === "v1") for (const port of box.ports.unencrypted) out[port] = { url: `https://${box.id}-${port}.modal.standin`, unencryptedHost: `r1.modal.standin`, unencryptedPort: 40_000 + port };
        return out;
      },
      snapshotFilesystem: async () => {
        live();
        this.next += 1;
        const imageId = `im-fs${this.next}`;
        this.imageStore.set(imageId, { root: box.machine.image(false).root, processes: null });
        return { imageId };
      },
      experimentalSnapshot: async () => {
        live();
        if (this.backend === "v1") {
          // modal@0.11's V1 path: sandboxSnapshot, then one wait of 55 s; anything but success throws ExecutionError.
          const { snapshotId } = await this.cpClient.sandboxSnapshot({ sandboxId: box.id });
          const waited = await this.cpClient.sandboxSnapshotWait({ snapshotId, timeout: 55 });
          if (waited.result.status !== 1) throw Object.assign(new Error(waited.result.exception), { name: "ExecutionError" });
          return { snapshotId };
        }
        if (!box.snapshotEnabled) throw new InvalidError("Sandbox was not created with experimentalEnableSnapshot");
        return { snapshotId: this.takeMemorySnapshot(box) };
      },
      terminate: async () => {
        if (box.running) this.end(box, 137);
      },
      poll: async () => (box.running ? null : box.exitCode),
      setTags: async (tags: Record<string, string>) => {
        live();
        box.tags = { ...tags };
      },
      getTags: async () => {
        live();
        return { ...box.tags };
      },
    };
  }

  private ghost(sandboxId: string): ModalSandboxLike {
    const gone = () => Promise.reject(grpcNotFound(`Sandbox ${sandboxId}`));
    return { sandboxId, exec: gone, tunnels: gone, snapshotFilesystem: gone, experimentalSnapshot: gone, terminate: gone, poll: gone, setTags: gone, getTags: gone };
  }
}

/** The registry image the suite's Modal provider starts from (`MODAL_BASE_IMAGE`). */
export const MODAL_STANDIN_BASE_IMAGE = "ghcr.io/example/sandbox:standin";
