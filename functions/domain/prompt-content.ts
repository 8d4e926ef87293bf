/**
 * A prompt's content as clients send it (HTTP `POST /v1/sessions/{id}/prompts` and the
 * WebSocket `prompt` frame): one schema, so both edges accept and refuse the same text.
 */
import * as z from "zod";
import { refineMultiLine } from "./text";

export const MAX_PROMPT_CHARS = 32_000;

export const PromptContent = z
  .string()
  .max(MAX_PROMPT_CHARS, `must be at most ${MAX_PROMPT_CHARS} characters`)
  .refine((s) => s.trim().length > 0, "must not be empty")
  .superRefine(refineMultiLine);
