/**
 * POST /v1/sessions/{id}/prompts, body `{content}`: stores the prompt durably (queued) before
 * anything else, touches activity, then delivers it (services/submit-prompt.ts): straight to the
 * agent of a running idle session, behind the turn in progress, by waking a paused/starting/error
 * session (`ensure-runtime`), or, while a lifecycle flow holds the session, by leaving it to that
 * flow's finish. Never dropped. 202 `{prompt: {id, status, position}, delivery}`; 409 for a
 * stopped session (nothing would ever run it).
 */
import * as z from "zod";
import { PromptContent } from "../../domain/prompt-content";
import { httpRoute } from "../http-handler";
import { lambdaEntry } from "../lambda-entry";
import { authorOf, submitPrompt } from "../../services/submit-prompt";
import { loadOwnedSession, requirePrincipal, SessionPathParams } from "../session-access";

const CreatePromptBody = z.object({ content: PromptContent }).strict();

export const makeCreatePromptHandler = httpRoute(
  { name: "CreatePrompt", auth: true, params: SessionPathParams, body: CreatePromptBody },
  async ({ params, body, principal }, deps) => {
    const caller = requirePrincipal(principal);
    const session = await loadOwnedSession(deps.sessions, caller, params.id);
    const submitted = await submitPrompt(deps, session, { content: body.content, source: `user:${caller.userId}`, maxQueued: deps.config.MAX_QUEUED_PROMPTS_PER_SESSION });
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
