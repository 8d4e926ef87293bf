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
import * as z from "zod";
import type { RequestEnvVariablesRequest, SaveEnvFilesRequest, SaveServiceCommandsRequest, SaveSnapshotRequest } from "../shared/agent-tool-requests";
import type { ControlPlaneClient } from "./control-plane-client";
import { SidecarError } from "./errors";

/** How long `save_snapshot` waits for the snapshot to commit before answering `pending`. */
export const SNAPSHOT_WAIT_MS = 120_000;
const POLL_FIRST_MS = 500;
const POLL_MAX_MS = 3_000;

export const SNAPSHOTS_ROUTE = "/v1/sandbox/snapshots";
export const SERVICE_COMMANDS_ROUTE = "/v1/sandbox/service-commands";
export const ENV_FILES_ROUTE = "/v1/sandbox/env-files";
export const ENV_REQUESTS_ROUTE = "/v1/sandbox/env-requests";

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
}
