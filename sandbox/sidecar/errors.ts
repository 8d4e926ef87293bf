/**
 * The sidecar's errors: each carries the HTTP status and the stable `code` clients switch on.
 * Only these (4xx, 503) expose their message; anything else is answered as a generic 500 and the
 * details go to the sidecar's own log.
 */
export class SidecarError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }
}

export const invalidRequest = (message: string, code = "invalid_request") => new SidecarError(400, code, message);
export const unauthorized = () => new SidecarError(401, "unauthorized", "a valid bearer token is required");
export const notFound = (message: string) => new SidecarError(404, "not_found", message);
export const conflict = (message: string) => new SidecarError(409, "conflict", message);
export const payloadTooLarge = (limit: number) => new SidecarError(413, "payload_too_large", `request body exceeds ${limit} bytes`);
export const unavailable = (message: string) => new SidecarError(503, "unavailable", message);
