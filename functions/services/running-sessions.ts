/** Every running session, read page by page (the sweeper's and the metering pass's scan). */
import type { SessionRecord } from "../domain/session";
import type { SessionStore } from "../ports/session-store";

const PAGE = 100;

export async function allRunningSessions(sessions: Pick<SessionStore, "listSessionsByStatus">): Promise<SessionRecord[]> {
  const out: SessionRecord[] = [];
  let cursor: string | null = null;
  do {
    const page = await sessions.listSessionsByStatus("running", { limit: PAGE, cursor });
    out.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}
