/**
 * The options of `Client` methods that are not a schema of the API: query parameters, and the
 * parts of a request body a method takes besides its positional arguments.
 */

import type { ExtendRequest, InstantIn, JobState, NackRequest, SchedulePreviewRequest } from "./types.js";

/** Filters and paging of `listJobs`. */
export interface ListJobsQuery {
  state?: JobState;
  type?: string;
  due_before?: InstantIn;
  due_after?: InstantIn;
  /** 1–1000, default 100. */
  limit?: number;
  cursor?: string;
  /** Include each job's payload; listings leave it out by default. */
  payload?: boolean;
  /** Label selectors, ANDed: `"tenant=acme"` (equality) or `"kind"` (existence); at most 8. */
  label?: string | string[];
  /** Only the jobs whose schedule refers to this anchor. */
  anchor?: string;
}

/** What `bulkJobs` does to each job it selects. */
export type BulkAction = "pause" | "resume" | "cancel" | "trigger";

/** Narrowing and paging of `bulkJobs`: only jobs of `type`; `cursor` from the previous answer. */
export interface BulkQuery {
  type?: string;
  cursor?: string;
}

/** Paging of the other lists. */
export interface PageQuery {
  limit?: number;
  cursor?: string;
}

/** Paging of `listAudit`, and only the entries about one job (its id). */
export interface AuditQuery extends PageQuery {
  job?: string;
}

/** Paging of `listQueueMessages`, and whether to include payloads (left out by default). */
export interface QueueMessagesQuery extends PageQuery {
  payload?: boolean;
}

/** The options of `nack`: `delay_ms`, to come back after (default: the job's retry backoff). */
export type NackOptions = Omit<NackRequest, "receipts">;

/** The options of `extend`: `visibility_ms`, how long from now. */
export type ExtendOptions = Omit<ExtendRequest, "receipts">;

/** The options of `rotateSigningSecret`. */
export interface RotateOptions {
  /** How long the replaced secret keeps signing (node default `24h`, at most `168h`; `0s`: none). */
  overlap?: string;
}

/**
 * The options of `previewSchedule`: `count`, how many due times (1–100, default 10), and
 * `job_id`, the job whose jitter offsets `fire_times` show.
 */
export type PreviewOptions = Omit<SchedulePreviewRequest, "schedule">;
