/** The relay service's edges that need no sockets: owner id resolution and its environment parsing. */
import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../functions/config/config";
import { parseRelayEnv, resolveOwnerId } from "../../functions/relay/service";

const answering = (body: unknown) => ((() => Promise.resolve(new Response(JSON.stringify(body)))) as unknown) as typeof fetch;

describe("resolveOwnerId", () => {
  it("uses the ECS task id from the task metadata endpoint", async () => {
    const id = await resolveOwnerId(
      { ECS_CONTAINER_METADATA_URI_V4: "http://169.254.170.2/v4/abc" },
      answering({ TaskARN: "arn:aws:ecs:eu-west-1:123456789012:task/relay-cluster/0f1e2d3c4b5a" }),
    );
    expect(id).toBe(`task-0f1e2d3c4b5a-${process.pid}`);
  });

  it("falls back to host name and pid without metadata, or when the endpoint fails or answers nonsense", async () => {
    const fallback = `${hostname()}-${process.pid}`;
    expect(await resolveOwnerId({})).toBe(fallback);
    const failing = (() => Promise.reject(new Error("connect ECONNREFUSED"))) as unknown as typeof fetch;
    expect(await resolveOwnerId({ ECS_CONTAINER_METADATA_URI_V4: "http://169.254.170.2/v4/abc" }, failing)).toBe(fallback);
    expect(await resolveOwnerId({ ECS_CONTAINER_METADATA_URI_V4: "http://169.254.170.2/v4/abc" }, answering({ nope: 1 }))).toBe(fallback);
  });
});

describe("parseRelayEnv", () => {
  it("defaults: health on 8080, lease TTL 30 s, scan every 60 s, 4 workers", () => {
    expect(parseRelayEnv({})).toMatchObject({
      RELAY_HEALTH_PORT: 8080,
      RELAY_LEASE_TTL_SECONDS: 30,
      RELAY_SCAN_INTERVAL_SECONDS: 60,
      RELAY_NUDGE_POLL_MS: 250,
      RELAY_MAX_SESSIONS: 10000,
      RELAY_WORKERS: 4,
      RELAY_HEARTBEAT_TIMEOUT_SECONDS: 20,
    });
  });

  it("RELAY_WORKERS: a whole number of at least 1", () => {
    expect(parseRelayEnv({ RELAY_WORKERS: "1" }).RELAY_WORKERS).toBe(1);
    expect(parseRelayEnv({ RELAY_WORKERS: "2" }).RELAY_WORKERS).toBe(2);
    for (const bad of ["0", "abc", "-2", "1.5"]) {
      expect(() => parseRelayEnv({ RELAY_WORKERS: bad }), bad).toThrow(ConfigError);
      expect(() => parseRelayEnv({ RELAY_WORKERS: bad }), bad).toThrow(/RELAY_WORKERS/);
    }
  });

  it("a bad value fails with a message naming the variable", () => {
    expect(() => parseRelayEnv({ RELAY_HEALTH_PORT: "http" })).toThrow(ConfigError);
    expect(() => parseRelayEnv({ RELAY_LEASE_TTL_SECONDS: "-1" })).toThrow(/RELAY_LEASE_TTL_SECONDS/);
  });
});
