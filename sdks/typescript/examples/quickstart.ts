/**
 * Quickstart: a one-off job and a cron job, a list, a cancel.
 *
 *     HOURGLASS_URL=http://127.0.0.1:7070 node build/examples/quickstart.js
 *
 * Environment: HOURGLASS_URL, HOURGLASS_API_KEY, HOURGLASS_NAMESPACE.
 */

import { ApiError, Client } from "@hourglass/client";

const env = process.env;
const client = new Client(env["HOURGLASS_URL"] ?? "http://127.0.0.1:7070", {
  ...(env["HOURGLASS_API_KEY"] ? { apiKey: env["HOURGLASS_API_KEY"] } : {}),
  ...(env["HOURGLASS_NAMESPACE"] ? { namespace: env["HOURGLASS_NAMESPACE"] } : {}),
});

// Once, in 90 seconds, to a webhook.
const reminder = await client.createJob({
  type: "reminder.flight",
  schedule: { after: "90s" },
  target: { webhook: { url: "https://example.com/hooks/reminder" } },
  payload: { passenger: "p-123", flight: "LH 400" },
});
console.log(`one-off ${reminder.id} due ${reminder.next_due_at}`);

// Weekdays at 09:30 Berlin time, onto a pull queue; the key makes a re-run of this script safe.
const digest = await client.createJob({
  key: "digest-acme",
  type: "digest.send",
  schedule: { cron: "0 30 9 * * MON-FRI", timezone: "Europe/Berlin" },
  target: { queue: "digests" },
  retry: { max_attempts: 5, initial_backoff: "30s" },
});
console.log(`cron ${digest.id} next ${digest.next_due_at}`);

for await (const job of client.jobs({ state: "active" })) {
  console.log(`${job.id}  ${job.type ?? "-"}  next ${job.next_due_at}`);
}

const cancelled = await client.cancelJob(reminder.id);
console.log(`cancelled ${cancelled.id}: ${cancelled.state}`);

try {
  await client.createJob({ schedule: { cron: "0 0 * * *", timezone: "Mars/Olympus" }, target: { queue: "q" } });
} catch (e) {
  if (!(e instanceof ApiError)) throw e;
  console.log(`refused as expected: ${e.code} at ${e.field}`);
}
