/**
 * POST /v1/sessions/{id}/prompts, body `{content}`: stores the prompt durably (queued) before
 * anything else, touches activity, then delivers it (services/submit-prompt.ts): straight to the
 * agent of a running idle session, behind the turn in progress, by waking a paused/starting/error
 * session (`ensure-runtime`), or, while a lifecycle flow holds the session, by leaving it to that
 * flow's finish. Never dropped. 202 `{prompt: {id, status, position}, delivery}`; 409 for a
 * stopped session (nothing would ever run it). An optional `Idempotency-Key` header names the
 * prompt: a repeat with the same key answers 202 with the prompt stored first and stores nothing
 * more (domain/idempotency-key.ts); a malformed key is a 400 naming the header.
 */
import { CreatePromptBody } from "../../contract/requests";
import { IDEMPOTENCY_KEY_HEADER, IdempotencyKey, promptIdForKey } from "../../domain/idempotency-key";
import { ValidationError } from "../../domain/errors";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { authorOf, submitPrompt } from "../../services/submit-prompt";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

export { CreatePromptBody };

export const makeCreatePromptHandler = httpRoute(
  { name: "CreatePrompt", auth: true, params: SessionPathParams, body: CreatePromptBody },
  async ({ params, body, principal, headers }, deps) => {
    const caller = requirePrincipal(principal);
    const rawKey = headers?.[IDEMPOTENCY_KEY_HEADER];
    const key = rawKey === undefined ? null : IdempotencyKey.safeParse(rawKey);
    if (key && !key.success) throw new ValidationError(`Idempotency-Key header: ${key.error.issues[0]?.message ?? "invalid"}`);
    const session = await loadOwnedSession(deps.sessions, caller, params.id);
    const promptId = key?.data !== undefined ? promptIdForKey(caller.orgId, session.id, key.data) : undefined;
    const submitted = await submitPrompt(deps, session, {
      content: body.content,
      source: `user:${caller.userId}`,
      maxQueued: deps.config.MAX_QUEUED_PROMPTS_PER_SESSION,
      ...(promptId ? { promptId } : {}),
    });
    return {
      status: 202,
      body: {
        prompt: { id: submitted.prompt.promptId, status: submitted.status, position: submitted.position, createdAt: submitted.prompt.createdAt, authorId: authorOf(submitted.prompt.source) },
        delivery: submitted.delivery,
      },
    };
  },
);

export const handler = lambdaEntry(makeCreatePromptHandler);
