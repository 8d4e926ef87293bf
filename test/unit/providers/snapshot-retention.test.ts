/**
 * Snapshot lifetimes and deletion at the Modal and E2B SDK surfaces (issue 22 §3, §4), against
 * stand-ins that keep the state the SDKs document rather than answering what the code expects:
 * - Modal (modal@0.11 d.ts): `snapshotFilesystem({ttlMs})` images live `ttlMs` from creation
 *   (30 days when omitted, forever with `null`) and are then gone; `images.delete` of a missing
 *   image throws `NotFoundError`; memory snapshots expire 7 days after they are taken, and the
 *   SDK has no call to delete one;
 * - E2B (e2b@2.x d.ts and docs): snapshot templates persist until `Sandbox.deleteSnapshot`
 *   (false = not found); a paused sandbox's data is kept until it is killed; `getInfo` of a
 *   killed sandbox throws `SandboxNotFoundError`.
 */
import { NotFoundError } from "modal";
import { SandboxNotFoundError, type SandboxInfo, type SandboxListOpts, type SandboxOpts } from "e2b";
import { describe, expect, it } from "vitest";
import { ProviderError, ValidationError } from "../../../functions/domain/errors";
import { toStepError, STEP_ERRORS } from "../../../functions/flows/step-errors";
import { E2BSandboxProvider, type E2BSandboxLike, type E2BSdk } from "../../../functions/providers/e2b/e2b-provider";
import { MODAL_MEMORY_SNAPSHOT_LIFETIME_MS, ModalSandboxProvider, type ModalSandboxLike, type ModalSdk } from "../../../functions/providers/modal/modal-provider";
import { createSandboxProvider, modalFilesystemSnapshotTtlSeconds } from "../../../functions/providers/provider-factory";

const T0 = 1_760_000_000_000;
const DAY = 24 * 3600 * 1000;
const MODAL_DEFAULT_IMAGE_TTL_MS = 30 * DAY;

class ModalStandIn implements ModalSdk {
  clock = T0;
  calls: string[] = [];
  /** Images made by snapshotFilesystem: expiry (null = retained indefinitely). */
  snapshotImages = new Map<string, { expiresAt: number | null }>();
  memorySnapshots = new Map<string, { takenAt: number }>();
  private n = 0;

  private sandbox(sandboxId: string): ModalSandboxLike {
    const gone = () => Promise.reject(new Error("not used here"));
    return {
      sandboxId,
      exec: gone,
      tunnels: async () => ({ 4096: { url: `https://${sandboxId}-4096.modal.run` }, 20000: { url: `https://${sandboxId}-20000.modal.run` } }),
      snapshotFilesystem: async (params) => {
        this.calls.push(`snapshotFilesystem ${JSON.stringify(params ?? {})}`);
        const imageId = `im-${++this.n}`;
        const ttl = params?.ttlMs === undefined ? MODAL_DEFAULT_IMAGE_TTL_MS : params.ttlMs;
        this.snapshotImages.set(imageId, { expiresAt: ttl === null ? null : this.clock + ttl });
        return { imageId };
      },
      experimentalSnapshot: async () => {
        const snapshotId = `sn-${++this.n}`;
        this.memorySnapshots.set(snapshotId, { takenAt: this.clock });
        return { snapshotId };
      },
      terminate: async () => undefined,
      poll: async () => null,
      setTags: async () => undefined,
      getTags: async () => ({}),
    };
  }
  private liveImage(imageId: string) {
    const image = this.snapshotImages.get(imageId);
    if (!image || (image.expiresAt !== null && this.clock >= image.expiresAt)) throw new NotFoundError(`Could not find image with ID ${imageId}`);
    return image;
  }
  apps = { fromName: async (name: string) => ({ appId: `ap-${name}` }) };
  images = {
    fromId: async (imageId: string) => {
      this.liveImage(imageId);
      return { imageId };
    },
    fromRegistry: (tag: string) => ({ tag }),
    delete: async (imageId: string) => {
      this.calls.push(`images.delete ${imageId}`);
      this.liveImage(imageId);
      this.snapshotImages.delete(imageId);
    },
  };
  sandboxes = {
    create: async () => this.sandbox(`sb-${++this.n}`),
    fromId: async (sandboxId: string) => this.sandbox(sandboxId),
    fromName: async () => {
      throw new NotFoundError("no sandbox with that name");
    },
    experimentalFromSnapshot: async () => this.sandbox(`sb-${++this.n}`),
    list: (): AsyncIterable<ModalSandboxLike> => ({ [Symbol.asyncIterator]: async function* () {} }),
  };
  /** The V1 backend's memory snapshot calls: this suite runs the V2 backend. */
  cpClient = {
    sandboxSnapshot: () => Promise.reject(new Error("not used here")),
    sandboxSnapshotWait: () => Promise.reject(new Error("not used here")),
  };
  sandboxSnapshots = {
    fromId: async (snapshotId: string) => {
      const snap = this.memorySnapshots.get(snapshotId);
      // Memory snapshots expire 7 days after creation (Modal docs).
      if (!snap || this.clock >= snap.takenAt + 7 * DAY) throw new NotFoundError(`Sandbox snapshot ${snapshotId} not found`);
      return { snapshotId };
    },
  };
}

function modal(ttlSeconds?: number) {
  const sdk = new ModalStandIn();
  const provider = new ModalSandboxProvider(
    sdk,
    { appName: "app", baseImage: "ghcr.io/acme/sandbox:1", timeoutSeconds: 3600, ...(ttlSeconds === undefined ? {} : { filesystemSnapshotTtlSeconds: ttlSeconds }) },
    { now: () => sdk.clock, readiness: { fetch: async () => ({ ok: true }), sleep: async () => undefined } },
  );
  return { sdk, provider };
}

const SESSION = "ses_0123456789abcdefghjkmnpqrs";

describe("Modal snapshot lifetimes (issue 22 §3)", () => {
  it("a filesystem snapshot is kept until deleted by default: the TTL is passed explicitly as null, never left to the SDK's 30 days", async () => {
    const { sdk, provider } = modal();
    const snap = await provider.snapshot(SESSION, "sb-live");
    expect(snap.expiresAt).toBeNull();
    expect(sdk.calls).toEqual(['snapshotFilesystem {"ttlMs":null}']);
    sdk.clock += 365 * DAY;
    await expect(sdk.images.fromId(snap.snapshotId)).resolves.toEqual({ imageId: snap.snapshotId });
  });

  it("MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS sets the TTL, and the snapshot reports the expiry the image really has", async () => {
    const { sdk, provider } = modal(90 * 24 * 3600);
    const snap = await provider.snapshot(SESSION, "sb-live");
    expect(snap.expiresAt).toBe(T0 + 90 * DAY);
    sdk.clock = T0 + 90 * DAY - 1;
    await expect(sdk.images.fromId(snap.snapshotId)).resolves.toBeDefined();
    sdk.clock = T0 + 90 * DAY;
    await expect(sdk.images.fromId(snap.snapshotId)).rejects.toThrow(NotFoundError);
  });

  it("a memory snapshot reports Modal's 7-day expiry; restoring it after that fails as a restore failure (RestoreFailed), not a transient one", async () => {
    const { sdk, provider } = modal();
    const mem = await provider.memorySnapshot(SESSION, "sb-live");
    expect(mem.expiresAt).toBe(T0 + MODAL_MEMORY_SNAPSHOT_LIFETIME_MS);
    const restored = await provider.createSandbox({ sessionId: SESSION, repos: [], envVars: {}, snapshotId: mem.snapshotId });
    expect(restored.sandboxId).toMatch(/^sb-/);
    sdk.clock = mem.expiresAt ?? 0;
    const err = await provider.createSandbox({ sessionId: SESSION, repos: [], envVars: {}, snapshotId: mem.snapshotId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(toStepError(err).name).toBe(STEP_ERRORS.restoreFailed);
  });

  it("MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS: whole seconds, 0 or unset = kept until deleted; anything else names the variable", () => {
    expect(modalFilesystemSnapshotTtlSeconds(undefined)).toBe(0);
    expect(modalFilesystemSnapshotTtlSeconds("")).toBe(0);
    expect(modalFilesystemSnapshotTtlSeconds("7776000")).toBe(7_776_000);
    for (const bad of ["-1", "1.5", "30d", "abc"]) expect(() => modalFilesystemSnapshotTtlSeconds(bad)).toThrow(ValidationError);
    expect(() => modalFilesystemSnapshotTtlSeconds("x")).toThrow(/MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS/);
  });

  it("the provider factory hands the setting to the Modal provider, and refuses a bad one naming it", async () => {
    const env = { MODAL_TOKEN_ID: "ak-0123456789abcdef", MODAL_TOKEN_SECRET: "as-0123456789abcdef" };
    const configured = await createSandboxProvider("modal", { sandboxTimeoutSeconds: 600, env: { ...env, MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS: "86400" } });
    expect(configured).toMatchObject({ config: { filesystemSnapshotTtlSeconds: 86_400 } });
    const unset = await createSandboxProvider("modal", { sandboxTimeoutSeconds: 600, env });
    expect(unset).toMatchObject({ config: { filesystemSnapshotTtlSeconds: 0 } });
    await expect(createSandboxProvider("modal", { sandboxTimeoutSeconds: 600, env: { ...env, MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS: "30d" } })).rejects.toThrow(
      /MODAL_FILESYSTEM_SNAPSHOT_TTL_SECONDS/,
    );
  });
});

describe("Modal deleteSnapshot (issue 22 §4)", () => {
  it("deletes a filesystem snapshot's image; a second delete (NotFoundError at Modal) is success", async () => {
    const { sdk, provider } = modal();
    const snap = await provider.snapshot(SESSION, "sb-live");
    await provider.deleteSnapshot(snap.snapshotId);
    expect(sdk.snapshotImages.has(snap.snapshotId)).toBe(false);
    await expect(provider.deleteSnapshot(snap.snapshotId)).resolves.toBeUndefined();
    expect(sdk.calls.filter((c) => c.startsWith("images.delete"))).toEqual([`images.delete ${snap.snapshotId}`, `images.delete ${snap.snapshotId}`]);
  });

  it("an image that expired on its own is already gone: success", async () => {
    const { sdk, provider } = modal(60);
    const snap = await provider.snapshot(SESSION, "sb-live");
    sdk.clock += 61_000;
    await expect(provider.deleteSnapshot(snap.snapshotId)).resolves.toBeUndefined();
  });

  it("a memory snapshot cannot be deleted through the SDK: no call, no error (Modal expires it after 7 days)", async () => {
    const { sdk, provider } = modal();
    const mem = await provider.memorySnapshot(SESSION, "sb-live");
    sdk.calls = [];
    await provider.deleteSnapshot(mem.snapshotId);
    expect(sdk.calls).toEqual([]);
  });

  it("any other failure is a ProviderError for the caller to queue", async () => {
    const { sdk, provider } = modal();
    sdk.images.delete = async () => {
      throw Object.assign(new Error("unavailable"), { name: "ClientError", code: 14 });
    };
    await expect(provider.deleteSnapshot("im-x")).rejects.toMatchObject({ name: "ProviderError", operation: "deleteSnapshot", retryable: true });
  });
});

interface Box {
  id: string;
  state: "running" | "paused" | "killed";
  metadata: Record<string, string>;
}

class E2BStandIn implements E2BSdk {
  boxes = new Map<string, Box>();
  templates = new Set<string>();
  calls: string[] = [];
  private n = 0;

  private handle(box: Box): E2BSandboxLike {
    return {
      sandboxId: box.id,
      getHost: (port) => `${port}-${box.id}.e2b.app`,
      files: { write: async () => undefined },
      commands: { run: async () => ({ exitCode: 0, stdout: "", stderr: "" }) },
    };
  }
  private live(id: string): Box {
    const box = this.boxes.get(id);
    if (!box || box.state === "killed") throw new SandboxNotFoundError(`sandbox ${id} not found`);
    return box;
  }
  add(state: Box["state"]): string {
    const id = `sbx-${++this.n}`;
    this.boxes.set(id, { id, state, metadata: {} });
    return id;
  }
  async create(_template: string, opts: SandboxOpts) {
    const id = this.add("running");
    (this.boxes.get(id) as Box).metadata = opts.metadata ?? {};
    return this.handle(this.live(id));
  }
  async connect(id: string) {
    const box = this.live(id);
    box.state = "running";
    return this.handle(box);
  }
  async kill(id: string) {
    this.calls.push(`kill ${id}`);
    const box = this.boxes.get(id);
    if (!box || box.state === "killed") return false;
    box.state = "killed";
    return true;
  }
  async pause(id: string) {
    this.live(id).state = "paused";
    return true;
  }
  async createSnapshot(id: string) {
    this.live(id);
    const snapshotId = `tpl-${++this.n}:default`;
    this.templates.add(snapshotId);
    return { snapshotId };
  }
  async deleteSnapshot(snapshotId: string) {
    this.calls.push(`deleteSnapshot ${snapshotId}`);
    return this.templates.delete(snapshotId);
  }
  async getInfo(id: string) {
    this.calls.push(`getInfo ${id}`);
    const box = this.live(id);
    return { sandboxId: id, state: box.state, metadata: box.metadata, startedAt: new Date(T0), endAt: new Date(T0 + DAY) } as unknown as SandboxInfo;
  }
  list(_opts: SandboxListOpts) {
    return { hasNext: false, nextItems: async () => [] };
  }
}

function e2b() {
  const sdk = new E2BStandIn();
  const provider = new E2BSandboxProvider(sdk, { template: "sandbox-tpl", timeoutSeconds: 3600 }, { now: () => T0 });
  return { sdk, provider };
}

describe("E2B deleteSnapshot (issue 22 §4; nothing expires at E2B, so everything is deleted)", () => {
  it("a snapshot template goes with Sandbox.deleteSnapshot; already gone (false) is success", async () => {
    const { sdk, provider } = e2b();
    const running = sdk.add("running");
    const snap = await provider.snapshot(SESSION, running);
    expect(snap.expiresAt ?? null).toBeNull();
    await provider.deleteSnapshot(snap.snapshotId);
    expect(sdk.templates.size).toBe(0);
    await expect(provider.deleteSnapshot(snap.snapshotId)).resolves.toBeUndefined();
    expect(sdk.boxes.get(running)?.state).toBe("running");
  });

  it("a paused sandbox (its id is its snapshot) is killed; a killed or unknown one is success", async () => {
    const { sdk, provider } = e2b();
    const paused = sdk.add("paused");
    await provider.deleteSnapshot(paused);
    expect(sdk.boxes.get(paused)?.state).toBe("killed");
    await expect(provider.deleteSnapshot(paused)).resolves.toBeUndefined();
    await expect(provider.deleteSnapshot("sbx-unknown")).resolves.toBeUndefined();
  });

  it("a running sandbox is a live sandbox, not a snapshot: deleting its id leaves it running", async () => {
    const { sdk, provider } = e2b();
    const running = sdk.add("running");
    await provider.deleteSnapshot(running);
    expect(sdk.boxes.get(running)?.state).toBe("running");
    expect(sdk.calls).toEqual([`getInfo ${running}`]);
  });
});
