import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RESTORE_EXPIRY_MARGIN_MS, referencedSnapshotIds, resolveRestoreSource, restoreKindOf, type SnapshotFacts } from "../../functions/domain/restore-source";
import { supersededSnapshotIds } from "../../functions/flows/snapshot-retirement";
import type { FlowDocument } from "../../functions/flows/flow-document";
import { buildSession } from "../support/builders";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();
const DAY = 24 * 3600 * 1000;

function facts(over: Partial<SnapshotFacts> = {}): SnapshotFacts {
  return { provider: "modal", snapshotId: null, snapshotExpiresAt: null, durableSnapshotId: null, durableSnapshotExpiresAt: null, ...over };
}

describe("resolveRestoreSource (issue 22 §3)", () => {
  const paused = facts({ snapshotId: "mem:sn-1", snapshotExpiresAt: iso(T0 + 7 * DAY), durableSnapshotId: "im-1" });

  it("no snapshot: a fresh sandbox", () => {
    expect(resolveRestoreSource(facts(), new Date(T0))).toBeNull();
  });

  it("memory while it is valid, with the durable snapshot as what comes after", () => {
    expect(resolveRestoreSource(paused, new Date(T0))).toEqual({
      kind: "memory",
      snapshotId: "mem:sn-1",
      expiresAt: iso(T0 + 7 * DAY),
      expired: false,
      fallback: { kind: "filesystem", snapshotId: "im-1", expiresAt: null },
    });
  });

  it("the filesystem from the margin before the memory snapshot's expiry on", () => {
    const edge = T0 + 7 * DAY - RESTORE_EXPIRY_MARGIN_MS;
    expect(resolveRestoreSource(paused, new Date(edge - 1))?.kind).toBe("memory");
    expect(resolveRestoreSource(paused, new Date(edge))).toEqual({ kind: "filesystem", snapshotId: "im-1", expiresAt: null, expired: false, fallback: null });
  });

  it("everything expired: the one that lasts longest, flagged expired (never silently a fresh sandbox)", () => {
    const both = facts({ snapshotId: "mem:sn-1", snapshotExpiresAt: iso(T0 + DAY), durableSnapshotId: "im-1", durableSnapshotExpiresAt: iso(T0 + 2 * DAY) });
    expect(resolveRestoreSource(both, new Date(T0 + 3 * DAY))).toMatchObject({ snapshotId: "im-1", expired: true, fallback: null });
  });

  it("a snapshot without expiry is always chosen (E2B paused sandboxes, local and checkpoint snapshots)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000 * DAY }), (offset) => {
        const e2b = facts({ provider: "e2b", snapshotId: "e2b-sbx" });
        expect(resolveRestoreSource(e2b, new Date(T0 + offset))).toMatchObject({ kind: "memory", snapshotId: "e2b-sbx", expired: false });
      }),
    );
  });

  it("law: the choice is never a snapshot within the margin of its expiry unless every snapshot is", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 30 * DAY }), fc.option(fc.integer({ min: 0, max: 30 * DAY })), fc.integer({ min: 0, max: 40 * DAY }), (memExp, durExp, now) => {
        const f = facts({ snapshotId: "mem:a", snapshotExpiresAt: iso(T0 + memExp), durableSnapshotId: "im-b", durableSnapshotExpiresAt: durExp === null ? null : iso(T0 + durExp) });
        const chosen = resolveRestoreSource(f, new Date(T0 + now));
        if (!chosen) throw new Error("a session with snapshots always resolves");
        const usable = (exp: string | null) => exp === null || T0 + now < Date.parse(exp) - RESTORE_EXPIRY_MARGIN_MS;
        if (!chosen.expired) expect(usable(chosen.expiresAt)).toBe(true);
        else expect(usable(f.snapshotExpiresAt) || usable(f.durableSnapshotExpiresAt)).toBe(false);
      }),
    );
  });

  it("kinds: mem: ids and E2B snapshots keep processes; Modal images and local copies boot", () => {
    expect(restoreKindOf("modal", "mem:sn-1")).toBe("memory");
    expect(restoreKindOf("modal", "im-1")).toBe("filesystem");
    expect(restoreKindOf("e2b", "e2b-snapshot:abc:default")).toBe("memory");
    expect(restoreKindOf("local", "lsnap_1")).toBe("filesystem");
  });
});

describe("supersededSnapshotIds (issue 22 §4)", () => {
  const doc = (over: Partial<FlowDocument>): FlowDocument => ({ sessionId: "ses_x", flow: "pause", generation: 1, actor: "test", execution: "pause-x-1", ...over }) as FlowDocument;
  const begin = (snapshotIds: string[], sandboxId: string | null = "sb-1") =>
    ({ lease: { sessionId: "ses_x", owner: "o", fence: 1, expiresAt: 0 }, proceed: true, skipReason: null, branch: null, progressStatus: null, fromStatus: "running", sandboxId, snapshotIds, startedAt: iso(T0), ms: 1 }) as FlowDocument["begin"];

  it("the old pair once a new pair is committed; never the pair the session references", () => {
    const session = buildSession({ status: "paused", snapshotId: "mem:new", durableSnapshotId: "im-new", sandboxId: null });
    const d = doc({ begin: begin(["mem:old", "im-old"]), snapshot: { snapshotId: "mem:new", durableSnapshotId: "im-new", method: "memory", ms: 1 } });
    expect(supersededSnapshotIds(d, session).sort()).toEqual(["im-old", "mem:old"]);
  });

  it("a flow whose commit did not happen: what it took goes, what the session had stays", () => {
    const session = buildSession({ status: "running", snapshotId: "mem:old", durableSnapshotId: "im-old", sandboxId: "sb-1" });
    const d = doc({ begin: begin(["mem:old", "im-old"]), snapshot: { snapshotId: "mem:new", durableSnapshotId: "im-new", method: "memory", ms: 1 } });
    expect(supersededSnapshotIds(d, session).sort()).toEqual(["im-new", "mem:new"]);
  });

  it("never a sandbox id (an E2B paused sandbox's id is its snapshot id), nor the last snapshot a lost sandbox pauses on", () => {
    const running = buildSession({ provider: "e2b", status: "running", snapshotId: "e2b-snapshot:c1", sandboxId: "sbx-1" });
    expect(supersededSnapshotIds(doc({ flow: "snapshot", begin: begin(["sbx-1"], "sbx-1") }), running)).toEqual([]);
    const lost = buildSession({ status: "paused", snapshotId: "mem:old", sandboxId: null });
    expect(supersededSnapshotIds(doc({ begin: begin(["mem:old"]), snapshot: { snapshotId: "mem:old", method: "lost", ms: 1 } }), lost)).toEqual([]);
  });

  it("referencedSnapshotIds: both the snapshot and its durable fallback", () => {
    expect([...referencedSnapshotIds({ snapshotId: "mem:a", durableSnapshotId: "im-b" })]).toEqual(["mem:a", "im-b"]);
    expect([...referencedSnapshotIds({ snapshotId: null, durableSnapshotId: null })]).toEqual([]);
  });
});
