/**
 * The web console (clients/console) talks to the API only through the typed client: its bundle
 * holds its own files, the typed client (clients/api-client), Preact and xterm.js, and nothing
 * else of the repository (no server code); its calls go through the client, never a bare fetch.
 */
import { readFileSync } from "node:fs";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

describe("web console bundle", () => {
  it("contains only the console, the typed client, preact and xterm", async () => {
    const result = await build({
      entryPoints: ["clients/console/app.ts", "clients/console/terminal.ts"],
      bundle: true,
      write: false,
      format: "esm",
      outdir: "/out",
      metafile: true,
      logLevel: "silent",
    });
    const inputs = Object.keys(result.metafile.inputs);
    const foreign = inputs.filter((f) => !/^(clients\/console\/|clients\/api-client\/|(.*\/)?node_modules\/(preact|@xterm)\/)/.test(f));
    expect(foreign).toEqual([]);
    expect(inputs.some((f) => f.startsWith("clients/api-client/"))).toBe(true);
  });

  it("makes no request of its own: fetch only for its config.json, WebSocket only for the sidecar terminal", () => {
    const app = readFileSync("clients/console/app.ts", "utf8");
    const api = readFileSync("clients/console/api.ts", "utf8");
    expect(api).not.toMatch(/\bfetch\(/);
    expect(app.match(/\bfetch\(/g)).toHaveLength(1);
    expect(app).toContain('fetch(new URL("console/config.json"');
    expect(`${app}${api}`).not.toMatch(/new WebSocket\(/);
  });
});
