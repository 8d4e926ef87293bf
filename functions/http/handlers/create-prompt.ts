/**
 * POST /v1/sessions/{id}/prompts, body `{content}`: stores the prompt durably (queued) before
 * anything else, touches activity, then delivers it: straight to the agent of a running session,
 * by waking a paused/starting/error session (`ensure-runtime`), or, while a lifecycle flow holds
 * the session, by leaving it to that flow's finish (flows/prompt-delivery.ts). Never dropped.
 * 202 `{prompt: {id, status}}`; 409 for a stopped session (nothing would ever run it).
 */
import { z } from "zod";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { deliverQueuedPrompts } from "../../flows/prompt-delivery";
import { requireStatus } from "../session-actions";
import { loadOwnedSession, requirePrincipal } from "../session-access";
import { SessionPathParams } from "./get-session";

export const MAX_PROMPT_CHARS = 32_000;

export const CreatePromptBody = z
  .object({
    content: z
      .string()
      .max(MAX_PROMPT_CHARS, `must be at most ${MAX_PROMPT_CHARS} characters`)
      .refine((s) => s.trim().length > 0, "must not be empty"),
  })
  .strict();

export const makeCreatePromptHandler = httpRoute(
  { name: "CreatePrompt", auth: true, params: SessionPathParams, body: CreatePromptBody },
  async ({ params, body, principal }, deps) => {
    const caller = requirePrincipal(principal);
    const session = await loadOwnedSession(deps.sessions, caller, params.id);
    requireStatus(session, ["starting", "running", "paused", "error"], "accept prompts");
    const now = deps.now();
    const prompt = await deps.prompts.enqueue({ sessionId: session.id, content: body.content, source: `user:${caller.userId}`, now });
    await deps.sessions.touchActivity(session.id, now);
    const delivery = await deliverQueuedPrompts(deps, session.id, { actor: `user:${caller.userId}`, wakeFromError: true });
    const mine = (await deps.prompts.list(session.id)).find((p) => p.promptId === prompt.promptId);
    return {
      status: 202,
      body: { prompt: { id: prompt.promptId, status: mine?.status ?? prompt.status, createdAt: prompt.createdAt }, delivery: delivery.outcome },
    };
  },
);

export const handler = lambdaEntry(makeCreatePromptHandler);
