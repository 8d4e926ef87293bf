/**
 * Running git in a repository the agent controls (issue 14 §2). Everything under `.git/` (its
 * config, hooks, info/attributes) and `~/.gitconfig` is writable by the agent, and several config
 * keys make git execute a program: a `core.fsmonitor` hook runs on every `git status`, a
 * `post-index-change` hook whenever the index is refreshed, a `filter.<driver>.clean` on every
 * file whose stat changed, `diff.external` / textconv drivers on `git diff`. A program started
 * that way inherits git's environment, so whoever runs git must give it only what git needs
 * (never `SIDECAR_TOKEN` or any other secret) and neutralise those keys on the command line,
 * which beats every config file.
 *
 * Shared by the sidecar and the boot (sandbox/ ships alone in the image: node: imports only).
 */
import { execFile } from "node:child_process";

/**
 * `-c` overrides for keys the agent could set to run code during the commands we run (status,
 * diff, rev-parse, clone, fetch, pull, checkout). Filter drivers have free-form names: see
 * `filterDriverOverrides`.
 */
export const SAFE_GIT_CONFIG: readonly string[] = [
  // The fsmonitor hook (a program run by status/diff/checkout) and every hook (post-index-change,
  // post-checkout, post-merge, reference-transaction...).
  "core.fsmonitor=false",
  "core.hooksPath=/dev/null",
  // Programs git may start for a pager, an editor, ssh, a proxy, or an external diff.
  "core.pager=cat",
  "core.editor=true",
  "core.sshCommand=ssh",
  "core.gitProxy=",
  "diff.external=",
  "uploadpack.packObjectsHook=",
  // `ext::` transports run an arbitrary command; `file` stays allowed for local remotes.
  "protocol.ext.allow=never",
  // Signature checks run gpg.program (log/show with log.showSignature).
  "log.showSignature=false",
  "gpg.program=gpg",
];

/** Network settings a clone or pull may need behind a proxy or a private CA; passed on as they are. */
const NETWORK_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO"];

/** The environment git gets: enough to run (and reach a remote), nothing the agent could harvest. */
export function minimalGitEnv(env: NodeJS.ProcessEnv, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {
    PATH: env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    LANG: "C",
    LC_ALL: "C",
    // No system config (root-owned but not ours) and no prompt on a terminal.
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_TERMINAL_PROMPT: "0",
  };
  for (const name of ["HOME", "TMPDIR", ...NETWORK_VARS]) {
    const value = env[name];
    if (value) out[name] = value;
  }
  return { ...out, ...extra };
}

/** `-c` flags for a list of `key=value` overrides. */
export function configArgs(overrides: readonly string[]): string[] {
  return overrides.flatMap((o) => ["-c", o]);
}

/**
 * Overrides that disarm every filter driver the repository's config (or an include of it) names:
 * empty `clean`/`smudge`/`process` make git pass content through, and `required=false` keeps a
 * driver named in `.gitattributes` from failing the command. Reading config runs nothing.
 */
export function filterDriverOverrides(listing: string): string[] {
  const drivers = new Set<string>();
  for (const line of listing.split("\n")) {
    const m = /^filter\.(.+)\.[^.]+$/i.exec(line.trim());
    if (m?.[1]) drivers.add(m[1]);
  }
  return [...drivers].flatMap((d) => [`filter.${d}.clean=`, `filter.${d}.smudge=`, `filter.${d}.process=`, `filter.${d}.required=false`]);
}

/** The filter drivers configured for the repository at `dir` (or its would-be parent config), as overrides. */
export function repoFilterOverrides(dir: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  return new Promise((resolve) => {
    execFile(
      "git",
      ["-C", dir, ...configArgs(SAFE_GIT_CONFIG), "config", "--name-only", "--get-regexp", "^filter\\."],
      { env: minimalGitEnv(env), timeout: 10_000, maxBuffer: 1024 * 1024 },
      // Exit 1 means "no such key"; any failure leaves nothing to override.
      (_err, stdout) => resolve(filterDriverOverrides(typeof stdout === "string" ? stdout : "")),
    );
  });
}

/** Every `-c` flag for running git in the repository at `dir`. */
export async function safeGitArgs(dir: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  return configArgs([...SAFE_GIT_CONFIG, ...(await repoFilterOverrides(dir, env))]);
}
