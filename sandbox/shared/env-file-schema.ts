/**
 * The env-file schema (seed 003 §6.11): which files `sandbox env apply` generates and which keys
 * each holds. Shared by the in-sandbox CLI (sandbox/cli/env-spec.ts), the boot spec, and the
 * control plane, which validates a session's `envFiles` with this same schema.
 */
import * as z from "zod";

const KeySchema = z.object({
  /** An environment-variable name: letters, digits, `_`, not starting with a digit. */
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "key name must be an environment variable name"),
  /** Missing required keys fail the whole apply; missing optional keys are left out of the file. */
  required: z.boolean().default(true),
  /** Fallback used when neither the values file nor the environment has the key. */
  value: z.string().optional(),
  /**
   * The org secret the control plane serves this key's value from (default: an org secret of the
   * key's own name). Read by the control plane only; the CLI never sees secret names resolved.
   */
  secret: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "secret must be a secret name").optional(),
});

/** One generated file; the control plane validates a session's `envFiles` with this same schema. */
export const EnvFileSchema = z.object({
  /** Relative to WORKSPACE_DIR (or absolute inside it). */
  path: z.string().min(1),
  format: z.enum(["dotenv", "json"]).default("dotenv"),
  keys: z.array(KeySchema),
});

/** A bare array of files, or `{files: [...]}`. */
export const EnvSpecSchema = z
  .union([z.array(EnvFileSchema), z.object({ files: z.array(EnvFileSchema) })])
  .transform((spec) => (Array.isArray(spec) ? spec : spec.files));

export type EnvFileSpec = z.infer<typeof EnvFileSchema>;
export type EnvSpec = EnvFileSpec[];
