/**
 * E2B as its SDK (e2b@2.51) documents it, at the SDK surface the provider uses (`E2BSdk`), with
 * state and a clock, for the conformance suite and the flow tests (issue 22 §1, §6). Not a
 * recording double: each call does what E2B says it does.
 *
 * - `create(template)`: a template (the registered image: no processes until the boot runs) or a
 *   snapshot (`createSnapshot`: "the exact filesystem and memory state", so its processes run
 *   at once). An unknown name is a bare `SandboxError` "404: ..." with `statusCode: 404`, as
 *   `handleApiError` builds it for `POST /v2/sandboxes`.
 * - Timeouts: `endAt = now + timeoutMs` (300 s when omitted). At `endAt` a sandbox with
 *   `lifecycle.onTimeout: "pause"` pauses (memory kept), any other is killed. `autoResume`
 *   needs `onTimeout: "pause"` (InvalidArgumentError otherwise).
 * - `connect(id, {timeoutMs})`: resumes a paused sandbox for `timeoutMs` (300 s when omitted);
 *   on a running one the timeout only ever grows. Unknown or killed: SandboxNotFoundError.
 * - `pause`: true when it paused, false when already paused. `kill`: false when already gone.
 * - `createSnapshot`: the sandbox pauses while the snapshot is taken and runs on after it.
 * - `getInfo` / `list`: state, metadata, `startedAt`, `endAt`; the list filters by metadata and
 *   state, one sandbox per page (so callers must walk the paginator).
 * - `deleteSnapshot(id)`: true when deleted, false when not found (E2B's `Sandbox.deleteSnapshot`).
 */
import { InvalidArgumentError, SandboxError, SandboxNotFoundError, type SandboxInfo, type SandboxListOpts, type SandboxOpts } from "e2b";
import type { E2BSandboxLike, E2BSdk } from "../../../functions/providers/e2b/e2b-provider";
import { SANDBOX_PORTS } from "../../../functions/providers/sandbox-boot";
import { StandInMachine, splitShellLine, type StandInProcesses } from "./standin-machine";

const DEFAULT_TIMEOUT_MS = 300_000;

interface Box {
  id: string;
  machine: StandInMachine;
  state: "running" | "paused" | "killed";
  metadata: Record<string, string>;
  envs: Record<string, string>;
  startedAt: number;
  endAt: number;
  onTimeout: "pause" | "kill";
  autoResume: boolean | undefined;
}

export class E2BStandIn implements E2BSdk {
  now = 1_750_000_000_000;
  readonly boxes = new Map<string, Box>();
  private readonly templates = new Set<string>();
  private readonly snapshots = new Map<string, { root: string; processes: StandInProcesses | null }>();
  private next = 0;

  constructor(templates: string[]) {
    for (const t of templates) this.templates.add(t);
  }

  /** The clock moves: sandboxes past their `endAt` pause or die, as their lifecycle says. */
  advance(ms: number): void {
    this.now += ms;
    for (const box of this.boxes.values()) {
      if (box.state !== "running" || box.endAt > this.now) continue;
      if (box.onTimeout === "pause") box.state = "paused";
      else {
        box.state = "killed";
        box.machine.halt();
      }
    }
  }

  /** What the tunnels answer (the provider's readiness `fetch`, and the suite's). */
  fetch = async (url: string, init?: { headers: Record<string, string> }): Promise<{ ok: boolean; status: number }> => {
    const parsed = new URL(url);
    const match = /^(\d+)-(.+)\.e2b\.standin$/.exec(parsed.hostname);
    const box = match ? this.boxes.get(match[2] ?? "") : undefined;
    // A paused or killed sandbox answers nothing (autoResume is off).
    if (!match || !box || box.state !== "running") throw new Error(`fetch failed: ${parsed.hostname} unreachable`);
    const port = Number(match[1]) === SANDBOX_PORTS.opencode ? "opencode" : "preview";
    const status = box.machine.answer(port, parsed.pathname, init?.headers);
    if (status === null) throw new Error(`fetch failed: connection refused on port ${match[1]}`);
    return { ok: status >= 200 && status < 300, status };
  };

  async create(template: string, opts: SandboxOpts): Promise<E2BSandboxLike> {
    const onTimeout = lifecycleAction(opts.lifecycle?.onTimeout);
    if (opts.lifecycle?.autoResume && onTimeout !== "pause") throw new InvalidArgumentError("autoResume requires onTimeout: pause");
    const snapshot = this.snapshots.get(template);
    if (!snapshot && !this.templates.has(template)) throw Object.assign(new SandboxError(`404: template '${template}' not found`), { statusCode: 404 });
    this.next += 1;
    const box: Box = {
      id: `sbx${this.next}`,
      machine: new StandInMachine(snapshot),
      state: "running",
      metadata: { ...(opts.metadata ?? {}) },
      envs: { ...(opts.envs ?? {}) },
      startedAt: this.now,
      endAt: this.now + (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS),
      onTimeout,
      autoResume: opts.lifecycle?.autoResume,
    };
    this.boxes.set(box.id, box);
    return this.handle(box);
  }

  async connect(sandboxId: string, opts?: { timeoutMs?: number }): Promise<E2BSandboxLike> {
    const box = this.live(sandboxId);
    const until = this.now + (opts?.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    if (box.state === "paused") {
      box.state = "running";
      box.endAt = until;
    } else if (until > box.endAt) box.endAt = until;
    return this.handle(box);
  }

  async kill(sandboxId: string): Promise<boolean> {
    const box = this.boxes.get(sandboxId);
    if (!box || box.state === "killed") return false;
    box.state = "killed";
    box.machine.halt();
    return true;
  }

  async pause(sandboxId: string): Promise<boolean> {
    const box = this.live(sandboxId);
    if (box.state === "paused") return false;
    box.state = "paused";
    return true;
  }

  async createSnapshot(sandboxId: string): Promise<{ snapshotId: string }> {
    const box = this.live(sandboxId);
    this.next += 1;
    const snapshotId = `snap${this.next}`;
    this.snapshots.set(snapshotId, box.machine.image(true));
    return { snapshotId };
  }

  async deleteSnapshot(snapshotId: string): Promise<boolean> {
    return this.snapshots.delete(snapshotId);
  }

  async getInfo(sandboxId: string): Promise<SandboxInfo> {
    return this.info(this.live(sandboxId));
  }

  list(opts: SandboxListOpts) {
    const items = [...this.boxes.values()].filter(
      (b) =>
        b.state !== "killed" &&
        Object.entries(opts.query?.metadata ?? {}).every(([k, v]) => b.metadata[k] === v) &&
        (!opts.query?.state || opts.query.state.includes(b.state as "running" | "paused")),
    );
    let i = 0;
    return {
      get hasNext() {
        return i < Math.max(items.length, 1);
      },
      nextItems: async () => {
        const page = items.slice(i, i + 1);
        i += 1;
        return page.map((b) => this.info(b));
      },
    };
  }

  private info(box: Box): SandboxInfo {
    return {
      sandboxId: box.id,
      templateId: "standin",
      metadata: { ...box.metadata },
      startedAt: new Date(box.startedAt),
      endAt: new Date(box.endAt),
      state: box.state === "paused" ? "paused" : "running",
    } as SandboxInfo;
  }

  private live(sandboxId: string): Box {
    const box = this.boxes.get(sandboxId);
    if (!box || box.state === "killed") throw new SandboxNotFoundError(`Sandbox ${sandboxId} not found`);
    return box;
  }

  private handle(box: Box): E2BSandboxLike {
    const running = () => {
      if (box.state !== "running") throw new SandboxError(`sandbox ${box.id} is ${box.state}`);
    };
    return {
      sandboxId: box.id,
      getHost: (port) => `${port}-${box.id}.e2b.standin`,
      files: {
        write: async (path, data) => {
          running();
          box.machine.writeFile(path, data);
        },
      },
      commands: {
        // commands.run takes a shell command line; a non-zero exit throws CommandExitError carrying the result.
        run: async (cmd, opts) => {
          running();
          const r = await box.machine.exec(splitShellLine(cmd), opts ?? {});
          if (r.exitCode !== 0) throw Object.assign(new Error(`exit status ${r.exitCode}`), { name: "CommandExitError", ...r });
          return r;
        },
      },
    };
  }
}

function lifecycleAction(onTimeout: unknown): "pause" | "kill" {
  if (onTimeout === "pause" || (typeof onTimeout === "object" && onTimeout !== null && (onTimeout as { action?: unknown }).action === "pause")) return "pause";
  return "kill";
}
