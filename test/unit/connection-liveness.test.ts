/** When a WebSocket client connection still counts as present (domain/connection-liveness.ts, issue 14 §3). */
import { describe, expect, it } from "vitest";
import {
  CONNECTION_INIT_DEADLINE_SECONDS,
  MAX_CONNECTION_SECONDS,
  connectionExpiry,
  connectionRefreshDue,
  isLiveConnection,
  ttlEpochSeconds,
  unreadyConnectionExpiresAt,
} from "../../functions/domain/connection-liveness";
import { T0 } from "../support/builders";

const at = (s: number) => new Date(T0.getTime() + s * 1000);

describe("connection liveness", () => {
  it("a connection is live strictly before its expiresAt", () => {
    const c = { connectedAt: T0.toISOString(), expiresAt: at(30).toISOString() };
    expect(isLiveConnection(c, at(29.999))).toBe(true);
    expect(isLiveConnection(c, at(30))).toBe(false);
  });

  it("an item written before expiresAt existed lives API Gateway's two hours from connectedAt", () => {
    const legacy = { connectedAt: T0.toISOString() };
    expect(connectionExpiry(legacy)).toEqual(at(MAX_CONNECTION_SECONDS));
    expect(isLiveConnection(legacy, at(MAX_CONNECTION_SECONDS - 1))).toBe(true);
    expect(isLiveConnection(legacy, at(MAX_CONNECTION_SECONDS))).toBe(false);
  });

  it("a connection not yet sent its init gets the init deadline, or the TTL when that is shorter", () => {
    expect(unreadyConnectionExpiresAt(T0, 900)).toEqual(at(CONNECTION_INIT_DEADLINE_SECONDS));
    expect(unreadyConnectionExpiresAt(T0, 3)).toEqual(at(3));
  });

  it("activity writes a new expiry only once half the TTL is used up", () => {
    const c = { connectedAt: T0.toISOString(), expiresAt: at(100).toISOString() };
    expect(connectionRefreshDue(c, at(49), 100)).toBe(false);
    expect(connectionRefreshDue(c, at(51), 100)).toBe(true);
    expect(connectionRefreshDue(c, at(200), 100)).toBe(true);
  });

  it("the TTL attribute is the expiry in whole epoch seconds, never before it", () => {
    expect(ttlEpochSeconds(T0)).toBe(T0.getTime() / 1000);
    expect(ttlEpochSeconds(new Date(T0.getTime() + 1))).toBe(T0.getTime() / 1000 + 1);
  });
});
