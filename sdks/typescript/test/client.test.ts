/** The client against a real node. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { ApiError, Client, jobRef, type NewJob, parseRetryAfter, TransportError } from "@hourglass/client";

import { clientFor, type Node, namespace, REPO_DIR, SDK_DIR, startNode } from "./helpers.js";

let node: Node;
before(async () => {
  node = await startNode();
});
after(async () => {
  await node.stop();
});

async function rejectsWith(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ApiError, `expected an ApiError, got ${String(e)}`);
    return e;
  }
  assert.fail("expected the call to be refused");
}

describe("jobs", () => {
  it("selects jobs by label and changes them in bulk", async () => {
    const client = clientFor(node);
    const job = (tenant: string): NewJob => ({
      schedule: { every: "1h" },
      target: { queue: "labelled" },
      labels: { tenant, kind: "x" },
    });
    const acme = await client.createJob(job("acme"));
    const globex = await client.createJob(job("globex"));
    assert.deepEqual(acme.labels, { tenant: "acme", kind: "x" });
    assert.deepEqual((await client.listJobs({ label: "tenant=acme" })).jobs.map((j) => j.id), [acme.id]);
    assert.deepEqual((await client.listJobs({ label: ["kind", "tenant=globex"] })).jobs.map((j) => j.id), [globex.id]);
    assert.deepEqual(await client.bulkJobs("pause", ["kind=x", "tenant=acme"]), { changed: 1, more: false });
    assert.equal((await client.getJob(acme.id)).state, "paused");
    assert.equal((await client.getJob(globex.id)).state, "active");
    const refused = await rejectsWith(client.bulkJobs("cancel", []));
    assert.equal(refused.code, "selector_required");
  });

  it("creates, gets, lists, patches and cancels", async () => {
    const client = clientFor(node);
    const due = new Date(Date.now() + 3_600_000);
    const oneOff = await client.createJob({
      schedule: { at: due },
      target: { webhook: { url: "https://example.com/hook", headers: { "X-Token": "s3cret" } } },
      payload: { article: 42 },
      type: "article.publish",
      retry: { max_attempts: 3, initial_backoff: "2s", max_backoff: "1m" },
    });
    assert.equal(oneOff.state, "active");
    assert.equal(oneOff.type, "article.publish");
    assert.deepEqual(oneOff.payload, { article: 42 });
    assert.equal(oneOff.next_due_at, due.toISOString());
    assert.deepEqual(oneOff.retry, { max_attempts: 3, initial_backoff: "2s", max_backoff: "1m" });
    assert.deepEqual(oneOff.target, { webhook: { url: "https://example.com/hook", headers: { "x-token": "<redacted>" } } });
    assert.equal(oneOff.misfire, "once");

    const nightly = await client.createJob({
      key: "digest acme/eu",
      schedule: { cron: "0 30 9 * * MON-FRI", timezone: "Europe/Berlin" },
      target: { queue: "digests" },
      misfire: { policy: "all", window: "2h" },
    });
    assert.deepEqual(nightly.schedule, { cron: "0 30 9 * * MON-FRI", timezone: "Europe/Berlin" });
    assert.deepEqual(nightly.misfire, { policy: "all", window: "2h" });
    assert.equal(nightly.payload, null);

    assert.deepEqual(await client.getJob(oneOff.id), oneOff);
    assert.equal((await client.getJob("digest acme/eu")).id, nightly.id);
    assert.equal((await client.getJob("key:digest acme/eu")).id, nightly.id);
    assert.equal(jobRef("digest acme/eu"), "key:digest%20acme%2Feu");

    const listed = await client.listJobs();
    assert.deepEqual(new Set(listed.jobs.map((j) => j.id)), new Set([oneOff.id, nightly.id]));
    assert.equal(listed.next_cursor, null);
    assert.deepEqual((await client.listJobs({ type: "article.publish" })).jobs.map((j) => j.id), [oneOff.id]);
    const page = await client.listJobs({ limit: 1 });
    assert.equal(page.jobs.length, 1);
    assert.notEqual(page.next_cursor, null);
    const all: string[] = [];
    for await (const job of client.jobs({ limit: 1 })) all.push(job.id);
    assert.deepEqual(new Set(all), new Set([oneOff.id, nightly.id]));
    assert.equal(all.length, 2);

    const patched = await client.updateJob(oneOff.id, { payload: { article: 43 }, schedule: { after: "2h" } });
    assert.deepEqual(patched.payload, { article: 43 });
    assert.equal(patched.type, "article.publish");
    assert.ok(Date.parse(patched.next_due_at!) > due.getTime());
    assert.equal((await client.updateJob(oneOff.id, { payload: null })).payload, null);

    assert.equal((await client.pauseJob("digest acme/eu")).state, "paused");
    assert.equal((await client.resumeJob("digest acme/eu")).state, "active");

    assert.equal((await client.cancelJob(oneOff.id)).state, "cancelled");
    assert.equal((await client.getJob(oneOff.id)).state, "cancelled");
    assert.deepEqual((await client.listJobs({ state: "cancelled" })).jobs.map((j) => j.id), [oneOff.id]);
    const refused = await rejectsWith(client.pauseJob(oneOff.id));
    assert.equal(refused.status, 409);
    assert.equal(refused.code, "invalid_state");
  });

  it("creates idempotently with a key", async () => {
    const client = clientFor(node);
    const job: NewJob = { key: "poll-1", schedule: { every: "15m", max_runs: 3 }, target: { queue: "polls" }, payload: [1] };
    const first = await client.createJob(job);
    const again = await client.createJob(job);
    assert.equal(again.id, first.id);
    assert.equal((await client.listJobs()).jobs.length, 1);

    const conflict = await rejectsWith(client.createJob({ ...job, payload: [2] }));
    assert.equal(conflict.status, 409);
    assert.equal(conflict.code, "key_conflict");
    assert.equal(conflict.field, "key");
    assert.equal(conflict.retryable, false);

    const batch = await client.createJobs([job, { key: "poll-2", schedule: { after: "1h" }, target: { queue: "polls" } }]);
    assert.equal(batch.created, 1);
    assert.deepEqual(
      batch.jobs.map((j) => [j.id === first.id, j.created]),
      [
        [true, false],
        [false, true],
      ],
    );

    const brief = await client.createJobs([job, { key: "poll-3", schedule: { after: "1h" }, target: { queue: "polls" } }], {
      prefer: "return=minimal",
    });
    assert.equal(brief.created, 1);
    assert.deepEqual(
      brief.jobs.map((j) => [j.id === first.id, j.key, j.state, j.created, Object.keys(j).length]),
      [
        [true, "poll-1", "active", false, 5],
        [false, "poll-3", "active", true, 5],
      ],
    );
  });

  it("keeps the node's code, message, field and status in errors", async () => {
    const client = clientFor(node);
    const zone = await rejectsWith(client.createJob({ schedule: { cron: "0 0 * * *", timezone: "Mars/Olympus" }, target: { queue: "q" } }));
    assert.equal(zone.status, 422);
    assert.equal(zone.code, "unknown_timezone");
    assert.equal(zone.field, "schedule.timezone");
    assert.match(zone.detail, /Mars\/Olympus/);
    assert.match(zone.message, /^http 422 unknown_timezone: .* \(at schedule\.timezone\)$/);

    const missing = await rejectsWith(client.getJob("no-such-key"));
    assert.equal(missing.status, 404);
    assert.equal(missing.code, "not_found");
    assert.ok(missing.notFound);

    const limit = await rejectsWith(client.listJobs({ limit: 5000 }));
    assert.deepEqual([limit.status, limit.code, limit.field], [400, "invalid_query", "limit"]);

    assert.equal(parseRetryAfter("1"), 1000);
    assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", Date.parse("2026-01-01T00:00:00Z")), 30_000);
    assert.equal(parseRetryAfter("soon"), undefined);
    assert.equal(parseRetryAfter(null), undefined);

    const dead = new Client("http://127.0.0.1:9", { timeoutMs: 2000 });
    await assert.rejects(dead.healthz(), (e: unknown) => e instanceof TransportError && e.retryable);
  });
});

describe("queues", () => {
  it("triggers, leases, extends, nacks and acks", async () => {
    const client = clientFor(node);
    const job = await client.createJob({ schedule: { after: "1h" }, target: { queue: "reports" }, type: "report", payload: { n: 1 } });
    const triggered = await client.triggerJob(job.id, { idempotencyKey: "try-1" });
    assert.ok(triggered.delivery_id.startsWith(`${job.id.replaceAll("-", "")}_`));
    assert.equal((await client.triggerJob(job.id, { idempotencyKey: "try-1" })).delivery_id, triggered.delivery_id);

    const queue = await client.getQueue("reports");
    assert.deepEqual([queue.name, queue.available], ["reports", 1]);
    assert.deepEqual((await client.listQueues()).map((q) => q.name), ["reports"]);
    const [message, ...rest] = await client.lease("reports", { max: 5, visibility_ms: 5000 });
    assert.equal(rest.length, 0);
    assert.ok(message);
    assert.deepEqual([message.job_id, message.type, message.payload, message.attempt], [job.id, "report", { n: 1 }, 1]);
    assert.equal(message.delivery_id, triggered.delivery_id);
    const extended = await client.extend("reports", [message.receipt], { visibility_ms: 10_000 });
    assert.deepEqual(extended.succeeded, [message.receipt]);
    assert.ok(extended.visible_until);
    assert.deepEqual((await client.nack("reports", [message.receipt], { delay_ms: 0 })).succeeded, [message.receipt]);
    const [again] = await client.lease("reports", { wait_ms: 5000 });
    assert.ok(again);
    assert.deepEqual([again.delivery_id, again.attempt], [triggered.delivery_id, 2]);
    const stale = await client.ack("reports", [message.receipt]);
    assert.deepEqual(stale.succeeded, []);
    assert.deepEqual(stale.failed.map((f) => [f.receipt, f.code]), [[message.receipt, "stale_receipt"]]);
    assert.deepEqual((await client.ack("reports", [again.receipt])).succeeded, [again.receipt]);
    assert.deepEqual(await client.lease("reports"), []);

    const runs = await client.listJobRuns(job.id);
    assert.ok(runs.runs.length > 0);
    assert.ok(runs.runs.every((r) => r.delivery_id === triggered.delivery_id));
    assert.equal(runs.runs[0]!.outcome, "delivered");
  });

  it("hands each occurrence of an allow job to a message of its own", async () => {
    const client = clientFor(node);
    const job = await client.createJob({ schedule: { every: "1h" }, target: { queue: "allowed" }, overlap: "allow" });
    assert.equal(job.overlap, "allow");
    const firstTrigger = await client.triggerJob(job.id);
    const [first] = await client.lease("allowed", { wait_ms: 5000, visibility_ms: 60_000 });
    assert.ok(first);
    assert.deepEqual([first.job_id, first.delivery_id], [job.id, firstTrigger.delivery_id]);
    // The first is leased and not acknowledged: the next occurrence still goes out.
    const secondTrigger = await client.triggerJob(job.id);
    const [second] = await client.lease("allowed", { wait_ms: 5000, visibility_ms: 60_000 });
    assert.ok(second);
    assert.equal(second.delivery_id, secondTrigger.delivery_id);
    assert.notEqual(second.delivery_id, first.delivery_id);
    const handedOff = (await client.listJobs({ label: `hourglass/occurrence-of=${job.id}` })).jobs;
    assert.equal(handedOff.length, 2);
    const marks = await Promise.all(handedOff.map(async (j) => (await client.getJob(j.id)).occurrence_of?.delivery_id));
    assert.deepEqual(marks.sort(), [first.delivery_id, second.delivery_id].sort());
    await client.ack("allowed", [first.receipt, second.receipt]);
    const runs = await client.listJobRuns(job.id);
    const delivered = runs.runs.filter((r) => r.outcome === "delivered").map((r) => r.delivery_id);
    assert.deepEqual(delivered.sort(), [first.delivery_id, second.delivery_id].sort());
  });

  it("lists a queue's messages, waiting and leased, and a job's last error", async () => {
    const client = clientFor(node);
    const first = await client.createJob({ schedule: { after: "1h" }, target: { queue: "outbox" }, key: "m1" });
    const second = await client.createJob({ schedule: { after: "1h" }, target: { queue: "outbox" }, key: "m2" });
    assert.equal(first.last_error, null);
    await client.triggerJob(first.id);
    const [held] = await client.lease("outbox", { wait_ms: 5000, visibility_ms: 60_000 });
    assert.ok(held);
    assert.equal(held.job_id, first.id);

    const page = await client.listQueueMessages("outbox");
    assert.equal(page.next_cursor, null);
    const ids = page.messages.map((m) => m.job_id);
    assert.deepEqual(ids, [...ids].sort());
    const leased = page.messages.find((m) => m.job_id === first.id);
    const waiting = page.messages.find((m) => m.job_id === second.id);
    assert.ok(leased && waiting);
    assert.deepEqual(
      [leased.status, leased.leased_until, leased.available_at, leased.key, leased.delivery_id],
      ["leased", held.visible_until, null, "m1", held.delivery_id],
    );
    assert.deepEqual([waiting.status, waiting.available_at, waiting.leased_until], ["scheduled", waiting.due_at, null]);
    assert.equal("receipt" in leased, false, "only the lease holder has the receipt");

    await client.nack("outbox", [held.receipt], { delay_ms: 600_000 });
    const one = await client.listQueueMessages("outbox", { limit: 1 });
    assert.ok(one.next_cursor);
    const rest = await client.listQueueMessages("outbox", { limit: 1, cursor: one.next_cursor });
    const nacked = [...one.messages, ...rest.messages].find((m) => m.job_id === first.id);
    assert.ok(nacked);
    assert.deepEqual([nacked.status, nacked.failed_attempts, nacked.last_error], ["scheduled", 1, "nacked by the worker"]);
    assert.equal((await client.getJob(first.id)).last_error, "nacked by the worker");
    const bad = await rejectsWith(client.listQueueMessages("outbox", { cursor: "nope" }));
    assert.deepEqual([bad.status, bad.code, bad.field], [400, "invalid_query", "cursor"]);
  });

  it("yields messages from an async iterator until aborted", async () => {
    const client = clientFor(node);
    const ids = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await client.createJob({ schedule: { after: "10ms" }, target: { queue: "stream" }, payload: i })).id);
    }
    const stop = new AbortController();
    const seen: unknown[] = [];
    for await (const message of client.messages("stream", { signal: stop.signal, wait_ms: 1000 })) {
      seen.push(message.payload);
      await client.ack("stream", [message.receipt]);
      if (seen.length === 3) stop.abort();
    }
    assert.deepEqual(seen.sort(), [0, 1, 2]);
    for (const id of ids) assert.equal((await client.getJob(id)).state, "completed");
  });

  it("dead-letters, replays and deletes", async () => {
    const client = clientFor(node);
    const job = await client.createJob({ schedule: { after: "1h" }, target: { queue: "flaky" }, retry: { max_attempts: 1 } });
    await client.triggerJob(job.id);
    const [message] = await client.lease("flaky", { wait_ms: 5000 });
    assert.ok(message);
    await client.nack("flaky", [message.receipt]);
    const [dead, ...more] = (await client.listDeadLetters()).dead_letters;
    assert.equal(more.length, 0);
    assert.ok(dead);
    assert.deepEqual([dead.job_id, dead.delivery_id, dead.attempts, dead.target.queue], [job.id, message.delivery_id, 1, "flaky"]);
    assert.deepEqual(await client.getDeadLetter(dead.id), dead);
    assert.equal((await client.getJob(job.id)).state, "failed");
    const replayed = await client.replayDeadLetter(dead.id);
    assert.notEqual(replayed.id, job.id);
    assert.deepEqual((await client.listDeadLetters()).dead_letters, []);

    await client.triggerJob(replayed.id);
    const [second] = await client.lease("flaky", { wait_ms: 5000 });
    assert.ok(second);
    await client.nack("flaky", [second.receipt]);
    const [dead2] = (await client.listDeadLetters()).dead_letters;
    assert.ok(dead2);
    await client.deleteDeadLetter(dead2.id);
    assert.equal((await rejectsWith(client.getDeadLetter(dead2.id))).status, 404);
  });
});

describe("the rest", () => {
  it("previews, reports health, breakers, metrics, and rotates the secret", async () => {
    const client = clientFor(node);
    const preview = await client.previewSchedule({ every: "15m", max_runs: 3 }, { count: 5 });
    assert.equal(preview.fire_times.length, 3);
    assert.equal(Date.parse(preview.fire_times[1]!) - Date.parse(preview.fire_times[0]!), 15 * 60_000);
    assert.match(preview.description, /15m/);
    assert.equal(preview.nominal_times, undefined);
    const jittered = await client.previewSchedule(
      { every: "15m", max_runs: 3, jitter: "5m" },
      { count: 5, job_id: "0190f3c2-7b1e-7a3b-9c4d-5e6f708192a3" },
    );
    assert.equal(jittered.nominal_times?.length, 3);
    jittered.fire_times.forEach((fire, i) => {
      const offset = Date.parse(fire) - Date.parse(jittered.nominal_times![i]!);
      assert.ok(offset >= 0 && offset < 5 * 60_000, `${fire} vs its due time`);
    });
    assert.deepEqual(await client.healthz(), { status: "ok" });
    assert.deepEqual(await client.readyz(), { status: "ready" });
    assert.deepEqual(await client.listOpenBreakers(), []);
    assert.match(await client.metrics(), /hourglass_build_info/);
    const secret = await client.rotateSigningSecret({ overlap: "0s" });
    assert.match(secret.signing_secret, /^whsec_/);
    assert.equal(secret.previous_valid_until, null);
    // Read back without rotating: the same secret, at every read.
    const current = await client.signingSecret();
    assert.equal(current.signing_secret, secret.signing_secret);
    assert.equal(current.previous_valid_until, null);
    assert.equal((await client.signingSecret()).signing_secret, secret.signing_secret);
  });

  it("lists the node serving as a live node", async () => {
    const client = clientFor(node);
    // The node's first heartbeat is written as its engine starts: wait until it shows.
    const deadline = Date.now() + 30_000;
    let nodes = await client.listNodes();
    while (nodes.length === 0) {
      assert.ok(Date.now() < deadline, "the node never listed itself");
      await new Promise((r) => setTimeout(r, 50));
      nodes = await client.listNodes();
    }
    assert.equal(nodes.length, 1);
    assert.ok(nodes[0]!.id.length > 0);
    assert.ok(nodes[0]!.claims_held >= 0);
    assert.ok(Date.parse(nodes[0]!.started_at) <= Date.parse(nodes[0]!.last_heartbeat));
  });

  it("puts, gets, lists and deletes calendars, and rolls a job's occurrence", async () => {
    const client = clientFor(node, namespace());
    const put = await client.putCalendar("business", {
      timezone: "Europe/Berlin",
      exclude: { weekdays: ["SAT", "SUN"] },
    });
    assert.equal(put.name, "business");
    assert.equal(put.replanned, 0);
    assert.deepEqual((await client.getCalendar("business")).exclude.weekdays, ["SAT", "SUN"]);
    assert.deepEqual(
      (await client.listCalendars()).map((c) => c.name),
      ["business"],
    );
    // The 5th at 09:00 Berlin: 5 January 2030 is a Saturday, rolled to Friday the 4th.
    const job = await client.createJob({
      schedule: {
        cron: "0 0 9 5 * *",
        timezone: "Europe/Berlin",
        start: "2030-01-01T00:00:00Z",
        calendar: "business",
        roll: "previous",
      },
      target: { queue: "payroll" },
    });
    assert.equal(job.next_due_at, "2030-01-05T08:00:00.000Z");
    assert.equal(job.next_fire_at, "2030-01-04T08:00:00.000Z");
    const inUse = await rejectsWith(client.deleteCalendar("business"));
    assert.equal(inUse.status, 409);
    assert.equal(inUse.code, "calendar_in_use");
    await client.cancelJob(job.id);
    await client.deleteCalendar("business");
    assert.equal((await rejectsWith(client.getCalendar("business"))).status, 404);
  });

  it("moves an anchor's jobs, lists them, refuses an if_unused delete, and keeps a callback", async () => {
    const client = clientFor(node, namespace());
    const departs = new Date(Date.now() + 10 * 86_400_000);
    departs.setUTCMilliseconds(0);
    const put = await client.putAnchor("flight-LH400", departs);
    assert.equal(put.jobs_moved, 0);
    const reminder = await client.createJob({
      schedule: { anchor: "flight-LH400", offset: "-8h" },
      target: { queue: "reminders" },
      on_failure: { target: { queue: "alerts" } },
    });
    const eightHours = 8 * 3_600_000;
    assert.equal(Date.parse(reminder.next_due_at ?? ""), departs.getTime() - eightHours);
    assert.equal(reminder.on_failure?.target.queue, "alerts");
    const later = new Date(departs.getTime() + 3 * 3_600_000);
    assert.equal((await client.putAnchor("flight-LH400", later)).jobs_moved, 1);
    const moved = await client.getJob(reminder.id);
    assert.equal(Date.parse(moved.next_due_at ?? ""), later.getTime() - eightHours);
    const listed = await client.listJobs({ anchor: "flight-LH400" });
    assert.deepEqual(
      listed.jobs.map((j) => j.id),
      [reminder.id],
    );
    const inUse = await rejectsWith(client.deleteAnchor("flight-LH400", true));
    assert.equal(inUse.status, 409);
    assert.equal(inUse.code, "anchor_in_use");
    assert.equal((await client.deleteAnchor("flight-LH400")).jobs_cancelled, 1);
    assert.equal((await client.getJob(reminder.id)).state, "cancelled");
  });

  it("says what the key may do", async () => {
    // The test node has no keys: development, an admin of every namespace.
    const who = await clientFor(node).whoami();
    assert.equal(who.development, true);
    assert.equal(who.role, "admin");
    assert.equal(who.all_namespaces, true);
    const routes = who.routes.map((r) => `${r.method} ${r.path}`);
    assert.ok(routes.includes("POST /v1/jobs"), routes.join(", "));
    assert.ok(routes.includes("GET /v1/nodes"), routes.join(", "));
    assert.ok(!routes.includes("GET /healthz"), routes.join(", "));
  });

  it("decodes the figures the dashboard charts", async () => {
    const summary = await clientFor(node).getSummary();
    const lateness = summary.node.fire_lateness;
    // Cumulative counts by ascending bound, none above the total (the unbounded bucket).
    const bounds = lateness.buckets.map((b) => b.le);
    const counts = lateness.buckets.map((b) => b.count);
    assert.equal(bounds.length, 13);
    assert.deepEqual(bounds, [...bounds].sort((a, b) => a - b));
    assert.deepEqual(counts, [...counts].sort((a, b) => a - b));
    assert.ok(counts.every((c) => c <= lateness.count));
    assert.ok(summary.node.deliveries.delivered >= 0);
    assert.ok(summary.store.jobs.active >= 0);
    assert.ok(summary.store.queue_messages.available >= 0);
  });

  it("serves the OpenAPI document the SDK is checked against", async () => {
    const served = await clientFor(node).openapi();
    const onDisk: unknown = JSON.parse(readFileSync(join(REPO_DIR, "crates/server/openapi.json"), "utf8"));
    assert.deepEqual(served, onDisk);
  });

  it("aborts a call with its AbortSignal", async () => {
    const client = clientFor(node);
    const stop = new AbortController();
    const lease = client.lease("idle", { wait_ms: 20_000 }, { signal: stop.signal });
    setTimeout(() => stop.abort(new Error("stopped by the test")), 50);
    await assert.rejects(lease, /stopped by the test/);
  });
});

describe("roles", () => {
  it("refuses a call the key's role may not make as an ApiError naming the roles that may", async () => {
    const key = "hg_reader-key-of-the-sdk-tests";
    const sha256 = createHash("sha256").update(key).digest("hex");
    const keyed = await startNode({
      config: `[[api_keys]]\nnamespace = "acme"\nrole = "reader"\nsha256 = "${sha256}"\n`,
    });
    try {
      const reader = new Client(keyed.url, { apiKey: key });
      assert.deepEqual((await reader.listJobs()).jobs, []);
      const refused = await rejectsWith(reader.createJob({ schedule: { after: "1h" }, target: { queue: "q" } }));
      assert.equal(refused.status, 403);
      assert.equal(refused.code, "insufficient_role");
      assert.equal(refused.field, "authorization");
      assert.match(refused.message, /writer or admin/);
    } finally {
      await keyed.stop();
    }
  });
});

describe("examples", () => {
  it("runs the quickstart", async () => {
    const ns = namespace();
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [join(SDK_DIR, "build/examples/quickstart.js")],
        { env: { ...process.env, HOURGLASS_URL: node.url, HOURGLASS_NAMESPACE: ns }, timeout: 60_000 },
        (error, stdout, stderr) => (error ? reject(new Error(`${String(error)}\n${stderr}`)) : resolve(stdout)),
      ),
    );
    const client = clientFor(node, ns);
    const jobs = new Map((await client.listJobs()).jobs.map((j) => [j.type, j]));
    assert.equal(jobs.get("reminder.flight")?.state, "cancelled");
    assert.equal(jobs.get("digest.send")?.key, "digest-acme");
    assert.match(out, new RegExp(`cancelled ${jobs.get("reminder.flight")!.id}: cancelled`));
    assert.match(out, /refused as expected: unknown_timezone at schedule.timezone/);
  });
});
