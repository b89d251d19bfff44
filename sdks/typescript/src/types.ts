/**
 * The API's JSON shapes. Property names are the wire names (the API is snake_case), so a type
 * reads like the OpenAPI document and the README. Each type names the OpenAPI schema it stands
 * for with an `@schema` tag; `npm run check-openapi` (run by scripts/sdk-test) compares them with
 * the document, so a field the node adds and this package misses fails CI.
 *
 * Instants the node sends are strings (RFC 3339, UTC, milliseconds: `2026-11-24T08:11:20.656Z`;
 * `new Date(s)` reads them). Instants you send may be strings with an offset or `Date`s.
 * Durations are strings such as `"90s"`, `"15m"`, `"1h30m"`, `"250ms"`.
 */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** An instant sent to the node: a `Date`, or RFC 3339 text with an offset. */
export type InstantIn = Date | string;

/** @schema JobState */
export type JobState = "active" | "paused" | "completed" | "failed" | "cancelled";

/** @schema Misfire.policy */
export type MisfirePolicy = "skip" | "once" | "all";

/** @schema Run.outcome */
export type RunOutcome = "delivered" | "retry" | "dead_letter";

/** @schema ReceiptResults.failed[].code */
export type ReceiptFailureCode = "stale_receipt";

/** @schema Status.status */
export type HealthStatus = "ok" | "ready";

/** @schema ConnectionList.connections[].kind */
export type ConnectionKind = "aws" | "eventbridge" | "sqs" | "sns" | "lambda" | "nats" | "redis" | "amqp";

/** Where a queue's message stands: due and waiting, not due yet, or held by a worker. @schema QueueMessageStatus */
export type QueueMessageStatus = "available" | "scheduled" | "leased";

/**
 * The node's error codes when this package was made. `ApiError.code` is a `string`: a newer
 * node may send one that is not listed here.
 *
 * @schema ErrorCode
 */
export type ErrorCode =
  | "body_timeout"
  | "body_too_large"
  | "cron_never_fires"
  | "engine_failed"
  | "forbidden"
  | "forbidden_target"
  | "instant_in_past"
  | "instant_too_far"
  | "internal"
  | "invalid_batch"
  | "invalid_cron"
  | "invalid_duration"
  | "invalid_field"
  | "invalid_header"
  | "invalid_host"
  | "invalid_id"
  | "invalid_idempotency_key"
  | "invalid_instant"
  | "invalid_json"
  | "invalid_misfire"
  | "invalid_namespace"
  | "invalid_query"
  | "invalid_queue"
  | "invalid_receipt"
  | "invalid_schedule"
  | "invalid_state"
  | "invalid_target"
  | "invalid_url"
  | "key_conflict"
  | "method_not_allowed"
  | "missing_field"
  | "not_found"
  | "not_ready"
  | "payload_too_large"
  | "quota_exceeded"
  | "rate_limited"
  | "schedule_never_fires"
  | "server_busy"
  | "store_unavailable"
  | "unauthorized"
  | "unknown_connection"
  | "unknown_field"
  | "unknown_timezone"
  | "unsupported_media_type";

// ---------------------------------------------------------------------------------------------
// Schedules

/** Once, at an instant (at most 5 minutes in the past: it then fires at once). @schema AtSchedule */
export interface AtSchedule {
  at: InstantIn;
}

/** Once, after a delay from now. @schema AfterSchedule */
export interface AfterSchedule {
  after: string;
}

/** A cron expression (5 fields, or 6 with seconds first) on an IANA zone's wall clock. @schema CronSchedule */
export interface CronSchedule {
  cron: string;
  /** IANA zone, default `UTC`. */
  timezone?: string;
  start?: InstantIn;
  end?: InstantIn;
  max_runs?: number;
}

/** A fixed interval (at least 1 s), anchored at `start` or at creation. @schema EverySchedule */
export interface EverySchedule {
  every: string;
  start?: InstantIn;
  end?: InstantIn;
  max_runs?: number;
}

/** Exactly one of the four forms. */
export type Schedule = AtSchedule | AfterSchedule | CronSchedule | EverySchedule;

/** A job's schedule as the node shows it (`after` has become `at`). @schema JobSchedule */
export interface JobSchedule {
  at?: string;
  cron?: string;
  timezone?: string;
  every?: string;
  start?: string;
  end?: string;
  max_runs?: number;
}

// ---------------------------------------------------------------------------------------------
// Targets, retry, misfire

/** A webhook the node POSTs each occurrence's payload to. @schema Webhook */
export interface Webhook {
  url: string;
  headers?: Record<string, string>;
  /** At most this many deliveries a second to this URL's destination. */
  rate_limit?: number;
  /** Deliver in batches; verify them with `WebhookVerifier.verifyBatch`. */
  batch?: WebhookBatch;
}

/** Deliver in batches of up to `max_items` (1 to 1000) occurrences a request. @schema WebhookBatch */
export interface WebhookBatch {
  max_items: number;
}

// The bus and cloud targets. Each names a connection the node's operator configured
// (`[connections.NAME]` in its config file) for this namespace; `listConnections()` lists them.

/**
 * PutEvents to an EventBridge bus (a name or ARN): the payload, a JSON object, is the event's
 * `detail`; the occurrence's facts are in its `resources`.
 *
 * @schema EventBridgeTarget
 */
export interface EventBridgeTarget {
  connection: string;
  bus: string;
  source: string;
  detail_type: string;
}

/** A message to an SQS queue: the body is the payload. @schema SqsTarget */
export interface SqsTarget {
  connection: string;
  queue_url: string;
  /** FIFO queues only: the message group (default: the job id). */
  group_id?: string;
}

/** A message published to an SNS topic: the message is the payload. @schema SnsTarget */
export interface SnsTarget {
  connection: string;
  topic_arn: string;
  /** FIFO topics only: the message group (default: the job id). */
  group_id?: string;
}

/**
 * An asynchronous invocation of a Lambda function (a name or ARN); the event is
 * `{ delivery_id, job_id, type, due_at, attempt, payload }`.
 *
 * @schema LambdaTarget
 */
export interface LambdaTarget {
  connection: string;
  function: string;
}

/** A NATS JetStream publish of the payload (`Nats-Msg-Id`: the delivery id). @schema NatsTarget */
export interface NatsTarget {
  connection: string;
  subject: string;
}

/** An `XADD` to a Redis stream (fields `payload`, `delivery_id`, `job_id`, ...). @schema RedisStreamTarget */
export interface RedisStreamTarget {
  connection: string;
  stream: string;
}

/** A persistent, confirmed AMQP 0-9-1 publish. @schema AmqpTarget */
export interface AmqpTarget {
  connection: string;
  /** `""` is the default exchange. */
  exchange: string;
  routing_key?: string;
}

/**
 * Each kind of target, by its key in a target: a `Target` has exactly one of them.
 *
 * @schema Target
 */
export interface TargetKinds {
  webhook: Webhook;
  /** A pull queue's name. */
  queue: string;
  eventbridge: EventBridgeTarget;
  sqs: SqsTarget;
  sns: SnsTarget;
  lambda: LambdaTarget;
  nats: NatsTarget;
  redis_stream: RedisStreamTarget;
  amqp: AmqpTarget;
}

/** The name of a kind of target: `"webhook"`, `"queue"`, `"nats"`, ... */
export type TargetKind = keyof TargetKinds;

/**
 * Where occurrences go: exactly one of a webhook, a pull queue, or a bus or cloud service
 * through a connection (`{ nats: { connection: "bus", subject: "jobs.reminder" } }`).
 */
export type Target = {
  [K in TargetKind]: { [P in K]: TargetKinds[K] } & { [P in Exclude<TargetKind, K>]?: never };
}[TargetKind];

/** A webhook target as the node shows it: header values are `<redacted>`. @schema TargetOut.webhook */
export interface WebhookOut {
  url: string;
  headers: Record<string, string>;
  rate_limit?: number;
  batch?: WebhookBatch;
}

/** A job's target as the node shows it: one of these is set. @schema TargetOut */
export interface JobTarget {
  webhook?: WebhookOut;
  queue?: string;
  eventbridge?: EventBridgeTarget;
  sqs?: SqsTarget;
  sns?: SnsTarget;
  lambda?: LambdaTarget;
  nats?: NatsTarget;
  redis_stream?: RedisStreamTarget;
  amqp?: AmqpTarget;
}

/** A retry policy; left-out fields take the node's defaults (10 attempts, 1s, 15m). @schema Retry */
export interface Retry {
  max_attempts?: number;
  initial_backoff?: string;
  max_backoff?: string;
}

/** A job's retry policy as the node shows it. @schema RetryOut */
export interface RetryOut {
  max_attempts: number;
  initial_backoff: string;
  max_backoff: string;
}

/** What a recurring job does about missed occurrences. @schema Misfire */
export type Misfire = MisfirePolicy | { policy: MisfirePolicy; window?: string };

// ---------------------------------------------------------------------------------------------
// Jobs

/**
 * A job to create. With a `key`, creating the same job again is safe: the node answers with the
 * existing job (same body) or `409 key_conflict` (another body).
 *
 * @schema CreateJob
 */
export interface NewJob {
  key?: string;
  type?: string;
  schedule: Schedule;
  target: Target;
  payload?: Json;
  retry?: Retry;
  misfire?: Misfire;
}

/** The fields of a job to replace; left-out ones stay (`payload: null` clears it). @schema PatchJob */
export interface JobPatch {
  type?: string;
  schedule?: Schedule;
  target?: Target;
  payload?: Json;
  retry?: Retry;
  misfire?: Misfire;
}

/** A stored job. @schema Job */
export interface Job {
  id: string;
  namespace: string;
  key: string | null;
  type: string | null;
  state: JobState;
  schedule: JobSchedule;
  target: JobTarget;
  payload: Json;
  retry: RetryOut;
  misfire: Misfire;
  /** The nominal due time of the pending occurrence (the delivery id's time). */
  next_due_at: string | null;
  /** When that occurrence is next attempted, when this differs (a backoff, an open breaker). */
  next_attempt_at: string | null;
  attempt: number;
  /** Why the latest failed attempt failed (at most 1 KiB), until an occurrence is delivered. */
  last_error: string | null;
  runs: number;
  skipped: number;
  created_at: string;
  updated_at: string;
}

/** A job just triggered, and the delivery id of the occurrence the trigger made. @schema triggerJob.200 */
export interface TriggeredJob extends Job {
  delivery_id: string;
}

/** A job of a batch create; `created: false` is an idempotent repeat. @schema BatchCreated.jobs[] */
export interface BatchJob extends Job {
  created: boolean;
}

/** @schema BatchCreated */
export interface BatchCreated {
  created: number;
  jobs: BatchJob[];
}

/** A job of a minimal batch answer (`prefer: "return=minimal"`). @schema BatchCreatedMinimal.jobs[] */
export interface BatchJobBrief {
  id: string;
  key: string | null;
  state: JobState;
  next_due_at: string | null;
  created: boolean;
}

/** A batch create's minimal answer: each job by id, key, state and due time. @schema BatchCreatedMinimal */
export interface BatchCreatedMinimal {
  created: number;
  jobs: BatchJobBrief[];
}

/** A page of jobs; `next_cursor` is set when the page is full. @schema JobList */
export interface JobList {
  jobs: Job[];
  next_cursor: string | null;
}

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
}

/** Paging of the other lists. */
export interface PageQuery {
  limit?: number;
  cursor?: string;
}

/** Paging of `listQueueMessages`, and whether to include payloads (left out by default). */
export interface QueueMessagesQuery extends PageQuery {
  payload?: boolean;
}

/** One delivery attempt of a job. @schema Run */
export interface Run {
  delivery_id: string;
  due_at: string;
  attempt: number;
  started_at: string;
  latency_ms: number;
  status_code: number | null;
  error: string | null;
  /** The start (1 KiB) of what the target answered to a failed attempt. */
  response: string | null;
  outcome: RunOutcome;
}

/** @schema RunList */
export interface RunList {
  runs: Run[];
  next_cursor: string | null;
}

/** An occurrence that failed for good. @schema DeadLetter */
export interface DeadLetter {
  id: string;
  job_id: string;
  delivery_id: string;
  due_at: string;
  attempts: number;
  reason: string;
  type: string | null;
  target: JobTarget;
  payload: Json;
  created_at: string;
}

/** @schema DeadLetterList */
export interface DeadLetterList {
  dead_letters: DeadLetter[];
  next_cursor: string | null;
}

/** A freshly rotated signing secret, shown this once. @schema SigningSecret */
export interface SigningSecret {
  namespace: string;
  signing_secret: string;
  previous_valid_until: string | null;
  note: string;
}

/** @schema SchedulePreview */
export interface SchedulePreview {
  fire_times: string[];
  description: string;
}

/** @schema Status */
export interface Status {
  status: HealthStatus;
}

// ---------------------------------------------------------------------------------------------
// Queues

/** What a lease asks for. @schema LeaseRequest */
export interface LeaseRequest {
  /** At most this many messages (1–1000, node default 10). */
  max?: number;
  /** Long-poll up to this long when none is available (≤ 20000, default 0). */
  wait_ms?: number;
  /** How long the messages stay invisible to other consumers (1000–43200000, default 30000). */
  visibility_ms?: number;
  /** Only these job types (1–32 of them). */
  types?: string[];
}

/** One leased occurrence of a job. @schema Message */
export interface Message {
  job_id: string;
  type: string | null;
  payload: Json;
  /** The same on every redelivery of this occurrence: deduplicate on it. */
  delivery_id: string;
  attempt: number;
  max_attempts: number;
  due_at: string;
  visible_until: string;
  receipt: string;
}

/** @schema LeaseResult */
export interface LeaseResult {
  messages: Message[];
}

/** The options of `nack`. */
export interface NackOptions {
  /** Come back after this long (default: the job's retry backoff). */
  delay_ms?: number;
}

/** The options of `extend`. */
export interface ExtendOptions {
  visibility_ms: number;
}

/** A receipt an ack, nack or extend did not apply to. @schema ReceiptResults.failed[] */
export interface ReceiptFailure {
  receipt: string;
  code: ReceiptFailureCode | string;
  message: string;
}

/** Per receipt: which ones applied. @schema ReceiptResults */
export interface ReceiptResults {
  succeeded: string[];
  failed: ReceiptFailure[];
  visible_until?: string;
}

/** A pull queue's counts. @schema Queue */
export interface Queue {
  name: string;
  available: number;
  in_flight: number;
  scheduled: number;
  oldest_available_age_ms: number | null;
}

/** @schema QueueList */
export interface QueueList {
  queues: Queue[];
  /** The last queue of this page when more follow; `null` on the last page. */
  next_cursor: string | null;
}

/**
 * A queue's message as an operator sees it (`listQueueMessages`): an active job targeting the
 * queue, waiting or leased. It has no receipt: only the worker holding a lease settles it.
 *
 * @schema QueueMessage
 */
export interface QueueMessage {
  job_id: string;
  key: string | null;
  type: string | null;
  status: QueueMessageStatus;
  due_at: string;
  /** When a lease can take it; `null` while leased. */
  available_at: string | null;
  /** While leased: when the lease lapses unless its worker settles or extends it first. */
  leased_until: string | null;
  /** Failed attempts of this occurrence so far (nacks, lapsed leases). */
  failed_attempts: number;
  max_attempts: number;
  delivery_id: string;
  last_error: string | null;
  payload: Json;
  created_at: string;
}

/** A page of a queue's messages, oldest first. @schema QueueMessageList */
export interface QueueMessageList {
  messages: QueueMessage[];
  next_cursor: string | null;
}

/** A destination whose circuit breaker is open on this node. @schema BreakerList.breakers[] */
export interface Breaker {
  destination: string;
  open_since: string;
}

/** @schema BreakerList */
export interface BreakerList {
  breakers: Breaker[];
}

// ---------------------------------------------------------------------------------------------
// Connections

/** This node's publishes through a connection since it started. @schema ConnectionList.connections[].published */
export interface PublishCounts {
  /** Acknowledged by the service. */
  delivered: number;
  /** Failed, to be retried. */
  retry: number;
  /** Refused for good (dead-lettered). */
  rejected: number;
}

/**
 * A bus or cloud connection the namespace may use: the name a target's `connection` gives, and
 * its kind (endpoints and credentials stay in the operator's config file).
 *
 * @schema ConnectionList.connections[]
 */
export interface Connection {
  name: string;
  kind: ConnectionKind;
  /** This node's publishes through it; `null` for a connection other namespaces share. */
  published: PublishCounts | null;
}

/** @schema ConnectionList */
export interface ConnectionList {
  connections: Connection[];
}

/** The options of `rotateSigningSecret`. */
export interface RotateOptions {
  /** How long the replaced secret keeps signing (node default `24h`, at most `168h`; `0s`: none). */
  overlap?: string;
}

/** The options of `previewSchedule`. */
export interface PreviewOptions {
  /** 1–100, default 10. */
  count?: number;
}
