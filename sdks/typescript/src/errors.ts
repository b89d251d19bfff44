/** The package's errors: what went wrong talking to a node, in classes a caller acts on. */

const RETRYABLE = new Set([408, 429, 502, 503, 504]);

/** Base of every error this package throws. */
export class HourglassError extends Error {
  override name = "HourglassError";

  /** Whether the same request may succeed later unchanged. */
  get retryable(): boolean {
    return false;
  }
}

/**
 * The node refused the request with its error body `{"error": {"code", "message", "field"}}`;
 * nothing was changed.
 *
 * @schema Error.error
 */
export class ApiError extends HourglassError {
  override name = "ApiError";
  /** The HTTP status. */
  readonly status: number;
  /** Stable and machine-readable: `not_found`, `invalid_field`, `key_conflict`, ... */
  readonly code: string;
  /** The JSON path of the culprit, e.g. `schedule.timezone` or `jobs[3].target`. */
  readonly field: string | undefined;
  /** Milliseconds the node asked to wait before retrying (its `Retry-After`), if it said. */
  readonly retryAfterMs: number | undefined;
  /** The node's message (also the error's `message`, with status, code and field). */
  readonly detail: string;

  constructor(status: number, code: string, message: string, field?: string, retryAfterMs?: number) {
    super(`http ${status} ${code}: ${message}${field ? ` (at ${field})` : ""}`);
    this.status = status;
    this.code = code;
    this.detail = message;
    this.field = field;
    this.retryAfterMs = retryAfterMs;
  }

  override get retryable(): boolean {
    return RETRYABLE.has(this.status);
  }

  get notFound(): boolean {
    return this.status === 404;
  }
}

/** A failed answer without the API's error body, e.g. from a proxy in front of the node. */
export class HttpError extends HourglassError {
  override name = "HttpError";
  constructor(
    readonly status: number,
    readonly url: string,
    readonly body: string,
    readonly retryAfterMs?: number,
  ) {
    super(`http ${status} from ${url}`);
  }

  override get retryable(): boolean {
    return RETRYABLE.has(this.status);
  }
}

/** The request got no answer: connection refused or reset, timeout. Not thrown for an abort. */
export class TransportError extends HourglassError {
  override name = "TransportError";
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(`cannot reach ${url}: ${describe(cause)}`, { cause });
  }

  override get retryable(): boolean {
    return true;
  }
}

/** A successful answer whose body is not the shape this package expects. */
export class DecodeError extends HourglassError {
  override name = "DecodeError";
}

/**
 * A webhook request that is not a genuine, fresh delivery: a missing header, a bad signature, a
 * timestamp outside the tolerance. Answer it with a 4xx (400 or 401).
 */
export class WebhookVerificationError extends HourglassError {
  override name = "WebhookVerificationError";
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as { cause?: unknown }).cause;
    return inner instanceof Error ? `${cause.message}: ${inner.message}` : cause.message;
  }
  return String(cause);
}

/** `Retry-After` in milliseconds: delay-seconds, or an HTTP date (from now). */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const when = Date.parse(text);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, when - now);
}

/** The error for a non-2xx answer. */
export function errorFromAnswer(status: number, url: string, body: string, retryAfterMs?: number): HourglassError {
  try {
    const parsed: unknown = JSON.parse(body);
    const error = (parsed as { error?: { code?: unknown; message?: unknown; field?: unknown } }).error;
    if (error && typeof error.code === "string") {
      return new ApiError(
        status,
        error.code,
        typeof error.message === "string" ? error.message : "",
        typeof error.field === "string" ? error.field : undefined,
        retryAfterMs,
      );
    }
  } catch {
    // not the API's error body
  }
  return new HttpError(status, url, body.slice(0, 500), retryAfterMs);
}
