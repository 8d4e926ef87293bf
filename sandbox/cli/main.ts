/**
 * Process entry for the in-sandbox CLI: `node --import tsx sandbox/cli/main.ts <command>`
 * (the sandbox image links it as a command on PATH). Ctrl-C ends `services logs` cleanly.
 * git runs it as its credential helper: `git-credential --socket PATH get` (git-credential.ts).
 */
import { runCli } from "./cli";

const abort = new AbortController();
const interrupt = () => {
  // A second interrupt while the first is still unwinding exits at once.
  if (abort.signal.aborted) process.exit(130);
  abort.abort();
};
process.on("SIGINT", interrupt);
process.on("SIGTERM", interrupt);

process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  signal: abort.signal,
  // Only `git-credential` reads stdin (git's request), and only up to its blank line.
  stdin: process.stdin,
});
