/**
 * Where `sbxctl login` keeps the API URL and token: `$XDG_CONFIG_HOME/sbxctl/config.json`
 * (default `~/.config/sbxctl/config.json`), the file 0600 and its directory 0700. The
 * environment (`SBXCTL_API_URL`, `SBXCTL_TOKEN`) overrides the file, for CI.
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

export interface CliConfig {
  apiUrl: string;
  token: string;
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(homedir(), ".config");
  return path.join(base, "sbxctl", "config.json");
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): Partial<CliConfig> {
  let stored: Partial<CliConfig> = {};
  try {
    stored = JSON.parse(readFileSync(configPath(env), "utf8")) as Partial<CliConfig>;
  } catch {
    stored = {};
  }
  return {
    ...stored,
    ...(env.SBXCTL_API_URL ? { apiUrl: env.SBXCTL_API_URL } : {}),
    ...(env.SBXCTL_TOKEN ? { token: env.SBXCTL_TOKEN } : {}),
  };
}

export function writeConfig(config: CliConfig, env: NodeJS.ProcessEnv = process.env): string {
  const file = configPath(env);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written 0600 under another name, then renamed: the token is never readable by others, even briefly.
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
  return file;
}
