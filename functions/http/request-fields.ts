/**
 * Request fields that more than one route accepts (sessions, repositories, prebuilds): repository
 * URLs, workspace paths, branch names and service commands, with the boot's own rules.
 */
import * as z from "zod";
import { ServiceCommand } from "../domain/agent-settings";
import { refineMultiLine, singleLineProblem, singleLineText, workspacePathTextProblem } from "../domain/text";
import { OutsideWorkspaceError, resolveInsideWorkspaceLexically } from "../../sandbox/shared/workspace-path";
import { API_WORKSPACE_ROOT } from "../domain/session";

/**
 * Why a repository URL is refused beyond its shape, or null. User-info is a credential in the
 * URL: it would be stored and echoed to every client of the session (API.md: credentials are
 * org secrets named by `credential`). http(s) and file URLs take none; ssh URLs a user name
 * (`ssh://git@host/...`, `git@host:path`) but never a password. The message never quotes the URL.
 */
export function repoUrlProblem(url: string): string | null {
  const text = singleLineProblem(url);
  if (text) return text;
  if (url.startsWith("git@")) {
    // scp-like `git@host:path`: everything up to the first ':' is `git@host`.
    const host = url.slice(4, url.indexOf(":") < 0 ? undefined : url.indexOf(":"));
    return host.includes("@") || host.includes("/") ? "must not carry credentials: name an org secret in `credential` instead" : null;
  }
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "must be a valid URL";
  }
  const ssh = parsed.protocol === "ssh:";
  if (parsed.password || (!ssh && parsed.username) || /^[a-z0-9+.-]+:\/\/[^/]*@[^/]*@/i.test(url)) {
    return ssh
      ? "must not carry a password: ssh URLs take a user name only (use an SSH key or an org secret in `credential`)"
      : "must not carry credentials (user:password@): name an org secret in `credential` instead";
  }
  return null;
}

export const RepoUrl = z
  .string()
  .max(2048)
  .regex(/^(https?:\/\/|ssh:\/\/|git@|file:\/\/|\/)\S+$/, "must be an https://, ssh://, git@, file:// URL or an absolute path")
  .superRefine((url, ctx) => {
    const problem = repoUrlProblem(url);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

/** Where a repo is cloned, relative to the workspace ("." is the workspace itself). */
export const WorkspacePath = z
  .string()
  .min(1)
  .max(1024)
  .superRefine((path, ctx) => {
    const problem = workspacePathTextProblem(path) ?? (path.startsWith("/") ? "must be relative to the workspace (its absolute path differs per provider)" : null);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
    else if (!insideWorkspace(path)) ctx.addIssue({ code: "custom", message: "must stay inside the workspace" });
  });

/** The lexical rule the boot and the sidecar apply (sandbox/shared/workspace-path.ts). */
function insideWorkspace(path: string): boolean {
  try {
    resolveInsideWorkspaceLexically(API_WORKSPACE_ROOT, path);
    return true;
  } catch (err) {
    if (err instanceof OutsideWorkspaceError) return false;
    throw err;
  }
}

/** A git branch name: printable, no whitespace (git's own rules are applied by git at clone). */
export const BranchName = singleLineText(255).refine((b) => !/\s/.test(b), "must be a branch name (no whitespace)");

export const CreateServiceCommand = ServiceCommand.extend({
  command: z.string().min(1).max(8_192).superRefine(refineMultiLine),
  cwd: WorkspacePath.optional(),
}).strict();

/** At most this many repositories per session. */
export const MAX_REPOS = 10;
