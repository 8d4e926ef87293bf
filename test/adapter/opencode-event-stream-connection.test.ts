/**
 * The OpenCode event stream's own connection (`OpenCodeApi.openStream`, issue 15): opened without
 * the http(s) Agent (a stream is never pooled; the Agent's per-socket state was 2 KiB of a held
 * stream), so the TLS connection names the server itself. Real servers on loopback: plain HTTP,
 * and HTTPS with a self-signed certificate for `localhost` (below, made for this test only: it
 * protects nothing) to show the certificate is still checked, the name goes out for SNI (not an
 * IP address), and the port defaults as the Agent's would.
 */
import { once } from "node:events";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { afterEach, describe, expect, it } from "vitest";
import { OpenCodeAgentClient } from "../../functions/agent/opencode-agent-client";
import { AgentUnavailableError } from "../../functions/domain/errors";
import type { AgentEvent } from "../../functions/ports/agent-client";

/** Self-signed, CN and SAN `localhost`, P-256, valid to 2126: a test fixture, not a credential. */
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgwcPI5ISudenqfHVD
eX0TR6Lvqnp81PMBn+tqSb78HkGhRANCAASyF67KJ3oDfU7ODOL0+z2n6ObevSXI
sB0OH7keM8qjDfc7pKFmKjfcV0pIA6n4/3boKnfeb+d5G8uA28E4xudk
-----END PRIVATE KEY-----`;
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBlTCCATugAwIBAgIUIUCOuIKDiqIKwwZSedgSYpkdqjIwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNzEyMTI0N1oYDzIxMjYxMTAz
MTIxMjQ3WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAASyF67KJ3oDfU7ODOL0+z2n6ObevSXIsB0OH7keM8qjDfc7pKFmKjfc
V0pIA6n4/3boKnfeb+d5G8uA28E4xudko2kwZzAdBgNVHQ4EFgQUGH6Ep8Gy5/bR
+ucHFV7s5zhQC/IwHwYDVR0jBBgwFoAUGH6Ep8Gy5/bR+ucHFV7s5zhQC/IwDwYD
VR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglsb2NhbGhvc3QwCgYIKoZIzj0EAwID
SAAwRQIgCB8CP1VXtYgf1onED5gGOlF6QITF3U9uocaCV3RY+pcCIQCZBzlJg14E
4AyTQkcFc43Ip28HjiKD6uhx/m8n7f9ZAA==
-----END CERTIFICATE-----`;

interface Seen {
  headers: IncomingMessage["headers"];
  servername: string | false | null;
}

const servers: { close: () => void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** Answers `/event` with OpenCode's first frame and keeps the stream open; records what each request looked like. */
function sse(seen: Seen[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    seen.push({ headers: req.headers, servername: (req.socket as Partial<TLSSocket>).servername ?? null });
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(`data: ${JSON.stringify({ type: "server.connected", properties: {} })}\n\n`);
  };
}

async function firstEvent(client: OpenCodeAgentClient, url: string): Promise<AgentEvent> {
  const controller = new AbortController();
  try {
    for await (const event of client.events({ url, authorization: "Basic b3BlbmNvZGU6cHc=" }, controller.signal)) return event;
    throw new Error("the stream ended without an event");
  } finally {
    controller.abort();
  }
}

async function withTlsChecksOff<T>(fn: () => Promise<T>): Promise<T> {
  const before = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = before;
  }
}

describe("the OpenCode event stream's connection (no http Agent)", () => {
  it("plain HTTP: the stream is read over a connection of its own (Connection: close), with the session's authorization", async () => {
    const seen: Seen[] = [];
    const server = createHttpServer(sse(seen)).listen(0, "127.0.0.1");
    servers.push(server);
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    expect(await firstEvent(new OpenCodeAgentClient(), `http://127.0.0.1:${port}`)).toEqual({ type: "server.connected", properties: {} });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers).toMatchObject({ accept: "text/event-stream", authorization: "Basic b3BlbmNvZGU6cHc=", connection: "close" });
  });

  it("HTTPS: the certificate is checked, the host name goes out for SNI (an IP address does not), and the events arrive", async () => {
    const seen: Seen[] = [];
    const server = createHttpsServer({ key: TEST_KEY, cert: TEST_CERT }, sse(seen)).listen(0, "127.0.0.1");
    servers.push(server);
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    const client = new OpenCodeAgentClient();

    // Self-signed: refused as any unknown certificate is, before a request is sent.
    const refused = await firstEvent(client, `https://localhost:${port}`).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AgentUnavailableError);
    expect(refused).toMatchObject({ retryable: true, message: expect.stringContaining("unreachable (DEPTH_ZERO_SELF_SIGNED_CERT)") });
    expect(seen).toEqual([]);

    await withTlsChecksOff(async () => {
      expect(await firstEvent(client, `https://localhost:${port}`)).toEqual({ type: "server.connected", properties: {} });
      expect(await firstEvent(client, `https://127.0.0.1:${port}`)).toEqual({ type: "server.connected", properties: {} });
    });
    expect(seen.map((s) => s.servername)).toEqual(["localhost", false]);
    expect(seen[0]?.headers).toMatchObject({ host: `localhost:${port}`, authorization: "Basic b3BlbmNvZGU6cHc=", connection: "close" });
  });

  it("HTTPS without a port goes to 443, as the Agent would (not to HTTP's 80)", async () => {
    const client = new OpenCodeAgentClient({ requestTimeoutMs: 500 });
    // Nothing listens on 443 here: where it tried is in the cause (the system error's text).
    const err = await firstEvent(client, "https://127.0.0.1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentUnavailableError);
    expect(err).toMatchObject({ retryable: true, cause: { message: expect.stringContaining("127.0.0.1:443") } });
  });
});
