/** `Client`: one method per endpoint of the node's API, over the global `fetch`. */

import { DecodeError, errorFromAnswer, parseRetryAfter, TransportError } from "./errors.js";
import { type OperationId, operations } from "./operations.js";
import type {
  AuditQuery,
  ExtendOptions,
  BulkAction,
  BulkQuery,
  ListJobsQuery,
  NackOptions,
  PageQuery,
  PreviewOptions,
  QueueMessagesQuery,
  RotateOptions,
} from "./options.js";
import type {
  Anchor,
  AnchorDeleted,
  AnchorIn,
  AnchorList,
  AuditList,
  BackfillAccepted,
  BackfillRequest,
  BatchCreated,
  BatchCreatedMinimal,
  BulkChanged,
  Breaker,
  BreakerList,
  Calendar,
  CalendarIn,
  CalendarList,
  Connection,
  ConnectionList,
  CurrentSigningSecret,
  DeadLetter,
  DeadLetterList,
  Identity,
  Job,
  JobList,
  JobPatch,
  LeaseRequest,
  LeaseResult,
  Message,
  NewJob,
  Node,
  NodeList,
  Queue,
  QueueList,
  QueueMessageList,
  ReceiptResults,
  RunList,
  Schedule,
  SchedulePreview,
  SigningSecret,
  Status,
  Summary,
  TriggeredJob,
} from "./types.js";

export interface ClientOptions {
  /** Sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Sent as `hourglass-namespace` (admin keys and development mode). */
  namespace?: string;
  /** Milliseconds each request may take (default 30000); a lease gets its `wait_ms` on top. */
  timeoutMs?: number;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
}

/** Per call: an `AbortSignal` that cancels the request. */
export interface CallOptions {
  signal?: AbortSignal;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The path segment for a job: its id (a UUID) as it is, and anything else as a key (`key:` and
 * the percent-encoded key; a leading `key:` is taken as that prefix). A key that looks like a
 * UUID is written with its `key:` prefix.
 */
export function jobRef(job: string): string {
  if (UUID.test(job)) return job;
  const key = job.startsWith("key:") ? job.slice(4) : job;
  return `key:${encodeURIComponent(key)}`;
}

interface Request {
  op: OperationId;
  params?: Record<string, string>;
  query?: Record<string, unknown>;
  body?: unknown;
  headers?: Record<string, string>;
  extraTimeoutMs?: number;
  signal?: AbortSignal | undefined;
  raw?: boolean;
}

/**
 * A client for one node.
 *
 * ```ts
 * const client = new Client("http://127.0.0.1:7070", { apiKey: process.env.HOURGLASS_API_KEY });
 * const job = await client.createJob({ schedule: { after: "5s" }, target: { queue: "emails" } });
 * ```
 *
 * Every method rejects with `ApiError` when the node refuses the request (`status`, `code`,
 * `field`, `retryAfterMs`), `TransportError` when it cannot be reached. Jobs are named by id or
 * by key (`"nightly-export"` or `"key:nightly-export"`).
 */
export class Client {
  readonly baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    if (!/^https?:\/\//.test(baseUrl)) throw new TypeError(`base url ${JSON.stringify(baseUrl)} is not an http(s) url`);
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#headers = { accept: "application/json", "user-agent": "hourglass-typescript/0.1.0" };
    if (options.apiKey !== undefined) this.#headers["authorization"] = `Bearer ${options.apiKey}`;
    if (options.namespace !== undefined) this.#headers["hourglass-namespace"] = options.namespace;
  }

  // Jobs

  /** Creates a job (an idempotent repeat when `key` and body match an existing job). */
  createJob(job: NewJob, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "createJob", body: job, signal: options?.signal });
  }

  /**
   * Creates up to 1,000 jobs in one transaction: all or none. With `prefer: "return=minimal"`
   * each job is answered by its id, key, state and due time only (for bulk loaders).
   */
  createJobs(jobs: NewJob[], options?: CallOptions & { prefer?: undefined }): Promise<BatchCreated>;
  createJobs(jobs: NewJob[], options: CallOptions & { prefer: "return=minimal" }): Promise<BatchCreatedMinimal>;
  createJobs(
    jobs: NewJob[],
    options: CallOptions & { prefer?: "return=minimal" } = {},
  ): Promise<BatchCreated | BatchCreatedMinimal> {
    const headers: Record<string, string> = {};
    if (options.prefer !== undefined) headers["prefer"] = options.prefer;
    return this.#send({ op: "createJobs", body: { jobs }, headers, signal: options.signal });
  }

  /** One page of jobs; pass `next_cursor` as `cursor` for the next (or use `jobs()`). */
  listJobs(query: ListJobsQuery = {}, options?: CallOptions): Promise<JobList> {
    return this.#send({ op: "listJobs", query: { ...query }, signal: options?.signal });
  }

  /** Every job matching the filters, fetching pages as needed: `for await (const job of client.jobs())`. */
  async *jobs(query: Omit<ListJobsQuery, "cursor"> = {}, options?: CallOptions): AsyncGenerator<Job, void, undefined> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listJobs(cursor === undefined ? query : { ...query, cursor }, options);
      yield* page.jobs;
      if (page.next_cursor === null) return;
      cursor = page.next_cursor;
    }
  }

  /**
   * Pauses, resumes, cancels or triggers (`action`) the namespace's live jobs that every `label`
   * selector picks (`"tenant=acme"`, `"kind"`). One call changes at most 1000; when `more`, call
   * again with `cursor: next_cursor` (a repeated `trigger` without it fires the first ones again).
   */
  bulkJobs(action: BulkAction, label: string | string[], query: BulkQuery = {}, options?: CallOptions): Promise<BulkChanged> {
    return this.#send({
      op: "bulkJobs",
      params: { action },
      query: { ...query, label },
      signal: options?.signal,
    });
  }

  getJob(id: string, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "getJob", params: { id: jobRef(id) }, signal: options?.signal });
  }

  /** Replaces the fields `patch` sets. */
  updateJob(id: string, patch: JobPatch, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "updateJob", params: { id: jobRef(id) }, body: patch, signal: options?.signal });
  }

  /** Cancels the job; an occurrence being delivered at this instant may still arrive. */
  cancelJob(id: string, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "cancelJob", params: { id: jobRef(id) }, signal: options?.signal });
  }

  pauseJob(id: string, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "pauseJob", params: { id: jobRef(id) }, signal: options?.signal });
  }

  /** Resumes a paused job (a recurring job continues from now). */
  resumeJob(id: string, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "resumeJob", params: { id: jobRef(id) }, signal: options?.signal });
  }

  /**
   * Fires an occurrence now. With `idempotencyKey`, a retry of this call changes nothing and
   * answers the first trigger's `delivery_id`.
   */
  triggerJob(id: string, options: CallOptions & { idempotencyKey?: string } = {}): Promise<TriggeredJob> {
    const headers: Record<string, string> = {};
    if (options.idempotencyKey !== undefined) headers["idempotency-key"] = options.idempotencyKey;
    return this.#send({ op: "triggerJob", params: { id: jobRef(id) }, headers, signal: options.signal });
  }

  /**
   * Runs each nominal occurrence of a recurring job in `[from, to)` once, paced, before its own;
   * answers how many it runs (0 when earlier backfills ran them all).
   */
  backfillJob(id: string, range: BackfillRequest, options?: CallOptions): Promise<BackfillAccepted> {
    return this.#send({ op: "backfillJob", params: { id: jobRef(id) }, body: range, signal: options?.signal });
  }

  /** Delivery attempts of a job, newest first. */
  listJobRuns(id: string, query: PageQuery = {}, options?: CallOptions): Promise<RunList> {
    return this.#send({ op: "listJobRuns", params: { id: jobRef(id) }, query: { ...query }, signal: options?.signal });
  }

  // Dead letters

  listDeadLetters(query: PageQuery = {}, options?: CallOptions): Promise<DeadLetterList> {
    return this.#send({ op: "listDeadLetters", query: { ...query }, signal: options?.signal });
  }

  getDeadLetter(id: string | number, options?: CallOptions): Promise<DeadLetter> {
    return this.#send({ op: "getDeadLetter", params: { id: encodeURIComponent(String(id)) }, signal: options?.signal });
  }

  async deleteDeadLetter(id: string | number, options?: CallOptions): Promise<void> {
    await this.#send({ op: "deleteDeadLetter", params: { id: encodeURIComponent(String(id)) }, signal: options?.signal, raw: true });
  }

  /** Replays a dead letter as a new one-off job due now, and removes the dead letter. */
  replayDeadLetter(id: string | number, options?: CallOptions): Promise<Job> {
    return this.#send({ op: "replayDeadLetter", params: { id: encodeURIComponent(String(id)) }, signal: options?.signal });
  }

  /**
   * The namespace's audit log, newest first: who (the API key's id) changed what, when. Only the
   * entries about `query.job` when given. For writers and admins.
   */
  listAudit(query: AuditQuery = {}, options?: CallOptions): Promise<AuditList> {
    return this.#send({ op: "listAudit", query: { ...query }, signal: options?.signal });
  }

  /** The namespace's anchors, in name order. */
  async listAnchors(options?: CallOptions): Promise<Anchor[]> {
    const list: AnchorList = await this.#send({ op: "listAnchors", signal: options?.signal });
    return list.anchors;
  }

  getAnchor(name: string, options?: CallOptions): Promise<Anchor> {
    return this.#send({ op: "getAnchor", params: { name: encodeURIComponent(name) }, signal: options?.signal });
  }

  /**
   * Creates an anchor at `at` (RFC 3339), or moves it there with every active or paused job that
   * refers to it (`jobs_moved` in the answer).
   */
  putAnchor(name: string, at: string | Date, options?: CallOptions): Promise<Anchor> {
    const body: AnchorIn = { at: typeof at === "string" ? at : at.toISOString() };
    return this.#send({
      op: "putAnchor",
      params: { name: encodeURIComponent(name) },
      body,
      signal: options?.signal,
    });
  }

  /**
   * Deletes an anchor and cancels its active or paused jobs; with `ifUnused`, refused
   * (`anchor_in_use`) while any refers to it.
   */
  deleteAnchor(name: string, ifUnused = false, options?: CallOptions): Promise<AnchorDeleted> {
    return this.#send({
      op: "deleteAnchor",
      params: { name: encodeURIComponent(name) },
      query: ifUnused ? { if_unused: "true" } : {},
      signal: options?.signal,
    });
  }

  /** The namespace's calendars, in name order. */
  async listCalendars(options?: CallOptions): Promise<Calendar[]> {
    const list: CalendarList = await this.#send({ op: "listCalendars", signal: options?.signal });
    return list.calendars;
  }

  getCalendar(name: string, options?: CallOptions): Promise<Calendar> {
    return this.#send({ op: "getCalendar", params: { name: encodeURIComponent(name) }, signal: options?.signal });
  }

  /**
   * Creates or replaces a calendar; the node re-plans the jobs that name it (`replanned` in the
   * answer).
   */
  putCalendar(name: string, calendar: CalendarIn, options?: CallOptions): Promise<Calendar> {
    return this.#send({
      op: "putCalendar",
      params: { name: encodeURIComponent(name) },
      body: calendar,
      signal: options?.signal,
    });
  }

  /** Deletes a calendar no active or paused job names (else `calendar_in_use`). */
  async deleteCalendar(name: string, options?: CallOptions): Promise<void> {
    await this.#send({ op: "deleteCalendar", params: { name: encodeURIComponent(name) }, signal: options?.signal, raw: true });
  }

  async listOpenBreakers(options?: CallOptions): Promise<Breaker[]> {
    const list: BreakerList = await this.#send({ op: "listOpenBreakers", signal: options?.signal });
    return list.breakers;
  }

  /**
   * The bus and cloud connections this namespace may name in targets (names and kinds), with
   * this node's publish counts.
   */
  async listConnections(options?: CallOptions): Promise<Connection[]> {
    const list: ConnectionList = await this.#send({ op: "listConnections", signal: options?.signal });
    return list.connections;
  }

  /**
   * The cluster's live nodes, by id, each as its latest heartbeat said (version, start, last
   * heartbeat, claims held). Cluster-wide: an admin key when the node has keys.
   */
  async listNodes(options?: CallOptions): Promise<Node[]> {
    const list: NodeList = await this.#send({ op: "listNodes", signal: options?.signal });
    return list.nodes;
  }

  /**
   * This client's API key as the node sees it: the namespace its requests act in, its role, and
   * every route it may call.
   */
  whoami(options?: CallOptions): Promise<Identity> {
    return this.#send({ op: "whoami", signal: options?.signal });
  }

  /**
   * The figures the dashboard charts: this node's delivery counters and gauges, and the whole
   * store's counts. Every namespace's: an admin key when the node has keys.
   */
  getSummary(options?: CallOptions): Promise<Summary> {
    return this.#send({ op: "getSummary", signal: options?.signal });
  }

  // Queues

  /** Every queue of the namespace by name (after `paging.cursor`, when given): the pages the node answers, followed. */
  async listQueues(paging: PageQuery = {}, options?: CallOptions): Promise<Queue[]> {
    const queues: Queue[] = [];
    let cursor: string | null = paging.cursor ?? null;
    do {
      const query: Record<string, string | number> = { limit: paging.limit ?? 1000 };
      if (cursor !== null) query["cursor"] = cursor;
      const page: QueueList = await this.#send({ op: "listQueues", query, signal: options?.signal });
      queues.push(...page.queues);
      cursor = page.next_cursor ?? null;
    } while (cursor !== null);
    return queues;
  }

  /** One queue's counts (zeros for a queue no job targets). */
  getQueue(name: string, options?: CallOptions): Promise<Queue> {
    return this.#send({ op: "getQueue", params: { name: encodeURIComponent(name) }, signal: options?.signal });
  }

  /**
   * One page of the queue's messages, oldest first: waiting or leased, each with when it becomes
   * available or when its lease lapses. Leases nothing.
   */
  listQueueMessages(
    name: string,
    query: QueueMessagesQuery = {},
    options?: CallOptions,
  ): Promise<QueueMessageList> {
    return this.#send({
      op: "listQueueMessages",
      params: { name: encodeURIComponent(name) },
      query: { ...query },
      signal: options?.signal,
    });
  }

  /**
   * Leases up to `max` due messages, long-polling up to `wait_ms` when none is available; an
   * empty array means the wait ran out.
   */
  async lease(queue: string, request: LeaseRequest = {}, options?: CallOptions): Promise<Message[]> {
    const result: LeaseResult = await this.#send({
      op: "leaseMessages",
      params: { name: encodeURIComponent(queue) },
      body: request,
      extraTimeoutMs: request.wait_ms ?? 0,
      signal: options?.signal,
    });
    return result.messages;
  }

  /**
   * Leased messages as they become due, long-polling, until `signal` aborts:
   * `for await (const m of client.messages("emails", { signal })) { ...; await client.ack(...) }`.
   * Each message must be acked or nacked by the caller (or it comes back after its visibility).
   */
  async *messages(
    queue: string,
    request: LeaseRequest & CallOptions = {},
  ): AsyncGenerator<Message, void, undefined> {
    const { signal, ...lease } = request;
    const body: LeaseRequest = { wait_ms: 20_000, ...lease };
    while (!signal?.aborted) {
      let batch: Message[];
      try {
        batch = await this.lease(queue, body, { signal });
      } catch (e) {
        if (signal?.aborted) return;
        throw e;
      }
      yield* batch;
    }
  }

  /** Completes the messages (a recurring job moves on to its next occurrence). */
  ack(queue: string, receipts: string[], options?: CallOptions): Promise<ReceiptResults> {
    return this.#send({ op: "ackMessages", params: { name: encodeURIComponent(queue) }, body: { receipts }, signal: options?.signal });
  }

  /**
   * A failed attempt: the messages come back after `delay_ms` (default: the job's retry
   * backoff), or are dead-lettered after the job's last attempt.
   */
  nack(queue: string, receipts: string[], options: NackOptions & CallOptions = {}): Promise<ReceiptResults> {
    const body: Record<string, unknown> = { receipts };
    if (options.delay_ms !== undefined) body["delay_ms"] = options.delay_ms;
    return this.#send({ op: "nackMessages", params: { name: encodeURIComponent(queue) }, body, signal: options.signal });
  }

  /** Keeps the messages invisible to other consumers for `visibility_ms` from now. */
  extend(queue: string, receipts: string[], options: ExtendOptions & CallOptions): Promise<ReceiptResults> {
    return this.#send({
      op: "extendMessages",
      params: { name: encodeURIComponent(queue) },
      body: { receipts, visibility_ms: options.visibility_ms },
      signal: options.signal,
    });
  }

  // The rest

  /**
   * The namespace's current webhook signing secret, read without rotating it (a namespace without
   * one gets it now): what `verifyWebhook` checks deliveries with.
   */
  signingSecret(options?: CallOptions): Promise<CurrentSigningSecret> {
    return this.#send({ op: "getSigningSecret", signal: options?.signal });
  }

  /**
   * Rotates the namespace's webhook signing secret and returns the new one. The replaced one
   * keeps signing for `overlap` (node default `24h`; `0s` drops it).
   */
  rotateSigningSecret(options: RotateOptions & CallOptions = {}): Promise<SigningSecret> {
    const body = options.overlap === undefined ? {} : { overlap: options.overlap };
    return this.#send({ op: "rotateSigningSecret", body, signal: options.signal });
  }

  /** The next due times of a schedule, and the schedule in words; stores nothing. */
  previewSchedule(schedule: Schedule, options: PreviewOptions & CallOptions = {}): Promise<SchedulePreview> {
    const body: Record<string, unknown> = { schedule };
    if (options.count !== undefined) body["count"] = options.count;
    if (options.job_id !== undefined) body["job_id"] = options.job_id;
    return this.#send({ op: "previewSchedule", body, signal: options.signal });
  }

  /** The node's OpenAPI document. */
  openapi(options?: CallOptions): Promise<Record<string, unknown>> {
    return this.#send({ op: "getOpenApi", signal: options?.signal });
  }

  healthz(options?: CallOptions): Promise<Status> {
    return this.#send({ op: "healthz", signal: options?.signal });
  }

  /** `ready`, or `ApiError` 503 while the node is not ready. */
  readyz(options?: CallOptions): Promise<Status> {
    return this.#send({ op: "readyz", signal: options?.signal });
  }

  /** Prometheus/OpenMetrics text (an admin key when keys are configured). */
  metrics(options?: CallOptions): Promise<string> {
    return this.#send({ op: "metrics", signal: options?.signal, raw: true });
  }

  // Plumbing

  async #send<T>(req: Request): Promise<T> {
    const operation = operations[req.op];
    let path: string = operation.path;
    for (const [name, value] of Object.entries(req.params ?? {})) path = path.replace(`{${name}}`, value);
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(req.query ?? {})) {
      if (value === undefined || value === null) continue;
      // A parameter that repeats (`label`) is an array: one `name=value` each.
      for (const one of Array.isArray(value) ? value : [value]) {
        url.searchParams.append(name, one instanceof Date ? one.toISOString() : String(one));
      }
    }
    const headers: Record<string, string> = { ...this.#headers, ...req.headers };
    let body: string | undefined;
    if (req.body !== undefined) body = JSON.stringify(req.body);
    // The node wants the JSON type on every write, also without a body (pause, trigger).
    if (body !== undefined || ["POST", "PUT", "PATCH"].includes(operation.method)) {
      headers["content-type"] = "application/json";
    }
    const timeout = AbortSignal.timeout(this.#timeoutMs + (req.extraTimeoutMs ?? 0));
    const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, { method: operation.method, headers, body, signal });
      text = await response.text();
    } catch (e) {
      if (req.signal?.aborted) throw req.signal.reason ?? e;
      throw new TransportError(url.toString(), e);
    }
    if (!response.ok) {
      const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
      throw errorFromAnswer(response.status, url.toString(), text, retryAfter);
    }
    if (req.raw) return text as T;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new DecodeError(`unexpected answer from ${url.toString()}: ${String(e)}`, { cause: e });
    }
  }
}
