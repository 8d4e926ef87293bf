/**
 * git's credential-helper protocol in the CLI (issue 23, https://git-scm.com/docs/git-credential),
 * without sockets: reading git's request up to its blank line (even while git keeps stdin open),
 * parsing `key=value` lines, which requests are forwarded at all, the two lines `get` prints,
 * and `store` / `erase` doing nothing.
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../../sandbox/cli/cli";
import { credentialRequest, formatCredential, parseCredentialInput, readCredentialInput } from "../../sandbox/cli/git-credential";

describe("parseCredentialInput", () => {
  it("reads key=value lines up to the first blank line; later values win; key[] attributes are dropped", () => {
    const text = "protocol=https\r\nhost=example.com\nhost=github.com\npath=acme/app.git\nwwwauth[]=Basic realm=\"x\"\npassword=a=b=c\n\nhost=after-blank\n";
    expect(parseCredentialInput(text)).toEqual({ protocol: "https", host: "github.com", path: "acme/app.git", password: "a=b=c" });
  });

  it("ignores lines without a key", () => {
    expect(parseCredentialInput("=value\nnoequals\nprotocol=http\n")).toEqual({ protocol: "http" });
  });
});

describe("credentialRequest", () => {
  it("forwards http and https with host and path", () => {
    expect(credentialRequest({ protocol: "https", host: "github.com", path: "acme/app.git", username: "u" })).toEqual({
      protocol: "https",
      host: "github.com",
      path: "acme/app.git",
    });
    expect(credentialRequest({ protocol: "http", host: "127.0.0.1:8080" })).toEqual({ protocol: "http", host: "127.0.0.1:8080" });
  });

  it("breaks up a url= attribute the way git would", () => {
    expect(credentialRequest({ url: "https://github.com/acme/app.git" })).toEqual({ protocol: "https", host: "github.com", path: "acme/app.git" });
    expect(credentialRequest({ url: "https://git.example.com:8443/" })).toEqual({ protocol: "https", host: "git.example.com:8443" });
  });

  it("stays silent for other protocols, a missing host, or an unparsable url", () => {
    expect(credentialRequest({ protocol: "ssh", host: "github.com" })).toBeNull();
    expect(credentialRequest({ protocol: "file", host: "" })).toBeNull();
    expect(credentialRequest({ protocol: "https" })).toBeNull();
    expect(credentialRequest({ url: "not a url" })).toBeNull();
    expect(credentialRequest({})).toBeNull();
  });
});

describe("formatCredential", () => {
  it("prints username= and password= lines", () => {
    expect(formatCredential({ username: "x-access-token", password: "ghs_abc=/+" })).toEqual(["username=x-access-token", "password=ghs_abc=/+"]);
  });

  it("refuses a value git would read as more than one attribute", () => {
    expect(() => formatCredential({ username: "x", password: "a\nhost=evil.com" })).toThrow("single-line");
    expect(() => formatCredential({ username: "x", password: "a\0b" })).toThrow("single-line");
    expect(() => formatCredential({ username: "", password: "p" })).toThrow("single-line");
  });
});

describe("readCredentialInput", () => {
  it("returns at the blank line even when git keeps stdin open, across chunk boundaries", async () => {
    let pulledAfterBlank = false;
    async function* stdin(): AsyncGenerator<Buffer> {
      yield Buffer.from("protocol=https\nho");
      yield Buffer.from("st=github.com\n");
      yield Buffer.from("\n");
      pulledAfterBlank = true;
      await new Promise(() => undefined);
    }
    const text = await readCredentialInput(stdin());
    expect(parseCredentialInput(text)).toEqual({ protocol: "https", host: "github.com" });
    expect(pulledAfterBlank).toBe(false);
  });

  it("returns at EOF without a blank line", async () => {
    expect(await readCredentialInput(["protocol=http\nhost=h\n"])).toBe("protocol=http\nhost=h\n");
  });
});

describe("sandbox git-credential through runCli", () => {
  async function run(args: string[], stdin: string, env: Record<string, string> = {}) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(args, { env, out: (l) => out.push(l), err: (l) => err.push(l), stdin: [stdin] });
    return { code, out, err };
  }

  it("store and erase print nothing and exit 0 (nothing is ever stored)", async () => {
    const input = "protocol=https\nhost=github.com\nusername=x\npassword=secret\n\n";
    expect(await run(["git-credential", "--socket", "/nonexistent/s.sock", "store"], input)).toEqual({ code: 0, out: [], err: [] });
    expect(await run(["git-credential", "erase", "--socket", "/nonexistent/s.sock"], input)).toEqual({ code: 0, out: [], err: [] });
  });

  it("get without a socket prints nothing, says why on stderr, and exits 0", async () => {
    expect(await run(["git-credential", "get"], "protocol=https\nhost=github.com\n\n")).toEqual({
      code: 0,
      out: [],
      err: ["git-credential: no sidecar socket (--socket or SIDECAR_SOCKET); no credential given"],
    });
  });

  it("without an action is a usage error", async () => {
    const { code, err } = await run(["git-credential", "--socket", "/s.sock"], "");
    expect(code).toBe(2);
    expect(err.join("\n")).toContain("git-credential needs an action");
    expect(err.join("\n")).toContain("sandbox git-credential [--socket PATH] get|store|erase");
  });
});
