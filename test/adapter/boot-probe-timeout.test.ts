/**
 * A boot probe that OpenCode never answers (a request that arrives while it loads its config is
 * left hanging) is given up, and the next probe is what finds it ready. Real sockets: a loopback
 * server that holds its first request open and answers the rest, probed with the boot's own
 * fetch (`defaultFetch`) and readiness loop.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { READINESS_BACKOFF, httpProbe, waitUntilReady } from "../../sandbox/boot/readiness";
import { PROBE_TIMEOUT_MS, defaultFetch } from "../../sandbox/boot/supervisor";

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = null;
});

describe("the boot's readiness probe against a server that leaves a request hanging", () => {
  it("gives the hung request up and finds the server ready with the next probe", async () => {
    const events: string[] = [];
    let requests = 0;
    server = createServer((req, res) => {
      const n = ++requests;
      events.push(`request ${n} ${req.url}`);
      if (n === 1) {
        req.socket.once("close", () => events.push("request 1 abandoned"));
        return;
      }
      res.end("[]");
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/session`;
    const sleeps: number[] = [];

    const result = await waitUntilReady(httpProbe(url, defaultFetch), { sleep: async (ms) => void sleeps.push(ms), budgetMs: 30_000, what: "OpenCode" });

    expect(result.attempts).toBe(2);
    expect(sleeps).toEqual([READINESS_BACKOFF.initialMs]);
    expect(events).toEqual(["request 1 /session", "request 1 abandoned", "request 2 /session"]);
  });

  it("a hung probe costs no more than one step of the backoff", () => {
    // The probe's timeout is what a boot whose probe hung waits on top of the schedule.
    expect(PROBE_TIMEOUT_MS).toBeLessThanOrEqual(READINESS_BACKOFF.maxMs);
  });
});
