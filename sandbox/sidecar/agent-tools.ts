/**
 * The agent's own tools on the sidecar's side (issue 25 §4): OpenCode runs a tool file
 * (sandbox/boot/opencode-files.ts), the tool calls the sidecar's Unix socket (socket-api.ts), and
 * the sidecar calls the control plane with an access token signed by the sandbox key, which the
 * agent never holds. Requests are checked here first (sandbox/shared/agent-tool-requests.ts) and
 * again by the control plane.
 *
 * `save_snapshot` answers once the snapshot is committed: the control plane starts the snapshot
 * flow and this polls its status (backoff 500 ms x 1.5, at most 3 s apart) for up to
 * `SNAPSHOT_WAIT_MS`. Past that it answers `pending` with the flow's execution name: the flow
 * goes on and records the snapshot on the session when it commits.
 */
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import {
  MAX_EVIDENCE_FILES,
  MAX_REPORTED_SERVICES,
  type RequestEnvVariablesRequest,
  type SaveEnvFilesRequest,
  type SaveServiceCommandsRequest,
  type SaveSnapshotRequest,
  type VerificationReport,
  type VerifyRequest,
} from "../shared/agent-tool-requests";
import { OutsideWorkspaceError, PathNotFoundError, resolveInsideWorkspace, workspaceRelative } from "../shared/workspace-path";
import type { ControlPlaneClient } from "./control-plane-client";
import { invalidRequest, SidecarError } from "./errors";

/** How long `save_snapshot` waits for the snapshot to commit before answering `pending`. */
export const SNAPSHOT_WAIT_MS = 120_000;
const POLL_FIRST_MS = 500;
const POLL_MAX_MS = 3_000;

export const SNAPSHOTS_ROUTE = "/v1/sandbox/snapshots";
export const SERVICE_COMMANDS_ROUTE = "/v1/sandbox/service-commands";
export const ENV_FILES_ROUTE = "/v1/sandbox/env-files";
export const ENV_REQUESTS_ROUTE = "/v1/sandbox/env-requests";
export const VERIFICATIONS_ROUTE = "/v1/sandbox/verifications";
/** How deep `verify` looks into the evidence folder. */
const EVIDENCE_DEPTH = 4;

const SnapshotAnswer = z.object({
  snapshot: z.object({
    execution: z.string(),
    status: z.enum(["pending", "committed", "failed", "skipped", "superseded"]),
    snapshotId: z.string().nullable().optional(),
    message: z.string().nullable().optional(),
  }),
});

export interface SnapshotResult {
  status: "committed" | "pending" | "failed" | "skipped" | "superseded";
  execution: string;
  snapshotId: string | null;
  message: string | null;
}

export interface AgentToolsOptions {
  snapshotWaitMs?: number;
  /** `verify`: the workspace its evidence folder must be in, and the sidecar's services. */
  workspaceDir?: string;
  services?: () => { name: string; status: "running" | "stopped" | "error"; exitCode: number | null }[];
  /** Epoch milliseconds; default `Date.now`. */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

function parsed<T>(schema: z.ZodType<T>, value: unknown, route: string): T {
  const result = schema.safeParse(value);
  if (!result.success) throw new SidecarError(503, "control_plane_unavailable", `the control plane's answer to ${route} is malformed`);
  return result.data;
}

export class AgentTools {
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(
    private readonly client: Pick<ControlPlaneClient, "agentToolCall">,
    private readonly opts: AgentToolsOptions = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.sleep = opts.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  async saveSnapshot(request: SaveSnapshotRequest): Promise<SnapshotResult> {
    const started = parsed(SnapshotAnswer, await this.client.agentToolCall("POST", SNAPSHOTS_ROUTE, request), SNAPSHOTS_ROUTE).snapshot;
    const deadline = this.now() + (this.opts.snapshotWaitMs ?? SNAPSHOT_WAIT_MS);
    const statusRoute = `${SNAPSHOTS_ROUTE}/${encodeURIComponent(started.execution)}`;
    let status = started;
    for (let wait = POLL_FIRST_MS; status.status === "pending"; wait = Math.min(POLL_MAX_MS, wait * 1.5)) {
      const left = deadline - this.now();
      if (left <= 0) break;
      await this.sleep(Math.min(wait, left));
      status = parsed(SnapshotAnswer, await this.client.agentToolCall("GET", statusRoute), statusRoute).snapshot;
    }
    return { status: status.status, execution: started.execution, snapshotId: status.snapshotId ?? null, message: status.message ?? null };
  }

  saveServiceCommands(request: SaveServiceCommandsRequest): Promise<unknown> {
    return this.client.agentToolCall("PUT", SERVICE_COMMANDS_ROUTE, request);
  }

  saveEnvFiles(request: SaveEnvFilesRequest): Promise<unknown> {
    return this.client.agentToolCall("PUT", ENV_FILES_ROUTE, request);
  }

  requestEnvVariables(request: RequestEnvVariablesRequest): Promise<unknown> {
    return this.client.agentToolCall("POST", ENV_REQUESTS_ROUTE, request);
  }

  /**
   * `verify`: lists the evidence folder (names and sizes; contents are never read or sent, and
   * symbolic links are not followed) and the services' state, reports both to the control plane
   * (which shows them to the session's clients) and answers the same report with its id.
   */
  async verify(request: VerifyRequest): Promise<{ verification: unknown; report: VerificationReport }> {
    const evidence = request.folder ? await this.listEvidence(request.folder) : { folder: null, files: [], truncated: false };
    const services = (this.opts.services?.() ?? []).slice(0, MAX_REPORTED_SERVICES).map((s) => ({ name: s.name, status: s.status, exitCode: s.exitCode }));
    const report: VerificationReport = { ...evidence, summary: request.summary ?? null, services };
    const answer = await this.client.agentToolCall("POST", VERIFICATIONS_ROUTE, report);
    return { verification: (answer as { verification?: unknown } | null)?.verification ?? null, report };
  }

  private async listEvidence(folder: string): Promise<{ folder: string; files: { path: string; bytes: number }[]; truncated: boolean }> {
    const workspace = this.opts.workspaceDir;
    if (!workspace) throw new SidecarError(503, "not_configured", "the sidecar has no workspace to look for evidence in");
    let root: string;
    try {
      root = await resolveInsideWorkspace(workspace, folder, { mustExist: true });
    } catch (err) {
      if (err instanceof OutsideWorkspaceError) throw invalidRequest("body.folder: must stay inside the workspace");
      if (err instanceof PathNotFoundError) throw invalidRequest(`body.folder: ${folder} does not exist in the workspace`);
      throw err;
    }
    if (!(await lstat(root)).isDirectory()) throw invalidRequest(`body.folder: ${folder} is not a folder`);
    const files: { path: string; bytes: number }[] = [];
    let truncated = false;
    const walk = async (dir: string, prefix: string, depth: number): Promise<void> => {
      const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
      for (const entry of entries) {
        const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
        if (entry.isDirectory() && depth < EVIDENCE_DEPTH) await walk(join(dir, entry.name), rel, depth + 1);
        if (!entry.isFile()) continue;
        if (files.length >= MAX_EVIDENCE_FILES) {
          truncated = true;
          return;
        }
        files.push({ path: rel.slice(0, 1024), bytes: (await lstat(join(dir, entry.name))).size });
      }
    };
    await walk(root, "", 0);
    return { folder: await workspaceRelative(workspace, root), files, truncated };
  }
}
