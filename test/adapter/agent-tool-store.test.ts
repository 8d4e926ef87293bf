/**
 * What the agent's tools write and read in the table (issue 25 §4), against dynalite: a saved
 * service-command / env-file setting never moves the session's version, so a flow that read the
 * session before the save still commits (and keeps the save); a stopped or missing session is
 * refused. The audit log finds one execution's event by its id within a time window.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConflictError, NotFoundError } from "../../functions/domain/errors";
import type { LifecycleEvent } from "../../functions/ports/session-items";
import { DynamoLifecycleEventLog } from "../../functions/store/dynamo-session-items";
import { DynamoSessionSettingsStore } from "../../functions/store/dynamo-session-settings";
import { DynamoSessionStore } from "../../functions/store/dynamo-session-store";
import { buildSession, T0 } from "../support/builders";
import { startTestTable, type TestTable } from "../support/dynalite";

let table: TestTable;
let sessions: DynamoSessionStore;
let settings: DynamoSessionSettingsStore;
let events: DynamoLifecycleEventLog;
const later = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

beforeAll(async () => {
  table = await startTestTable();
  sessions = new DynamoSessionStore(table.doc, table.tableName);
  settings = new DynamoSessionSettingsStore(table.doc, table.tableName);
  events = new DynamoLifecycleEventLog(table.doc, table.tableName);
});
afterAll(async () => table.close());

describe("DynamoSessionSettingsStore.saveAgentSettings", () => {
  it("replaces the settings without moving the version, so a flow's compare-and-set commit still lands and keeps them", async () => {
    const created = buildSession({ serviceCommands: [{ name: "old", command: "echo old" }] });
    await sessions.createSession(created);
    const running = await sessions.transition(created, "running", later(1), { sandboxId: "sb-1" });
    const commands = [{ name: "web", command: "npm run dev", cwd: "app" }];
    const envFiles = [{ path: ".env", format: "dotenv" as const, keys: [{ name: "A", required: true }] }];
    await settings.saveAgentSettings(running.id, { serviceCommands: commands, envFiles });
    // A snapshot flow that read `running` before the save commits on it.
    const committed = await sessions.update(running, { snapshotId: "snap-1" }, later(2));
    const stored = await sessions.getSession(running.id);
    expect(stored).toMatchObject({ version: committed.version, snapshotId: "snap-1", serviceCommands: commands, envFiles });
  });

  it("refuses a stopped session (409) and a missing one (404)", async () => {
    const created = buildSession();
    await sessions.createSession(created);
    await sessions.transition(created, "stopped", later(1), { stopReason: "user" });
    await expect(settings.saveAgentSettings(created.id, { serviceCommands: [] })).rejects.toBeInstanceOf(ConflictError);
    await expect(settings.saveAgentSettings("ses_missing", { serviceCommands: [] })).rejects.toBeInstanceOf(NotFoundError);
    expect((await sessions.getSession(created.id))?.serviceCommands).toEqual([]);
  });
});

describe("DynamoLifecycleEventLog.findByExecution", () => {
  const event = (eventId: string, at: Date, snapshotId: string | null): LifecycleEvent => ({
    eventId,
    sessionId: "ses_events",
    at: at.toISOString(),
    flow: "snapshot",
    outcome: "committed",
    from: "running",
    to: "running",
    reason: "agent",
    actor: "agent",
    execution: eventId,
    sandboxId: "sb-1",
    previousSandboxId: "sb-1",
    message: null,
    timings: {},
    snapshotId,
  });

  it("finds the execution's event at or after the window's start, with the snapshot it took; null before it is recorded or outside the window", async () => {
    for (let i = 0; i < 30; i++) await events.append(event(`ensure-runtime-ses_events-${i}`, later(i), null));
    await events.append(event("snapshot-ses_events-7", later(40), "snap-7"));
    expect(await events.findByExecution("ses_events", "snapshot-ses_events-7", later(0))).toMatchObject({ snapshotId: "snap-7", outcome: "committed" });
    expect(await events.findByExecution("ses_events", "snapshot-ses_events-7", later(41))).toBeNull();
    expect(await events.findByExecution("ses_events", "snapshot-ses_events-8", later(0))).toBeNull();
  });
});
