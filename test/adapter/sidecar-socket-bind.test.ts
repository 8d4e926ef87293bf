/**
 * The sidecar's socket appears only when it can answer (issue 23). The boot starts the sidecar
 * and clones at once, so git's credential helper may ask while the socket is still being set
 * up. A missing socket is retried (ENOENT); a socket that accepts and then resets the
 * connection is not, and the clone failed with "read ECONNRESET" (seen in CI, at the e2e boot).
 *
 * Here the socket's chmod is held open (node:fs/promises wrapped, passing through otherwise):
 * while it is held the socket path does not exist and a real CLI client keeps retrying; once it
 * is released that same client gets its credential. Also: the socket is 0600, and nothing the
 * bind made is left in the folder after close.
 */
import { randomBytes } from "node:crypto";
import { basename, dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const gate = vi.hoisted(() => {
  let hold: Promise<void> | null = null;
  let release: () => void = () => undefined;
  let reached: () => void = () => undefined;
  let reachedPromise: Promise<void> = Promise.resolve();
  return {
    /** The next chmod waits until `release()`; `reached` resolves when it is called. */
    arm() {
      hold = new Promise<void>((r) => (release = r));
      reachedPromise = new Promise<void>((r) => (reached = r));
    },
    get reached() {
      return reachedPromise;
    },
    release: () => release(),
    async pass() {
      const h = hold;
      hold = null;
      reached();
      if (h) await h;
    },
  };
});

vi.mock("node:fs/promises", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs/promises")>();
  const chmod: typeof real.chmod = async (...args) => {
    await gate.pass();
    return real.chmod(...args);
  };
  return { ...real, default: { ...real, chmod }, chmod };
});

const { lstat, readdir } = await import("node:fs/promises");
const { startSocketApi } = await import("../../sandbox/sidecar/socket-api");
const { CredentialBroker } = await import("../../sandbox/sidecar/credential-broker");
const { ControlPlaneClient } = await import("../../sandbox/sidecar/control-plane-client");
const { socketJson } = await import("../../sandbox/cli/socket-client");
const { credentialAnswer, startFakeControlPlane } = await import("../support/fake-control-plane");
const { shortSocketPath } = await import("../support/sidecar-socket");

const PASSWORD = `ghs_${randomBytes(12).toString("hex")}`;
let cp: Awaited<ReturnType<typeof startFakeControlPlane>>;

beforeAll(async () => {
  cp = await startFakeControlPlane();
  cp.gitCredential = () => credentialAnswer(PASSWORD, Date.now() + 3_600_000);
});

afterAll(async () => {
  await cp?.close();
});

const errnoCode = (err: unknown) => (err as NodeJS.ErrnoException).code;

describe("sidecar socket bind", () => {
  it("has no socket at its path until it answers; a client asking meanwhile retries and then gets its credential", async () => {
    const socketPath = shortSocketPath();
    const client = new ControlPlaneClient({ url: cp.url, sandboxKey: "k".repeat(64), sessionId: "ses_bind" });
    gate.arm();
    const starting = startSocketApi({ socketPath, broker: new CredentialBroker(client), log: () => undefined });
    await gate.reached;

    // Bound, not yet 0600: the path a client uses is not there.
    await expect(lstat(socketPath)).rejects.toSatisfy((err) => errnoCode(err) === "ENOENT");

    const waits: number[] = [];
    let retried!: () => void;
    const retriedTwice = new Promise<void>((r) => (retried = r));
    const asking = socketJson<{ username: string; password: string }>(
      {
        socketPath,
        sleep: async (ms) => {
          waits.push(ms);
          if (waits.length === 2) retried();
          await new Promise((r) => setTimeout(r, 5));
        },
      },
      "POST",
      "/git/credential",
      { protocol: "https", host: "github.com", path: "acme/app.git" },
    );
    // A connection reset (the old bind) rejects `asking` here instead of retrying.
    await Promise.race([retriedTwice, asking.then(() => expect.fail("answered while the socket was not ready"))]);
    gate.release();
    const api = await starting;

    await expect(asking).resolves.toEqual({ username: "x-access-token", password: PASSWORD });
    expect(waits.length).toBeGreaterThanOrEqual(2);
    expect((await lstat(socketPath)).mode & 0o777).toBe(0o600);

    await api.close();
    const left = (await readdir(dirname(socketPath))).filter((name) => name.startsWith(basename(socketPath)));
    expect(left).toEqual([]);
  });
});
