/**
 * The control plane's redaction is the sandbox's: one implementation, in sandbox/shared (the
 * sidecar and the boot ship alone in the image and cannot import from functions/).
 */
export { isSecretKey, redactSecrets, redactValue, redactKnown } from "../../sandbox/shared/redact-secrets";
