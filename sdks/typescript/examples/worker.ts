/**
 * A pull-queue worker: handlers per job type, and a `task` type that switches on its payload's
 * `action`. Stops on SIGTERM or Ctrl-C after the running handlers finish.
 *
 *     HOURGLASS_URL=http://127.0.0.1:7070 HOURGLASS_QUEUE=tasks node build/examples/worker.js
 *
 * Environment: HOURGLASS_URL, HOURGLASS_QUEUE (default `tasks`), HOURGLASS_API_KEY,
 * HOURGLASS_NAMESPACE, WORKER_CONCURRENCY (default 8).
 */

import { setTimeout as sleep } from "node:timers/promises";

import { Client, type Message, RetryLater, Worker } from "@hourglass/client";

type Action = (job: Message, signal: AbortSignal) => Promise<void>;

const actions: Record<string, Action> = {
  "report.generate": async (job, signal) => {
    const { seconds = 0.1 } = job.payload as { seconds?: number };
    await sleep(seconds * 1000, undefined, { signal });
  },
  "invoice.send": async (job) => {
    if ((job.payload as { provider_down?: boolean }).provider_down) {
      // Nack with a delay of our own choosing instead of the job's retry backoff.
      throw new RetryLater(60_000, "the payment provider is down");
    }
  },
};

const env = process.env;
const client = new Client(env["HOURGLASS_URL"] ?? "http://127.0.0.1:7070", {
  ...(env["HOURGLASS_API_KEY"] ? { apiKey: env["HOURGLASS_API_KEY"] } : {}),
  ...(env["HOURGLASS_NAMESPACE"] ? { namespace: env["HOURGLASS_NAMESPACE"] } : {}),
});
const worker = new Worker(client, env["HOURGLASS_QUEUE"] ?? "tasks", {
  concurrency: Number(env["WORKER_CONCURRENCY"] ?? 8),
});

worker.handle("task", async (job, { signal }) => {
  const { action } = job.payload as { action: string };
  const run = actions[action];
  if (run === undefined) throw new Error(`unknown action ${action}`); // nacked: retried, then dead-lettered
  console.log(`start ${action} ${job.job_id} attempt ${job.attempt}`);
  await run(job, signal);
  console.log(`done ${action} ${job.job_id}`);
});

worker.handle("email.send", (job) => {
  console.log(`email to ${(job.payload as { to: string }).to} (${job.delivery_id})`);
});

const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    console.log(`${signal}: draining`);
    stop.abort();
  });
}
await worker.run({ signal: stop.signal });
console.log("stopped");
