/**
 * Hourglass client for Node ≥ 20: create and manage jobs, run pull-queue workers, verify
 * webhooks. No runtime dependencies (the global `fetch`, `node:crypto`).
 *
 * ```ts
 * import { Client } from "@hourglass/client";
 * const client = new Client("http://127.0.0.1:7070");
 * await client.createJob({ schedule: { after: "5s" }, target: { queue: "emails" }, payload: { to: "ada" } });
 * ```
 */

export { Client, jobRef } from "./client.js";
export type { CallOptions, ClientOptions } from "./client.js";
export {
  ApiError,
  DecodeError,
  HourglassError,
  HttpError,
  TransportError,
  WebhookVerificationError,
  parseRetryAfter,
} from "./errors.js";
export { operations } from "./operations.js";
export type { Operation, OperationId } from "./operations.js";
export type * from "./options.js";
export type * from "./types.js";
export { DEFAULT_TOLERANCE_SECONDS, deliveryHeaders, WebhookVerifier, sign, signMetadata } from "./webhooks.js";
export type { Delivery, HeadersLike } from "./webhooks.js";
export { RetryLater, Worker } from "./worker.js";
export type { Handler, HandlerContext, WorkerLogger, WorkerOptions } from "./worker.js";
