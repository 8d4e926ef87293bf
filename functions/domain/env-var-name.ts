/**
 * The one rule for environment variable names that reach a sandbox (issue 22 §5): letters,
 * digits and `_`, not starting with a digit. Modal rejects any other name at create and exec
 * (its SDK's `validateEnvVarKeys`), and a POSIX shell could not export it; E2B and the local
 * provider follow the same rule so a session behaves alike on every provider.
 */
export const ENV_VAR_NAME_PATTERN = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export const ENV_VAR_NAME_RULE = "letters, digits and '_', not starting with a digit";

/** The names in `env` that break the rule (empty when all are valid). */
export function invalidEnvVarNames(env: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(env).filter((name) => !ENV_VAR_NAME_PATTERN.test(name));
}
