/**
 * How the sandbox key reaches the sidecar without ever being an environment variable (issue 14
 * §2): the provider writes it to a file (mode 0600, `sandboxFiles(layout).sandboxKey`), the boot
 * reads that file and removes it before it starts any other process, and hands the key to the
 * sidecar on its stdin (`SIDECAR_TOKEN_FILE=-`). A key in an environment shows in
 * `/proc/<pid>/environ` to every process of the same user and is inherited by every child; a
 * file left behind would end up in a snapshot.
 */
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/** A key has no whitespace; a trailing newline from `echo` or an editor is not part of it. */
function normalise(text: string): string | undefined {
  const key = text.trim();
  return key === "" ? undefined : key;
}

/** Writes the key for a boot to take (the local provider; image providers write it over their API). */
export async function writeSandboxKeyFile(path: string, key: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await rm(path, { force: true });
  await writeFile(path, key, { mode: 0o600, flag: "wx" });
}

/** The key in `path`, removed as it is read; undefined when there is none. */
export async function takeSandboxKeyFile(path: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  await rm(path, { force: true });
  return normalise(text);
}

/** The sidecar's key from `source`: `-` reads stdin to its end, anything else is a file path. */
export async function readSandboxKey(source: string, stdin: AsyncIterable<Buffer | string> = process.stdin): Promise<string | undefined> {
  if (source !== "-") return normalise(await readFile(source, "utf8"));
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return normalise(Buffer.concat(chunks).toString("utf8"));
}
