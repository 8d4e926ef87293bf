/**
 * Issue 25 §5 (seed 000: a dead sandbox is noticed within 30 s, not at the sweeper's next pass):
 * when the relay's stream to a session's agent fails, the relay hands the question "is the
 * sandbox still there?" to the `idle-snapshot` flow in its `sandbox_lost` mode, which has the
 * provider bindings the relay must not carry. That flow asks the provider (`checkSandboxes`):
 * gone -> it pauses the session on its last snapshot (`pauseReason: "sandbox_lost"`, prompts in
 * flight requeued) or stops it when there is none; alive (a network blip, OpenCode restarting
 * under the boot's supervision) -> it stands down and changes nothing, and the relay goes on
 * reconnecting. One implementation of the transition, shared with the sweeper.
 *
 * Cheap by construction: nothing while a lifecycle flow holds the session (a pause, migration or
 * idle snapshot is taking the sandbox down on purpose), and at most one report per session per
 * `minIntervalMs` however often its stream fails.
 */
import type { Logger } from "@aws-lambda-powertools/logger";
import { errorForLog } from "../observability/logger";
import type { FlowRunner } from "../ports/flow-runner";
import type { SessionStore } from "../ports/session-store";
import type { DisconnectReason } from "./session-stream";

export interface StreamLossDeps {
  sessions: Pick<SessionStore, "readLease">;
  flows: FlowRunner;
  logger: Logger;
  now: () => Date;
}

/** Default: well inside seed 000's 30 s, and the relay's longest reconnect delay (10 s) apart. */
export const STREAM_LOSS_REPORT_INTERVAL_MS = 10_000;
const MAX_TRACKED = 10_000;

export class StreamLossReporter {
  private readonly reportedAt = new Map<string, number>();
  /** Failures since the stream was last live, per session. */
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly deps: StreamLossDeps,
    private readonly options: { actor: string; minIntervalMs?: number },
  ) {}

  /** The stream of `sessionId` is live again: its failures so far were a blip. */
  streamConnected(sessionId: string): void {
    this.failures.delete(sessionId);
  }

  /**
   * The stream of `sessionId` failed; resolves with the execution started, if any. Never throws.
   * The first failure that closed the stream is only counted: a stream that drops and reconnects
   * (a network blip, a proxy's idle timeout) is no news. A dead sandbox fails the reconnect too,
   * the first backoff step (1 s) later, and that is reported. A stream that went silent
   * (`heartbeat`: OpenCode missed its 10 s heartbeats while the connection stayed open) is
   * reported at once: a reconnect to a sandbox that is gone behind a tunnel that holds the
   * connection could hang for another whole heartbeat timeout, past seed 000's 30 s.
   */
  async streamFailed(sessionId: string, reason?: DisconnectReason): Promise<string | null> {
    try {
      if (this.failures.size >= MAX_TRACKED) this.failures.clear();
      const failures = (this.failures.get(sessionId) ?? 0) + 1;
      this.failures.set(sessionId, failures);
      if (failures < 2 && reason !== "heartbeat") return null;
      const now = this.deps.now().getTime();
      const last = this.reportedAt.get(sessionId);
      if (last !== undefined && now - last < (this.options.minIntervalMs ?? STREAM_LOSS_REPORT_INTERVAL_MS)) return null;
      const lease = await this.deps.sessions.readLease(sessionId);
      if (!lease) return null;
      // A flow holds the session: it is the one ending (or replacing) this sandbox.
      if (lease.owner !== null && (lease.expiresAt ?? 0) > now) return null;
      if (this.reportedAt.size >= MAX_TRACKED) this.reportedAt.clear();
      this.reportedAt.set(sessionId, now);
      // Its own execution name: joining an idle check's `inactivity` run at the same fence would
      // swallow one of the two (they ask different questions); two reports still join each other.
      const { executionName } = await this.deps.flows.start({ flow: "idle-snapshot", sessionId, generation: `${lease.fence}-lost`, actor: this.options.actor, reason: "sandbox_lost" });
      this.deps.logger.info("relay stream failed: sandbox liveness check started", { sessionId, execution: executionName });
      return executionName;
    } catch (err) {
      this.deps.logger.warn("relay stream failure not reported", { sessionId, error: errorForLog(err) });
      return null;
    }
  }
}
