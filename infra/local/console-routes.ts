/**
 * The web console on the local runtime (API.md "Clients"): `GET /` is its page, `GET /console/*`
 * its assets, built with esbuild on the first request (infra/console-build.ts, then kept for the
 * life of the process) and `GET /console/config.json` tells it to call this same origin.
 */
import type { APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { buildConsole, contentTypeOf, type ConsoleConfigJson, type ConsoleFile } from "../console-build";
import type { LocalExtraRoute } from "./local-http-server";

function fileResponse(file: ConsoleFile): APIGatewayProxyStructuredResultV2 {
  return { statusCode: 200, headers: { "content-type": file.contentType, "cache-control": "no-cache" }, body: file.body.toString("base64"), isBase64Encoded: true };
}

function notFound(path: string): APIGatewayProxyStructuredResultV2 {
  return { statusCode: 404, headers: { "content-type": "application/json; charset=utf-8" }, body: JSON.stringify({ error: { code: "route_not_found", message: `no console file ${path}` } }) };
}

export function consoleRoutes(): LocalExtraRoute[] {
  let built: Promise<Map<string, ConsoleFile>> | undefined;
  const files = () => {
    built ??= buildConsole().then((list) => {
      const map = new Map(list.map((f) => [f.path, f]));
      // Same origin, and the WebSocket URL from GET /v1/health.
      const config: ConsoleConfigJson = { apiUrl: "", wsUrl: null };
      map.set("console/config.json", { path: "console/config.json", contentType: contentTypeOf("config.json"), body: Buffer.from(JSON.stringify(config)) });
      return map;
    });
    built.catch(() => (built = undefined));
    return built;
  };
  return [
    {
      route: { id: "ConsoleIndex", method: "GET", path: "/" },
      handler: async () => {
        const file = (await files()).get("index.html");
        return file ? fileResponse(file) : notFound("index.html");
      },
    },
    {
      route: { id: "ConsoleAsset", method: "GET", path: "/console/{file}" },
      handler: async (event) => {
        const path = `console/${event.pathParameters?.file ?? ""}`;
        const file = (await files()).get(path);
        return file ? fileResponse(file) : notFound(path);
      },
    },
  ];
}
