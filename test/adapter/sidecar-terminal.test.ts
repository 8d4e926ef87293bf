/**
 * The terminal WebSocket over a real socket and a real PTY: a keystroke round trip (text and
 * binary frames), resize frames reaching the PTY (`stty size`), the shell starting in the
 * workspace, header-only auth on the upgrade (the sandbox key or a user's access token, whose
 * shell holds that access token, never the key), the shell's lifetime tied to the socket, and
 * to the access token that opened it (closed at its expiry; the sandbox key's are not timed).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { mintAccessToken } from "../../sandbox/shared/access-token";
import type { Sidecar } from "../../sandbox/sidecar/server";
import { makeTree, processExists, SESSION_ID, startTestSidecar, TOKEN, waitUntil, type TestTree } from "./sidecar-harness";

let tree: TestTree;
let sidecar: Sidecar;

beforeAll(async () => {
  tree = await makeTree();
  sidecar = await startTestSidecar(tree);
});

afterAll(async () => {
  await sidecar?.close();
  await tree?.cleanup();
});

/** A terminal client that accumulates everything the PTY printed. */
class TerminalClient {
  output = "";
  closeCode: number | null = null;
  closeReason = "";

  private constructor(readonly socket: WebSocket) {
    socket.on("message", (data) => {
      this.output += data.toString();
    });
    socket.on("close", (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
    });
  }

  static connect(path: string, headers: Record<string, string>): Promise<TerminalClient> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`${sidecar.url.replace(/^http/, "ws")}${path}`, { headers });
      const client = new TerminalClient(socket);
      socket.once("open", () => resolve(client));
      socket.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
      socket.once("error", reject);
    });
  }

  type(text: string): void {
    this.socket.send(text);
  }

  async waitFor(pattern: RegExp): Promise<RegExpExecArray> {
    return waitUntil(() => pattern.exec(this.output), `terminal output ${pattern}`);
  }
}

const auth = { authorization: `Bearer ${TOKEN}` };

describe("terminal", () => {
  it("round-trips keystrokes through a shell in the workspace", async () => {
    const term = await TerminalClient.connect("/terminal", auth);
    try {
      // The typed line echoes as `$((6*7))`; only the shell's evaluation prints 42.
      term.type("echo marker-$((6*7))\r");
      await term.waitFor(/marker-42/);
      term.socket.send(Buffer.from("echo binary-$((1+1)); pwd\r"), { binary: true });
      const [, cwd] = await term.waitFor(/binary-2\r?\n(\S+)\r?\n/);
      expect(cwd).toBe(tree.workspace);
    } finally {
      term.socket.close();
    }
  });

  it("applies resize frames to the PTY", async () => {
    const term = await TerminalClient.connect("/terminal", auth);
    try {
      term.type(JSON.stringify({ type: "resize", cols: 123, rows: 45 }));
      term.type("echo size-$(stty size | tr ' ' x)\r");
      await term.waitFor(/size-45x123/);
      // An invalid resize is neither applied nor typed: typed, it would garble the next command.
      term.type(JSON.stringify({ type: "resize", cols: 0, rows: 45 }));
      term.type("echo again-$(stty size | tr ' ' x)\r");
      await term.waitFor(/again-45x123/);
    } finally {
      term.socket.close();
    }
  });

  it("hangs up the shell when the socket closes, and closes the socket when the shell exits", async () => {
    const term = await TerminalClient.connect("/terminal", auth);
    term.type("echo shell-pid-$$\r");
    const [, pid] = await term.waitFor(/shell-pid-(\d+)/);
    term.socket.close();
    await waitUntil(() => !processExists(Number(pid)), "the shell to exit");

    const exiting = await TerminalClient.connect("/terminal", auth);
    exiting.type("exit 0\r");
    await waitUntil(() => exiting.closeCode !== null, "the socket to close");
    expect(exiting.closeCode).toBe(1000);
  });

  it("takes a user's access token, and the shell gets that token as SIDECAR_TOKEN, not the sandbox key", async () => {
    const now = Math.floor(Date.now() / 1000);
    const access = mintAccessToken(TOKEN, { sid: SESSION_ID, iat: now, exp: now + 300 });
    const term = await TerminalClient.connect("/terminal", { authorization: `Bearer ${access}` });
    try {
      term.type('echo "tok=[$SIDECAR_TOKEN]"\r');
      const [, held] = await term.waitFor(/tok=\[([^\]]*)\]\r?\n/);
      expect(held).toBe(access);
      expect(term.output).not.toContain(TOKEN);
    } finally {
      term.socket.close();
    }
    const keyed = await TerminalClient.connect("/terminal", auth);
    try {
      keyed.type('echo "tok=[$SIDECAR_TOKEN]"\r');
      const [, held] = await keyed.waitFor(/tok=\[([^\]]*)\]\r?\n/);
      expect(held).toBe(TOKEN);
    } finally {
      keyed.socket.close();
    }
  });

  it("takes a browser's access token offered as the `bearer.<token>` subprotocol, and selects only `sidecar.terminal`", async () => {
    const now = Math.floor(Date.now() / 1000);
    const access = mintAccessToken(TOKEN, { sid: SESSION_ID, iat: now, exp: now + 300 });
    // The token offered first: the sidecar must still select `sidecar.terminal`, never echo the token.
    const socket = new WebSocket(`${sidecar.url.replace(/^http/, "ws")}/terminal`, [`bearer.${access}`, "sidecar.terminal"]);
    const opened = new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
    });
    let output = "";
    socket.on("message", (data) => (output += data.toString()));
    try {
      await opened;
      expect(socket.protocol).toBe("sidecar.terminal");
      socket.send('echo "tok=[$SIDECAR_TOKEN]"\r');
      const [, held] = await waitUntil(() => /tok=\[([^\]]*)\]\r?\n/.exec(output), "the shell's answer");
      expect(held).toBe(access);
    } finally {
      socket.close();
    }
  });

  it.each([
    ["a bearer subprotocol without sidecar.terminal", (t: string) => [`bearer.${t}`]],
    ["a wrong token as the subprotocol", () => ["sidecar.terminal", "bearer.wrong"]],
    ["sidecar.terminal alone", () => ["sidecar.terminal"]],
  ])("refuses the upgrade with %s (401)", async (_label, protocols) => {
    const now = Math.floor(Date.now() / 1000);
    const access = mintAccessToken(TOKEN, { sid: SESSION_ID, iat: now, exp: now + 300 });
    const socket = new WebSocket(`${sidecar.url.replace(/^http/, "ws")}/terminal`, protocols(access));
    const status = await new Promise<number>((resolve, reject) => {
      socket.once("open", () => reject(new Error("the upgrade was accepted")));
      socket.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      socket.once("error", reject);
    });
    expect(status).toBe(401);
  });

  it.each([
    ["an expired access token", { authorization: `Bearer ${mintAccessToken(TOKEN, { sid: SESSION_ID, iat: 1, exp: 2 })}` }, ""],
    ["an access token for another session", { authorization: `Bearer ${mintAccessToken(TOKEN, { sid: "ses_other", iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 300 })}` }, ""],
    ["no header", {}, ""],
    ["a wrong token", { authorization: "Bearer wrong" }, ""],
    ["the token in the query string only", {}, `?token=${TOKEN}`],
    ["another scheme", { authorization: `Basic ${TOKEN}` }, ""],
  ])("refuses the upgrade with %s (401)", async (_label, headers, query) => {
    await expect(TerminalClient.connect(`/terminal${query}`, headers)).rejects.toThrow("refused: 401");
  });

  it("refuses upgrades on other paths (404) and a plain GET /terminal (400)", async () => {
    await expect(TerminalClient.connect("/services", auth)).rejects.toThrow("refused: 404");
    const res = await fetch(`${sidecar.url}/terminal`, { headers: auth });
    expect(res.status).toBe(400);
  });
});

describe("access token expiry (issue 14 item 5)", () => {
  it("closes a terminal opened with an access token when the token expires, and hangs up its shell; a key's terminal stays", async () => {
    const now = Math.floor(Date.now() / 1000);
    const shortLived = mintAccessToken(TOKEN, { sid: SESSION_ID, iat: now, exp: now + 2 });
    const keyed = await TerminalClient.connect("/terminal", auth);
    const term = await TerminalClient.connect("/terminal", { authorization: `Bearer ${shortLived}` });
    try {
      term.type("echo expiring-pid-$$\r");
      const [, pid] = await term.waitFor(/expiring-pid-(\d+)/);
      // No keystroke after this: the close comes from the token's expiry alone.
      await waitUntil(() => term.closeCode !== null, "the expired token's terminal to close");
      expect({ code: term.closeCode, reason: term.closeReason }).toEqual({ code: 1008, reason: "access token expired" });
      await waitUntil(() => !processExists(Number(pid)), "the expired terminal's shell to exit");
      // The sandbox key has no expiry: its terminal, opened before, still answers after.
      keyed.type("echo still-here-$((2*21))\r");
      await keyed.waitFor(/still-here-42/);
      expect(keyed.closeCode).toBeNull();
      // And the expired token opens nothing new.
      await expect(TerminalClient.connect("/terminal", { authorization: `Bearer ${shortLived}` })).rejects.toThrow("refused: 401");
    } finally {
      term.socket.close();
      keyed.socket.close();
    }
  });
});
