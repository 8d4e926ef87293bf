/**
 * Slack (API.md "Slack"): what the ack function and the worker keep in the table, and the queue
 * between them (SQS in AWS, in process locally).
 */

/** One verified request from Slack, as the ack function hands it to the worker. */
export interface SlackDelivery {
  /** `status`: a flow's status frame forwarded by its Lambda (slack/status-forward.ts), never from Slack. */
  kind: "command" | "event" | "interaction" | "status";
  /** Dedupe key: `event:<event_id>`, `command:<trigger_id>`, `interaction:<trigger_id>`, `status:<session>:<uuid>`. */
  key: string;
  /** The raw body Slack signed (form-encoded or JSON), parsed by the worker. */
  body: string;
  receivedAt: string;
}

export interface SlackQueue {
  enqueue(delivery: SlackDelivery): Promise<void>;
}

export interface SlackWorkspace {
  teamId: string;
  orgId: string;
  defaultRepo: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The thread a session owns (one thread per session, one session per thread). */
export interface SlackThread {
  sessionId: string;
  teamId: string;
  channelId: string;
  /** The thread's parent message `ts`. */
  threadTs: string;
  /** Who started it (`slack:<team>:<user>`'s user), for ephemeral answers. */
  userId: string;
}

/** An outbox post: one per idempotency key; `ts` once Slack has it. */
export interface SlackPost {
  key: string;
  channelId: string;
  ts: string | null;
  /** When the first send began (the recovery looks for the message from then on). */
  sendingSince: string;
}

export interface SlackStore {
  /** The ack's conditional write: false when this delivery key was recorded before (a redelivery). */
  recordDelivery(key: string, now: Date): Promise<boolean>;
  /** Undoes `recordDelivery` when the delivery could not be enqueued (Slack retries it). */
  forgetDelivery(key: string): Promise<void>;

  getWorkspace(teamId: string): Promise<SlackWorkspace | null>;
  /** Binds the team to the org: `conflict` when another org holds it. */
  bindWorkspace(input: { teamId: string; orgId: string; defaultRepo: string | null; now: Date }): Promise<SlackWorkspace | "conflict">;
  /** The org's binding (an org binds at most one team through the API). */
  workspaceOfOrg(orgId: string): Promise<SlackWorkspace | null>;
  unbindWorkspace(teamId: string, orgId: string): Promise<boolean>;

  channelDefaultRepo(teamId: string, channelId: string): Promise<string | null>;
  setChannelDefaultRepo(teamId: string, channelId: string, repo: string, now: Date): Promise<void>;

  /**
   * Claims a start (a command, a mention) once: the session id the first claim chose. A redelivery
   * gets the same id back, so it can never create a second session.
   */
  claimStart(deliveryKey: string, sessionId: string, now: Date): Promise<{ sessionId: string; fresh: boolean }>;

  putThread(thread: SlackThread, now: Date): Promise<void>;
  threadBySession(sessionId: string): Promise<SlackThread | null>;
  threadByTs(teamId: string, channelId: string, threadTs: string): Promise<SlackThread | null>;

  getPost(key: string): Promise<SlackPost | null>;
  /** Marks a post as being sent; `fresh: false` when the item existed (sent, or a send began before). */
  beginPost(key: string, channelId: string, now: Date): Promise<{ post: SlackPost; fresh: boolean }>;
  recordPostTs(key: string, ts: string): Promise<void>;
}
