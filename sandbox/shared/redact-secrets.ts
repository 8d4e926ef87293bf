/**
 * Secrets never appear in logs, errors or API responses. Every provider error message and every
 * log line (the control plane's, the boot's and the sidecar's) goes through `redactSecrets`
 * before it is stored or printed. One implementation for the control plane (functions/ re-exports
 * it) and the sandbox (which ships alone in the image): this file imports nothing.
 *
 * Shape-based, so it cannot know every secret: a process that holds a specific secret (the
 * sidecar its sandbox key) also strips that exact value with `redactKnown`.
 */

const REDACTED = "[REDACTED]";

/** Patterns for secrets that have a recognisable shape; order matters (most specific first). */
const SECRET_PATTERNS: readonly RegExp[] = [
  // PEM private keys, whole block.
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  // JSON Web Tokens: three base64url segments, the first two starting with `eyJ` ({").
  /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}/g,
  // Anthropic (sk-ant-api03-, sk-ant-admin01-) and OpenAI (sk-, sk-proj-, sk-svcacct-) keys.
  /\bsk-(?:ant-)?[A-Za-z0-9_-]{16,}/g,
  // Modal token ids and secrets.
  /\b(?:ak|as)-[A-Za-z0-9]{16,}/g,
  // E2B API keys and access tokens.
  /\be2b_[A-Za-z0-9]{16,}/g,
  /\bsk_e2b_[A-Za-z0-9]{16,}/g,
  // GitHub tokens (classic, fine-grained, app, OAuth).
  /\bgh[pousr]_[A-Za-z0-9]{20,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/g,
  // GitLab personal, deploy, runner, trigger, OAuth, feed... tokens (`glpat-`, `gldt-`, `glrt-`...);
  // newer ones carry dot-separated routing suffixes.
  /\bgl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|wt)-[A-Za-z0-9_.-]{20,}/g,
  // Slack bot/user/app tokens and webhook paths.
  /\bxox[abposre]-[A-Za-z0-9-]{10,}/g,
  /\bxapp-[A-Za-z0-9-]{10,}/g,
  /(?<=hooks\.slack\.com\/services\/)[A-Za-z0-9/]{20,}/g,
  // AWS access key ids.
  /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  // Google API keys, npm tokens.
  /\bAIza[A-Za-z0-9_-]{35}\b/g,
  /\bnpm_[A-Za-z0-9]{36}\b/g,
  // This platform's own API tokens and sidecar access tokens (sandbox/shared/access-token.ts).
  /\bsbx_[A-Za-z0-9_-]{20,}/g,
  /\bsca1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g,
  // WebSocket connect tickets (single use, 60 s; still never logged).
  /\bwst_[A-Za-z0-9_-]{20,}/g,
  // A raw sandbox key or agent password: an HMAC-SHA256 digest in base64url, 43 characters with
  // no prefix. Its last character carries 4 bits (two zero bits follow), and a random one mixes
  // upper case, lower case and digits; ids (lower case), git SHAs (40 hex) and words do not.
  /(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048](?![A-Za-z0-9_-])/g,
  // Credentials embedded in URLs: https://user:secret@host, https://token@host (long, or
  // shaped like a token however short: https://ghs_x@github.com).
  /(?<=:\/\/[^/\s:@]+:)[^@\s/]+(?=@)/g,
  /(?<=:\/\/)[^/\s:@]{20,}(?=@)/g,
  /(?<=:\/\/)(?:gh[pousr]_|github_pat_|gl[a-z]{2,5}-|sbx_|sk-|xox[a-z]-|sca1\.)[^/\s:@]*(?=@)/g,
  // Bearer / Basic / token authorization values: must look like a credential (contain a digit
  // or padding), so prose such as "Bearer authentication" or "the token expired" is left alone.
  /(?<=\b(?:Bearer|Basic)\s+)(?=[A-Za-z0-9._~+/=-]*[0-9=])[A-Za-z0-9._~+/=-]{8,}/gi,
  /(?<=\btoken\s+)(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{16,}/gi,
  // key=value, key: value and "key": "value" pairs whose key names a secret (aws_secret_access_key,
  // X-Api-Key, client_secret...). Purely numeric values are counts (max_tokens=4096), not secrets.
  /(?<=\b[A-Za-z0-9_-]*(?:api[_-]?key|(?:sandbox|master|private|signing)[_-]?key|secret|token|password|passwd|authorization|credential)[A-Za-z0-9_-]*["']?\s*[:=]\s*["']?)(?!\d+(?:["'\s,;&}]|$))(?!\[REDACTED\])[^\s"',;&}]{4,}/gi,
];

export function redactSecrets(text: string): string {
  let out = text;
  for (const pattern of SECRET_PATTERNS) out = out.replace(pattern, REDACTED);
  return out;
}

/**
 * `text` without any of `known` (exact values this process holds, e.g. the sandbox key), then
 * without anything secret-shaped. Values shorter than 8 characters are ignored (they would
 * redact ordinary text).
 */
export function redactKnown(text: string, known: readonly (string | null | undefined)[]): string {
  let out = text;
  for (const secret of known) if (secret && secret.length >= 8) out = out.split(secret).join(REDACTED);
  return redactSecrets(out);
}

const SECRET_KEY = /(?:api[_-]?key|(?:sandbox|master|private|signing)[_-]?key|secret|token|password|passwd|authorization|cookie|credential)/i;

/** Whether a field name says its value is a secret (used by `redactValue` and the logger). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** Deep copy of a log/error payload with secret-named keys masked and secret-shaped strings redacted. */
export function redactValue(value: unknown, depth = 0): unknown {
  if (depth > 8) return "[TRUNCATED]";
  if (typeof value === "string") return redactSecrets(value);
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value instanceof Error) {
    return { name: value.name, message: redactSecrets(value.message) };
  }
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // Only string values under a secret-named key are masked: numbers under such keys are
      // counts (`maxTokens`, `tokenCount`), and objects are walked so their own keys decide.
      out[k] = SECRET_KEY.test(k) && typeof v === "string" ? REDACTED : redactValue(v, depth + 1);
    }
    return out;
  }
  return value;
}
