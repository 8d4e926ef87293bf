/** Pure pieces of the terminal and expose paths: resize control frames and Caddy route choice. */
import { describe, expect, it } from "vitest";
import { exposeRoute, previewServerName } from "../../sandbox/sidecar/caddy-expose";
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
  it("proxies to the port on loopback under the sidecar's @id", () => {
    expect(exposeRoute(3000)).toEqual({
      "@id": "sidecar-expose",
      handle: [{ handler: "reverse_proxy", upstreams: [{ dial: "127.0.0.1:3000" }] }],
    });
  });

  it("prefers the server listening on the preview port, else the first", () => {
    expect(previewServerName({ srv0: { listen: [":80"] }, srv1: { listen: [":20000"] } })).toBe("srv1");
    expect(previewServerName({ srv0: { listen: [":8080"] } })).toBe("srv0");
    expect(previewServerName({})).toBeNull();
  });
});
