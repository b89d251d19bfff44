/**
 * The pull-queue worker: leases messages from one queue, runs the handler registered for each
 * message's job type with bounded concurrency, keeps long-running messages leased, and writes
 * the outcomes back in batches.
 *
 * A slot is taken per leased message and comes back only once its outcome is written, so
 * handlers running plus outcomes pending never exceed `concurrency`.
 *
 * Shutdown, when the `signal` given to `run` aborts: leasing stops (a long poll in progress is
 * aborted; what the node handed out in that instant comes back after its visibility timeout);
 * running handlers get `shutdownGraceMs` to finish and are acked or nacked; handlers still
 * running then see their context's `signal` abort and are nacked with delay 0, so another worker
 * takes them at once; then every outcome is written, waiting for the node at most
 * `shutdownGraceMs` again, and `run` resolves.
 */

import type { Client } from "./client.js";
import { HourglassError } from "./errors.js";
import type { Message } from "./types.js";

/** What a handler gets besides the message. */
export interface HandlerContext {
  /** Aborted when the worker stops waiting for this handler at shutdown. */
  signal: AbortSignal;
}

/** Resolving acks the message; throwing (or rejecting) nacks it. */
export type Handler = (message: Message, context: HandlerContext) => Promise<void> | void;

/** Throw from a handler to nack the message with this delay instead of the job's backoff. */
export class RetryLater extends Error {
  override name = "RetryLater";
  constructor(
    readonly delayMs: number,
    reason?: string,
  ) {
    super(reason ?? `retry in ${delayMs} ms`);
  }
}

export interface WorkerLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface WorkerOptions {
  /** Handlers running at once (default 16). */
  concurrency?: number;
  /** How long a lease keeps a message from other consumers (default 30000); extended at half. */
  visibilityMs?: number;
  /** How long one lease long-polls an empty queue (default 20000, the node's maximum). */
  pollWaitMs?: number;
  /** How long running handlers get after shutdown, and then the node for the outcomes (default 30000). */
  shutdownGraceMs?: number;
  /** Outcomes are written once this many wait (default 100)... */
  ackBatch?: number;
  /** ...or this long after the first of them (default 5). */
  ackLingerMs?: number;
  /** Where the worker reports (default: warnings and errors to the console). */
  logger?: WorkerLogger;
}

const MAX_LEASE = 1000;
const MAX_TYPES = 32;

interface Finished {
  receipt: string;
  ack: boolean;
  delayMs: number | undefined;
  slot: boolean;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Whether `promise` settled within `ms` (the timer is cleared either way). */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timer = new AbortController();
  const settled = await Promise.race([promise.then(() => true), sleep(ms, timer.signal).then(() => false)]);
  timer.abort();
  return settled;
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

class Backoff {
  #failures = 0;
  constructor(
    readonly initialMs: number,
    readonly capMs: number,
  ) {}
  reset(): void {
    this.#failures = 0;
  }
  next(retryAfterMs: number | undefined): number {
    const exponent = Math.min(this.#failures, 20);
    this.#failures += 1;
    if (retryAfterMs !== undefined) return Math.min(retryAfterMs, this.capMs);
    const ceiling = Math.min(this.initialMs * 2 ** exponent, this.capMs);
    return ceiling / 2 + (Math.random() * ceiling) / 2;
  }
}

function retryAfterOf(e: unknown): number | undefined {
  return (e as { retryAfterMs?: number }).retryAfterMs;
}

/**
 * Processes one pull queue.
 *
 * ```ts
 * const worker = new Worker(client, "emails", { concurrency: 8 });
 * worker.handle("email.send", async (job) => { await send(job.payload); });
 * const stop = new AbortController();
 * process.once("SIGTERM", () => stop.abort());
 * await worker.run({ signal: stop.signal }); // resolves once drained
 * ```
 *
 * Without a `fallback` the worker leases only the types it has handlers for.
 */
export class Worker {
  readonly client: Client;
  readonly queue: string;
  readonly concurrency: number;
  readonly visibilityMs: number;
  readonly pollWaitMs: number;
  readonly shutdownGraceMs: number;
  readonly ackBatch: number;
  readonly ackLingerMs: number;
  readonly logger: WorkerLogger;
  readonly #handlers = new Map<string, Handler>();
  #fallback: Handler | undefined;

  constructor(client: Client, queue: string, options: WorkerOptions = {}) {
    this.client = client;
    this.queue = queue;
    this.concurrency = Math.max(1, options.concurrency ?? 16);
    this.visibilityMs = options.visibilityMs ?? 30_000;
    this.pollWaitMs = options.pollWaitMs ?? 20_000;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 30_000;
    this.ackBatch = Math.min(Math.max(1, options.ackBatch ?? 100), MAX_LEASE);
    this.ackLingerMs = options.ackLingerMs ?? 5;
    this.logger = options.logger ?? { info: () => {}, warn: (m) => console.warn(m), error: (m) => console.error(m) };
  }

  /** Runs `handler` for messages of job type `type`. */
  handle(type: string, handler: Handler): this {
    this.#handlers.set(type, handler);
    return this;
  }

  /** Runs `handler` for every other type, untyped jobs included (the worker then leases any type). */
  fallback(handler: Handler): this {
    this.#fallback = handler;
    return this;
  }

  /**
   * Processes messages until `signal` aborts, then drains and resolves. Rejects after draining
   * when the node refuses the lease in a way retrying cannot fix (a bad API key, invalid
   * options); an unavailable node is retried with backoff, honouring `Retry-After`.
   */
  async run(options: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.#handlers.size === 0 && this.#fallback === undefined) {
      throw new TypeError("a worker needs at least one handler or a fallback");
    }
    if (this.#fallback === undefined && this.#handlers.size > MAX_TYPES) {
      throw new TypeError(`a lease names at most ${MAX_TYPES} types; add a fallback`);
    }
    const types = this.#fallback === undefined ? [...this.#handlers.keys()].sort() : undefined;
    const run = new Run(this, this.#handlers, this.#fallback, types, options.signal ?? new AbortController().signal);
    await run.main();
  }
}

/** One `Worker.run`'s state. */
class Run {
  readonly #hardStop = new AbortController();
  readonly #giveUp = new AbortController();
  readonly #tasks = new Set<Promise<void>>();
  #free: number;
  #slotWaiters: Array<() => void> = [];
  readonly #outcomes: Array<Finished | null> = [];
  #outcomeWaiter: (() => void) | undefined;

  constructor(
    readonly w: Worker,
    readonly handlers: Map<string, Handler>,
    readonly fallbackHandler: Handler | undefined,
    readonly types: string[] | undefined,
    readonly stop: AbortSignal,
  ) {
    this.#free = w.concurrency;
  }

  async main(): Promise<void> {
    const completer = this.#complete();
    let failure: unknown;
    try {
      await this.#leaseLoop();
    } catch (e) {
      this.w.logger.error(`lease refused; stopping the worker: ${String(e)}`);
      failure = e;
    }
    this.w.logger.info(`worker stopping; draining ${this.#tasks.size} running handler(s)`);
    if (this.#tasks.size > 0) {
      const all = Promise.all([...this.#tasks]);
      if (!(await within(all, this.w.shutdownGraceMs))) {
        this.w.logger.warn(`grace period over; nacking ${this.#tasks.size} unfinished handler(s)`);
        this.#hardStop.abort();
        await all;
      }
    }
    this.#push(null);
    if (!(await within(completer, this.w.shutdownGraceMs))) {
      this.#giveUp.abort();
      await completer;
    }
    this.w.logger.info("worker stopped");
    if (failure !== undefined) throw failure;
  }

  // Slots

  async #takeSome(most: number): Promise<number> {
    while (this.#free === 0) {
      await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
    }
    const n = Math.min(this.#free, most);
    this.#free -= n;
    return n;
  }

  #give(n: number): void {
    if (n <= 0) return;
    this.#free += n;
    const waiters = this.#slotWaiters;
    this.#slotWaiters = [];
    for (const wake of waiters) wake();
  }

  // Leasing

  async #leaseLoop(): Promise<void> {
    const { w } = this;
    const backoff = new Backoff(200, 30_000);
    const stopped = aborted(this.stop);
    while (!this.stop.aborted) {
      const taking = this.#takeSome(MAX_LEASE);
      const first = await Promise.race([taking, stopped.then(() => null)]);
      if (first === null) {
        void taking.then((n) => this.#give(n));
        return;
      }
      const slots = first;
      const leasedAt = performance.now();
      let messages: Message[];
      try {
        messages = await w.client.lease(
          w.queue,
          { max: slots, wait_ms: w.pollWaitMs, visibility_ms: w.visibilityMs, ...(this.types ? { types: this.types } : {}) },
          { signal: this.stop },
        );
      } catch (e) {
        this.#give(slots);
        if (this.stop.aborted) return;
        if (!(e instanceof HourglassError) || !e.retryable) throw e;
        const wait = backoff.next(retryAfterOf(e));
        w.logger.warn(`lease failed; retrying in ${Math.round(wait)} ms: ${e.message}`);
        await sleep(wait, this.stop);
        continue;
      }
      backoff.reset();
      messages.forEach((message, i) => {
        if (i >= slots) {
          w.logger.warn("the node returned more messages than asked for; handing the extra back");
          this.#push({ receipt: message.receipt, ack: false, delayMs: 0, slot: false });
          return;
        }
        const task = this.#process(message, leasedAt);
        this.#tasks.add(task);
        void task.finally(() => this.#tasks.delete(task));
      });
      this.#give(slots - Math.min(slots, messages.length));
      // A node answering an empty poll at once would make this loop spin.
      const elapsed = performance.now() - leasedAt;
      if (messages.length === 0 && elapsed < w.pollWaitMs / 2) {
        await sleep(Math.max(w.pollWaitMs / 2, 100) - elapsed, this.stop);
      }
    }
  }

  // Handling

  async #process(message: Message, leasedAt: number): Promise<void> {
    const { w } = this;
    const handler = (message.type !== null ? this.handlers.get(message.type) : undefined) ?? this.fallbackHandler;
    let ack = false;
    let delayMs: number | undefined;
    if (handler === undefined) {
      w.logger.warn(`no handler for type ${JSON.stringify(message.type)}; nacking ${message.delivery_id}`);
    } else {
      const keeper = new AbortController();
      void this.#keepLeased(message.receipt, leasedAt, keeper.signal);
      const running = (async () => handler(message, { signal: this.#hardStop.signal }))().then(
        () => ({ ok: true as const }),
        (error: unknown) => ({ ok: false as const, error }),
      );
      const outcome = await Promise.race([running, aborted(this.#hardStop.signal).then(() => null)]);
      keeper.abort();
      if (outcome === null) {
        delayMs = 0;
        w.logger.warn(`handler for ${message.delivery_id} still running at the shutdown deadline; nacked`);
      } else if (outcome.ok) {
        ack = true;
      } else if (outcome.error instanceof RetryLater) {
        delayMs = Math.max(0, Math.round(outcome.error.delayMs));
      } else {
        w.logger.warn(`handler failed for ${message.delivery_id} (attempt ${message.attempt}): ${String(outcome.error)}`);
      }
    }
    this.#push({ receipt: message.receipt, ack, delayMs, slot: true });
  }

  /** Extends the lease by the visibility whenever half of it has passed, until `done` aborts. */
  async #keepLeased(receipt: string, leasedAt: number, done: AbortSignal): Promise<void> {
    const { w } = this;
    let leaseEnds = leasedAt + w.visibilityMs;
    while (!done.aborted) {
      await sleep(Math.max((leaseEnds - performance.now()) / 2, 100), done);
      if (done.aborted) return;
      const askedAt = performance.now();
      try {
        const results = await w.client.extend(w.queue, [receipt], { visibility_ms: w.visibilityMs });
        if (results.failed.length > 0) {
          w.logger.warn(`lease lost while the handler runs (${results.failed[0]!.code})`);
          return;
        }
        leaseEnds = askedAt + w.visibilityMs;
      } catch (e) {
        if (e instanceof HourglassError && e.retryable) {
          w.logger.warn(`cannot extend the lease yet: ${e.message}`);
          continue;
        }
        w.logger.warn(`extending the lease refused; giving up on it: ${String(e)}`);
        return;
      }
    }
  }

  // Completing

  #push(item: Finished | null): void {
    this.#outcomes.push(item);
    const wake = this.#outcomeWaiter;
    this.#outcomeWaiter = undefined;
    wake?.();
  }

  async #next(timeoutMs?: number): Promise<Finished | null | "timeout"> {
    if (this.#outcomes.length === 0) {
      const arrived = new Promise<void>((resolve) => (this.#outcomeWaiter = resolve));
      if (timeoutMs === undefined) await arrived;
      else await within(arrived, timeoutMs);
      if (this.#outcomes.length === 0) return "timeout";
    }
    return this.#outcomes.shift()!;
  }

  async #complete(): Promise<void> {
    const { w } = this;
    for (;;) {
      const first = await this.#next();
      if (first === null || first === "timeout") return;
      const batch = [first];
      const deadline = performance.now() + w.ackLingerMs;
      let done = false;
      while (batch.length < w.ackBatch) {
        const item = await this.#next(Math.max(0, deadline - performance.now()));
        if (item === "timeout") break;
        if (item === null) {
          done = true;
          break;
        }
        batch.push(item);
      }
      await this.#flush(batch);
      if (done) return;
    }
  }

  async #flush(batch: Finished[]): Promise<void> {
    const acks = batch.filter((f) => f.ack).map((f) => f.receipt);
    const nacks = new Map<number | undefined, string[]>();
    for (const f of batch) {
      if (f.ack) continue;
      const list = nacks.get(f.delayMs) ?? [];
      list.push(f.receipt);
      nacks.set(f.delayMs, list);
    }
    if (acks.length > 0) await this.#write("ack", acks, undefined);
    for (const [delay, receipts] of nacks) await this.#write("nack", receipts, delay);
    this.#give(batch.filter((f) => f.slot).length);
  }

  async #write(verb: "ack" | "nack", receipts: string[], delayMs: number | undefined): Promise<void> {
    const { w } = this;
    const backoff = new Backoff(100, 10_000);
    while (!this.#giveUp.signal.aborted) {
      try {
        const results =
          verb === "ack"
            ? await w.client.ack(w.queue, receipts)
            : await w.client.nack(w.queue, receipts, delayMs === undefined ? {} : { delay_ms: delayMs });
        for (const failure of results.failed) w.logger.warn(`${verb} of ${failure.receipt} refused: ${failure.code}`);
        return;
      } catch (e) {
        if (!(e instanceof HourglassError) || !e.retryable) {
          w.logger.error(`${verb} refused; the messages come back after their visibility: ${String(e)}`);
          return;
        }
        const wait = backoff.next(retryAfterOf(e));
        w.logger.warn(`node unavailable; retrying ${verb} in ${Math.round(wait)} ms: ${e.message}`);
        await sleep(wait, this.#giveUp.signal);
      }
    }
    w.logger.warn(`shut down before the node took ${receipts.length} ${verb}(s); they will be redelivered`);
  }
}
