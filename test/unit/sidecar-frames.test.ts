/**
 * Pure pieces of the terminal and expose paths: resize control frames, the Caddy expose route
 * (never matching the sidecar's own path, the Caddyfile's `handle_path /_sandbox/sidecar/*`, which
 * it would otherwise shadow from index 0; the two prefixes pinned equal) and the server choice.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { exposeRoute, previewServerName, SIDECAR_PROXY_PREFIX } from "../../sandbox/sidecar/caddy-expose";
import { parseResizeFrame } from "../../sandbox/sidecar/terminal";

describe("parseResizeFrame", () => {
  it("reads a valid resize frame", () => {
    expect(parseResizeFrame('{"type":"resize","cols":120,"rows":40}')).toEqual({ type: "resize", cols: 120, rows: 40 });
  });

  it("drops a resize frame with bad dimensions instead of typing it", () => {
    for (const frame of ['{"type":"resize","cols":0,"rows":40}', '{"type":"resize","cols":"80","rows":24}', '{"type":"resize"}']) {
      expect(parseResizeFrame(frame)).toBe("invalid");
    }
  });

  it("treats anything else as keystrokes", () => {
    for (const text of ["ls\r", "{", '{"type":"data"}', "[1,2]", '{"cols":1}', "{not json"]) {
      expect(parseResizeFrame(text)).toBeNull();
    }
  });
});

describe("Caddy expose route", () => {
  it("proxies to the port on loopback under the sidecar's @id, for every path but the sidecar's", () => {
    expect(exposeRoute(3000)).toEqual({
      "@id": "sidecar-expose",
      match: [{ not: [{ path: ["/_sandbox/sidecar/*"] }] }],
      handle: [{ handler: "reverse_proxy", upstreams: [{ dial: "127.0.0.1:3000" }] }],
    });
  });

  it("excludes exactly the path the image's Caddyfile serves the sidecar on", () => {
    const caddyfile = readFileSync(join(import.meta.dirname, "../../sandbox/image/Caddyfile"), "utf8");
    const handled = [...caddyfile.matchAll(/^\s*handle_path\s+(\S+)\s*\{/gm)].map((m) => m[1]);
    expect(handled).toEqual([`${SIDECAR_PROXY_PREFIX}/*`]);
    const route = exposeRoute(5173) as { match: { not: { path: string[] }[] }[] };
    expect(route.match[0]?.not[0]?.path).toEqual(handled);
    // ...and proxies it to the sidecar's port.
    expect(caddyfile).toMatch(new RegExp(`handle_path ${SIDECAR_PROXY_PREFIX}/\\* \\{\\s*reverse_proxy 127\\.0\\.0\\.1:4000`));
  });

  it("prefers the server listening on the preview port, else the first", () => {
    expect(previewServerName({ srv0: { listen: [":80"] }, srv1: { listen: [":20000"] } })).toBe("srv1");
    expect(previewServerName({ srv0: { listen: [":8080"] } })).toBe("srv0");
    expect(previewServerName({})).toBeNull();
  });
});
