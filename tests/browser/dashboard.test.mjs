// Drives the dashboard served by a running node (HOURGLASS_URL, started by scripts/browser-test)
// in headless Chromium. Runs its own webhook receiver, seeds jobs through the API, then walks the
// overview, the job list and its filters, job pages and the dead letters, saving a screenshot of
// each step in SCREENSHOT_DIR. Steps run in order and stop at the first failure. A second node
// with API keys (HOURGLASS_KEYED_URL, a reader and an admin key) shows what a role may not do.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const BASE = process.env.HOURGLASS_URL;
const SHOTS = process.env.SCREENSHOT_DIR || path.resolve("target/browser-screenshots");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const XSS_TYPE = "<img src=x onerror=window.__xss=1>";
const KEYED = process.env.HOURGLASS_KEYED_URL;
const READER_KEY = process.env.HOURGLASS_READER_KEY;
const ADMIN_KEY = process.env.HOURGLASS_ADMIN_KEY;

if (!BASE) {
  console.error("HOURGLASS_URL is not set; run scripts/browser-test");
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Webhook receiver: /ok answers 204, /gone answers 410 with a short JSON reason (permanent: one
// attempt, then dead letter).

const hits = [];
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    hits.push(req.url);
    if (req.url === "/gone") {
      res.statusCode = 410;
      res.end('{"error": "licence unknown"}');
    } else {
      res.statusCode = 204;
      res.end();
    }
  });
});
await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const HOOK = `http://127.0.0.1:${receiver.address().port}`;

// ---------------------------------------------------------------------------------------------
// API helpers

async function api(method, route, body) {
  // Every write names its JSON body, also an empty one (the node answers 415 otherwise).
  const init = { method, headers: method === "GET" ? {} : { "content-type": "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`${BASE}${route}`, init);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text}`);
  return data;
}

const create = (job) => api("POST", "/v1/jobs", job);

async function until(what, check, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------------------------------------
// Seed

const inDays = (d) => new Date(Date.now() + d * 86400000).toISOString();
const seeded = {};

async function seed() {
  const far = [];
  for (let i = 0; i < 3; i++) {
    far.push(
      await create({
        type: "invoice.send",
        schedule: { at: inDays(30 + i) },
        target: { webhook: { url: `${HOOK}/ok` } },
        payload: { invoice: 1000 + i, note: "<script>alert('x')</script>" },
      }),
    );
  }
  seeded.far = far;
  seeded.soon = [
    await create({ type: "reminder.flight", schedule: { after: "20m" }, target: { webhook: { url: `${HOOK}/ok` } }, payload: { flight: "LH 400" } }),
    await create({ type: "reminder.train", schedule: { after: "30m" }, target: { webhook: { url: `${HOOK}/ok` } }, payload: { train: "ICE 7" } }),
    await create({
      type: "reminder.flight",
      schedule: { after: "45m" },
      target: { webhook: { url: `${HOOK}/ok`, rate_limit: 10, batch: { max_items: 50 } } },
      payload: { flight: "LH 401" },
    }),
  ];
  // A daily cron twelve hours away from Berlin's current hour, so it is never due within the
  // hour the timeline shows, whatever time of day the test runs.
  const berlinHour = Number(
    new Intl.DateTimeFormat("en-GB", { timeZone: "Europe/Berlin", hour: "numeric", hourCycle: "h23" }).format(new Date()),
  );
  seeded.cron = await create({
    key: "nightly-report",
    type: "report.nightly",
    schedule: { cron: `0 30 ${(berlinHour + 12) % 24} * * *`, timezone: "Europe/Berlin" },
    target: { webhook: { url: `${HOOK}/ok` } },
    payload: { export: "nightly", tenants: ["acme", "globex"] },
    labels: { tenant: "acme", kind: "report" },
  });
  // Fires every second, so the overview's rates have something to draw; cancelled once they
  // have (its next due time is at most a second ahead, and in the past whenever the node runs
  // late: it would come and go on the timeline).
  seeded.heartbeat = await create({
    type: "heartbeat",
    schedule: { every: "1s" },
    target: { webhook: { url: `${HOOK}/ok` } },
  });
  const paused = await create({
    type: "poll.feed",
    schedule: { every: "1h" },
    target: { webhook: { url: `${HOOK}/ok` } },
  });
  seeded.paused = await api("POST", `/v1/jobs/${paused.id}/pause`);
  seeded.xss = await create({
    type: XSS_TYPE,
    schedule: { at: inDays(60) },
    target: { webhook: { url: `${HOOK}/ok` } },
    payload: { html: "<b onmouseover=window.__xss=1>bold</b>" },
  });
  await api("POST", "/v1/jobs/batch", {
    jobs: Array.from({ length: 55 }, (_, i) => ({
      type: "bulk.item",
      schedule: { at: inDays(90) },
      target: { webhook: { url: `${HOOK}/ok` } },
      payload: { n: i },
    })),
  });
  seeded.completed = await create({
    type: "publish.article",
    schedule: { after: "100ms" },
    target: { webhook: { url: `${HOOK}/ok` } },
    payload: { article: 42 },
  });
  seeded.failed = await create({
    type: "licence.expire",
    schedule: { after: "100ms" },
    target: { webhook: { url: `${HOOK}/gone` } },
    retry: { max_attempts: 1 },
    payload: { licence: "L-7" },
  });
  await until("the one-off to complete", async () => (await api("GET", `/v1/jobs/${seeded.completed.id}`)).state === "completed");
  await until("the failing one-off to fail", async () => (await api("GET", `/v1/jobs/${seeded.failed.id}`)).state === "failed");
  const letters = await until("a dead letter", async () => {
    const page = await api("GET", "/v1/dead-letters");
    return page.dead_letters.find((d) => d.job_id === seeded.failed.id);
  });
  seeded.deadLetter = letters;
}

// ---------------------------------------------------------------------------------------------
// Browser

rmSync(SHOTS, { recursive: true, force: true }); // no stale screenshots of an earlier run
mkdirSync(SHOTS, { recursive: true });
const userDataDir = mkdtempSync(path.join(tmpdir(), "hourglass-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: CHROMIUM,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1280, height: 860 },
  locale: "en-GB",
  timezoneId: "UTC",
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(15000);
const pageErrors = [];
page.on("pageerror", (err) => pageErrors.push(err.message));
page.on("console", (msg) => {
  if (msg.type() === "error") pageErrors.push(msg.text());
});

const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
const testid = (id) => page.getByTestId(id);
const ready = (name) => page.waitForSelector(`main[data-ready="${name}"]`);

// Waits until the job table lists exactly these jobs.
async function rowsAre(ids) {
  await page.waitForFunction(
    (want) => {
      const got = [...document.querySelectorAll('[data-testid="job-row"]')].map((r) => r.dataset.id);
      return got.length === want.length && want.every((id) => got.includes(id));
    },
    ids,
  );
}

async function noInjection() {
  assert.equal(await page.evaluate(() => window.__xss), undefined, "injected markup ran");
  assert.deepEqual(pageErrors, [], "errors in the page");
}

// ---------------------------------------------------------------------------------------------
// Steps

const steps = [];
const step = (name, fn) => steps.push({ name, fn });

step("seed jobs through the API", seed);

step("overview shows live numbers", async () => {
  await page.goto(`${BASE}/#/`);
  await ready("overview");
  await page.waitForFunction(() => document.querySelector('[data-testid="stat-dead-letters"]')?.textContent === "1");
  // Two samples of /metrics make one rate.
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="fires-per-sec"]')?.textContent) > 0, null, { timeout: 20000 });
  const delivered = Number((await testid("stat-delivered").textContent()).replace(/\D/g, ""));
  const dead = Number((await testid("stat-dead-letter").textContent()).replace(/\D/g, ""));
  assert.ok(delivered >= 1, `delivered ${delivered}`);
  assert.ok(dead >= 1, `dead-lettered ${dead}`);
  assert.match(await testid("stat-in-flight").textContent(), /^\d+$/);
  assert.match(await testid("stat-timer-queue").textContent(), /^\d+$/);
  assert.match(await testid("stat-backlog").textContent(), /^\d+$/);
  assert.match(await testid("stat-queue-available").textContent(), /^\d+$/);
  // The two lateness figures say which is which: the recent one of fires, and the one since the
  // node started, which also counts queue messages that workers leased late.
  assert.match(await testid("lateness-title").textContent(), /^Fire lateness, last \d+ s/);
  assert.match(await page.locator("#stat-lateness-overall-label").textContent(), /^Fire lateness since node start/);
  const overall = await page.locator(".card.stat", { has: testid("stat-lateness-overall") }).textContent();
  assert.match(overall, /worker's lease/, overall);
  // Let a few more samples draw the sparklines.
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="spark-fires"] polyline').length === 1, null, { timeout: 20000 });
  await shot("01-overview");
  await noInjection();
});

step("job list, upcoming timeline and pagination", async () => {
  await api("DELETE", `/v1/jobs/${seeded.heartbeat.id}`);
  await testid("nav-jobs").click();
  await ready("jobs");
  // The one-offs due in 20, 30 and 45 minutes: well inside the hour however slow the machine.
  const dots = await page.$$eval('[data-testid="timeline-dot"]', (links) => links.map((a) => a.getAttribute("href")));
  assert.deepEqual(
    dots,
    seeded.soon.map((j) => `#/jobs/${j.id}`),
    "the jobs due within the hour are on the timeline, in due order",
  );
  const rows = await testid("job-row").count();
  assert.equal(rows, 50, "the first page holds 50 jobs");
  // Ids are told apart by their random tail (their first characters are a shared time prefix),
  // and a keyed job by its key.
  const labels = await page.$$eval('[data-testid="job-row"] td a.mono', (links) => links.map((a) => a.textContent));
  assert.equal(new Set(labels).size, labels.length, `distinct row labels: ${labels.join(" ")}`);
  assert.ok(labels.includes("nightly-report"), "the keyed job shows its key");
  assert.equal(await testid("next-page").isEnabled(), true);
  await shot("02-jobs");
  await testid("next-page").click();
  await page.waitForFunction(() => document.querySelector('[data-testid="page-info"]')?.textContent.startsWith("Page 2"));
  const total = 3 + 3 + 1 + 1 + 1 + 1 + 55 + 2;
  assert.equal(await testid("job-row").count(), total - 50);
  assert.equal(await testid("next-page").isDisabled(), true);
  await noInjection();
});

step("filters search on the server", async () => {
  await testid("filter-state").selectOption("paused");
  await testid("filter-submit").click();
  await page.waitForURL(/state=paused/);
  await rowsAre([seeded.paused.id]);

  await testid("filter-state").selectOption("");
  await testid("filter-type").fill(XSS_TYPE);
  await testid("filter-submit").click();
  await page.waitForURL(/type=/);
  await rowsAre([seeded.xss.id]);
  assert.equal(await testid("job-type").first().textContent(), XSS_TYPE, "the type shows as text");

  await testid("filter-type").fill("report.nightly");
  await testid("filter-upcoming").check();
  await testid("filter-submit").click();
  await page.waitForURL(/type=report\.nightly/);
  await rowsAre([seeded.cron.id]);
  await shot("03-jobs-filtered");

  // Label selectors, ANDed: only the nightly report has both.
  await testid("filter-type").fill("");
  await testid("filter-upcoming").uncheck();
  await testid("filter-label").fill("tenant=acme kind");
  await testid("filter-submit").click();
  await page.waitForURL(/label=tenant%3Dacme&label=kind|label=tenant=acme&label=kind/);
  await rowsAre([seeded.cron.id]);
  // The row the previous search showed is the same job: wait for the new page's chips.
  await page.waitForFunction(
    () => [...document.querySelectorAll('[data-testid="job-row-label"]')].map((a) => a.textContent).join(" ") === "kind=report tenant=acme",
  );
  await noInjection();
});

step("job page: schedule, next fire times, payload, actions", async () => {
  await page.locator(`[data-testid="job-row"][data-id="${seeded.cron.id}"] a`).first().click();
  await ready("job");
  assert.equal(await testid("job-id").textContent(), seeded.cron.id);
  assert.equal(await testid("fire-time").count(), 10);
  assert.equal(await testid("job-detail-labels").textContent(), "kind=reporttenant=acme");
  const description = await testid("schedule-description").textContent();
  assert.ok(description.length > 5, `description ${description}`);
  const payload = JSON.parse(await testid("payload").textContent());
  assert.deepEqual(payload, { export: "nightly", tenants: ["acme", "globex"] });
  await shot("04-job-cron");

  await testid("action-pause").click();
  await page.waitForFunction(() => document.querySelector('h1 [data-testid="job-state"]')?.textContent === "paused");
  assert.equal((await api("GET", `/v1/jobs/${seeded.cron.id}`)).state, "paused");
  await testid("action-resume").click();
  await page.waitForFunction(() => document.querySelector('h1 [data-testid="job-state"]')?.textContent === "active");
  assert.equal((await api("GET", `/v1/jobs/${seeded.cron.id}`)).state, "active");
  await noInjection();
});

step("job page: a webhook target shows its rate limit and batches", async () => {
  await page.goto(`${BASE}/#/jobs/${seeded.soon[0].id}`);
  await ready("job");
  assert.equal(await testid("job-detail-target").textContent(), `${HOOK}/ok`);
  await page.goto(`${BASE}/#/jobs/${seeded.soon[2].id}`);
  await ready("job");
  assert.equal(
    await testid("job-detail-target").textContent(),
    `${HOOK}/ok (at most 10 a second; batches of up to 50)`,
  );
});

step("job page: runs of a completed job", async () => {
  await page.goto(`${BASE}/#/jobs/${seeded.completed.id}`);
  await ready("job");
  assert.equal(await page.locator('h1 [data-testid="job-state"]').textContent(), "completed");
  assert.ok((await testid("run-row").count()) >= 1);
  assert.equal(await testid("run-status").first().textContent(), "204");
  assert.equal(await testid("run-outcome").first().textContent(), "delivered");
  await shot("05-job-completed");

  await page.goto(`${BASE}/#/jobs/${seeded.xss.id}`);
  await ready("job");
  assert.equal(await testid("job-detail-type").textContent(), XSS_TYPE);
  await shot("06-job-untrusted-text");
  await noInjection();
});

step("job page: a failed job lists its dead letter; times show the job's zone", async () => {
  await page.goto(`${BASE}/#/jobs/${seeded.failed.id}`);
  await ready("job");
  const section = testid("job-dead-letters");
  await section.waitFor();
  assert.equal(await section.getByTestId("dead-letter-row").count(), 1);
  assert.match(await section.textContent(), /410/);
  // Why it failed, from the job itself.
  assert.equal(await testid("job-detail-last-error").textContent(), "http 410");
  // The run keeps what the receiver answered.
  assert.equal(await testid("run-response").first().textContent(), '{"error": "licence unknown"}');
  // The Berlin cron job, viewed from UTC: each fire time also in Berlin's zone.
  await page.goto(`${BASE}/#/jobs/${seeded.cron.id}`);
  await ready("job");
  assert.match(await testid("times-zone").textContent(), /UTC.*Europe\/Berlin/);
  const berlin = await testid("fire-time-job-zone").first().textContent();
  assert.match(berlin, /:30/, berlin);
  assert.match(berlin, /GMT\+[12]|CET|CEST/, berlin);
  await shot("12-job-zones");
  await noInjection();
});

step("dead letters: replay", async () => {
  const id = seeded.deadLetter.id;
  await testid("nav-dead-letters").click();
  await ready("dead-letters");
  const row = page.locator(`[data-testid="dead-letter-row"][data-id="${id}"]`);
  await row.waitFor();
  assert.match(await row.textContent(), /410/);
  await shot("07-dead-letters");
  await row.getByTestId("replay").click();
  await row.waitFor({ state: "detached" });
  await testid("dead-letters-empty").waitFor();
  // Nothing left to replay: the bulk button goes with the last row.
  assert.equal(await testid("replay-all").count(), 0, "no Replay all over an empty list");
  await page.waitForFunction(() => /replayed as job/.test(document.querySelector('[data-testid="status"]')?.textContent || ""));
  await shot("08-dead-letter-replayed");

  const letters = await api("GET", "/v1/dead-letters");
  assert.equal(letters.dead_letters.some((d) => d.id === id), false, "the dead letter is gone");
  // Listings carry payloads only when asked.
  const jobs = await api("GET", "/v1/jobs?type=licence.expire&payload=true");
  const replayed = jobs.jobs.find((j) => j.key === `replay-${id}`);
  assert.ok(replayed, "a job replays the dead letter");
  assert.deepEqual(replayed.payload, { licence: "L-7" });
  await noInjection();
});

step("queues: depth, in flight and scheduled", async () => {
  // One message not due for an hour, then two due ones (one of them leased by a worker):
  // created in that order, so that creation order is not availability order.
  for (const after of ["1h", "1ms", "1ms"]) {
    await create({ type: "email.send", schedule: { after }, target: { queue: "emails" }, payload: { to: "ada@example.com" } });
  }
  let leased = [];
  await until("a message to lease", async () => {
    leased = (await api("POST", "/v1/queues/emails/lease", { max: 1, wait_ms: 1000, visibility_ms: 600000 })).messages;
    return leased.length === 1;
  });
  await testid("nav-queues").click();
  await ready("queues");
  const row = page.locator('[data-testid="queue-row"][data-queue="emails"]');
  await row.waitFor();
  assert.equal(await row.getByTestId("queue-available").textContent(), "1");
  assert.equal(await row.getByTestId("queue-in-flight").textContent(), "1");
  assert.equal(await row.getByTestId("queue-scheduled").textContent(), "1");
  assert.notEqual(await row.getByTestId("queue-oldest").textContent(), "—");
  await shot("09-queues");

  // The queue's page lists its messages: the leased one with when its lease lapses.
  await row.getByTestId("queue-link").click();
  await ready("queue");
  assert.equal(await testid("queue-name").textContent(), "emails");
  assert.equal(await testid("queue-count-in-flight").textContent(), "1");
  assert.equal(await testid("message-row").count(), 3);
  // Oldest first by when each is (again) available to a worker: the due one now, the leased one
  // when its lease lapses (in 10 min), the scheduled one in an hour.
  const statuses = await page.$$eval('[data-testid="message-row"]', (rows) => rows.map((r) => r.dataset.status));
  assert.deepEqual(statuses, ["available", "leased", "scheduled"], "sorted by availability");
  const held = page.locator(`[data-testid="message-row"][data-id="${leased[0].job_id}"]`);
  assert.equal(await held.getByTestId("message-status").textContent(), "leased");
  const lapses = await held.getByTestId("message-when").textContent();
  assert.match(lapses, /^lease lapses .*in (9|10) min$/, lapses);
  assert.equal(
    await held.getByTestId("message-when").locator("time").getAttribute("datetime"),
    leased[0].visible_until,
    "the lease's expiry is the one the lease answered",
  );
  assert.equal(await held.getByTestId("message-attempts").textContent(), `0 / ${leased[0].max_attempts}`);
  await shot("15-queue-messages");

  // A queue job's page names its queue as the target.
  await page.goto(`${BASE}/#/jobs/${leased[0].job_id}`);
  await ready("job");
  assert.equal(await testid("job-detail-target").textContent(), "queue emails");
  await noInjection();
});

step("overview: a destination that keeps failing shows its open breaker", async () => {
  await testid("nav-overview").click();
  await ready("overview");
  await testid("breakers-none").waitFor();
  // A receiver of its own (another destination), down: every request answers 503. Enough jobs
  // fail at once to open its breaker (breaker_failures, 10 by default).
  const down = http.createServer((req, res) => {
    req.resume();
    res.statusCode = 503;
    res.end();
  });
  await new Promise((resolve) => down.listen(0, "127.0.0.1", resolve));
  const destination = `http://127.0.0.1:${down.address().port}`;
  try {
    await api("POST", "/v1/jobs/batch", {
      jobs: Array.from({ length: 12 }, (_, i) => ({
        type: "partner.sync",
        schedule: { after: "100ms" },
        target: { webhook: { url: `${destination}/sync` } },
        payload: { n: i },
      })),
    });
    await until("the breaker to open", async () => (await api("GET", "/v1/breakers")).breakers.length === 1);
    await page.goto(`${BASE}/#/dead-letters`);
    await ready("dead-letters");
    await testid("nav-overview").click();
    await ready("overview");
    const row = testid("breaker-row");
    await row.waitFor();
    assert.equal(await row.count(), 1);
    assert.equal(await row.locator("td").first().textContent(), destination);
    await shot("10-open-breaker");
  } finally {
    down.close();
  }
  await noInjection();
});

step("overview: a bus connection shows what it published; a job page names its target", async () => {
  // scripts/browser-test configures [connections.streams], a Redis URL nothing listens on: a
  // job publishing there is retried, which the connection's row counts.
  await testid("nav-overview").click();
  await ready("overview");
  const row = testid("connection-row");
  await row.waitFor();
  const cells = row.locator("td");
  assert.equal(await cells.nth(0).textContent(), "streams");
  assert.equal(await cells.nth(1).textContent(), "redis");
  const job = await api("POST", "/v1/jobs", {
    type: "stream.publish",
    schedule: { after: "100ms" },
    target: { redis_stream: { connection: "streams", stream: "jobs" } },
    payload: { n: 1 },
  });
  await until("a retried publish", async () => {
    const { connections } = await api("GET", "/v1/connections");
    return connections[0].published.retry > 0;
  });
  await page.goto(`${BASE}/#/dead-letters`);
  await ready("dead-letters");
  await testid("nav-overview").click();
  await ready("overview");
  await testid("connection-row").waitFor();
  assert.notEqual(await testid("connection-row").locator("td").nth(3).textContent(), "0");
  await shot("11-connections");
  await page.goto(`${BASE}/#/jobs/${job.id}`);
  await ready("job");
  assert.equal(await testid("job-detail-target").textContent(), "redis_stream via streams: stream jobs");
  await noInjection();
});

step("overview: the live nodes, each with its version, heartbeat and claims", async () => {
  // The node serving this test is the one live node (development mode: every caller is admin).
  const { nodes } = await until("this node's heartbeat", async () => {
    const answer = await api("GET", "/v1/nodes");
    return answer.nodes.length === 1 && answer;
  });
  await page.goto(`${BASE}/#/dead-letters`);
  await ready("dead-letters");
  await testid("nav-overview").click();
  await ready("overview");
  const row = testid("node-row");
  await row.waitFor();
  assert.equal(await row.count(), 1);
  assert.equal(await testid("node-id").textContent(), nodes[0].id);
  assert.equal(await row.locator("td").nth(1).textContent(), nodes[0].version);
  assert.match(await testid("node-claims").textContent(), /^\d[\d,]*$/);
  await shot("16-nodes");
  await noInjection();
});

step("overview: jobs by state; jobs: bulk pause and cancel; dead letters: replay all", async () => {
  await testid("nav-overview").click();
  await ready("overview");
  await page.waitForFunction(
    () => Number((document.querySelector('[data-testid="state-count-active"] .stat-value')?.textContent || "").replace(/\D/g, "")) > 0,
  );
  const paused = await testid("state-count-paused").locator(".stat-value").textContent();
  assert.notEqual(paused.trim(), "—");

  // Two of the bulk items, paused then cancelled from the list.
  await testid("nav-jobs").click();
  await ready("jobs");
  const boxes = page.locator('[data-testid="job-table"] [data-testid="select-job"]');
  const ids = [await boxes.nth(0).getAttribute("value"), await boxes.nth(1).getAttribute("value")];
  await boxes.nth(0).check();
  await boxes.nth(1).check();
  await testid("bulk-pause").click();
  await until("both jobs paused", async () => {
    const jobs = await Promise.all(ids.map((id) => api("GET", `/v1/jobs/${id}`)));
    return jobs.every((j) => j.state === "paused");
  });
  await ready("jobs");
  page.once("dialog", (dialog) => dialog.accept());
  for (const id of ids) await page.locator(`[data-testid="job-table"] [data-testid="select-job"][value="${id}"]`).check();
  await testid("bulk-cancel").click();
  await until("both jobs cancelled", async () => {
    const jobs = await Promise.all(ids.map((id) => api("GET", `/v1/jobs/${id}`)));
    return jobs.every((j) => j.state === "cancelled");
  });
  await shot("13-bulk-cancelled");

  // Two more failures, replayed at once.
  const failing = await Promise.all(
    [1, 2].map((n) =>
      create({
        type: "licence.expire",
        schedule: { after: "100ms" },
        target: { webhook: { url: `${HOOK}/gone` } },
        retry: { max_attempts: 1 },
        payload: { licence: `L-${n}` },
      }),
    ),
  );
  const letters = await until("two dead letters", async () => {
    const page = await api("GET", "/v1/dead-letters");
    const found = page.dead_letters.filter((d) => failing.some((job) => job.id === d.job_id));
    return found.length === 2 && found;
  });
  await testid("nav-dead-letters").click();
  await ready("dead-letters");
  page.once("dialog", (dialog) => dialog.accept());
  await testid("replay-all").click();
  await page.waitForFunction(() => /Replayed \d+ dead letters/.test(document.querySelector('[data-testid="status"]')?.textContent || ""));
  // Each letter became a new job (its receiver still answers 410, so each fails again, as a new
  // dead letter with a new id): the replayed ones are gone.
  const left = await api("GET", "/v1/dead-letters?limit=1000");
  assert.equal(left.dead_letters.filter((d) => letters.some((l) => l.id === d.id)).length, 0);
  await noInjection();
});

step("job page: a job in backoff says it is retrying, why, and when", async () => {
  // The breaker step left partner.sync jobs failing against a 503 receiver.
  const { jobs } = await api("GET", "/v1/jobs?type=partner.sync&limit=50");
  const retrying = jobs.find((j) => j.next_attempt_at && j.attempt >= 1);
  assert.ok(retrying, `a partner.sync job waiting to retry: ${JSON.stringify(jobs.map((j) => [j.attempt, j.next_attempt_at]))}`);
  await page.goto(`${BASE}/#/jobs/${retrying.id}`);
  await ready("job");
  const text = await testid("job-detail-retrying").textContent();
  assert.match(text, /attempt \d+ failed/);
  assert.match(text, /503|refused|connect/i, text);
  assert.equal(await page.locator("main").evaluate((m) => /(^|\n)null(\n|$)/.test(m.innerText)), false, "no stray null");
  await shot("14-job-retrying");
  await noInjection();
});

step("anchor: a job shows its anchor and its callback; the anchor's page lists its jobs and follows a move", async () => {
  const at = new Date(Date.now() + 48 * 3600 * 1000);
  await api("PUT", "/v1/anchors/flight-LH400", { at: at.toISOString() });
  const target = { webhook: { url: `${HOOK}/ok` } };
  const early = await api("POST", "/v1/jobs", {
    type: "reminder.flight",
    schedule: { anchor: "flight-LH400", offset: "-8h" },
    target,
    on_failure: { target: { queue: "alerts" }, every_attempt: true },
  });
  const late = await api("POST", "/v1/jobs", { type: "reminder.flight", schedule: { anchor: "flight-LH400", offset: "-1h" }, target });
  await page.goto(`${BASE}/#/jobs/${early.id}`);
  await ready("job");
  assert.match(await testid("job-detail-anchor").textContent(), /flight-LH400 \(offset -8h;/);
  const onFailure = await testid("job-detail-on-failure").textContent();
  assert.match(onFailure, /alerts/, onFailure);
  assert.match(onFailure, /every failed attempt/, onFailure);
  await testid("job-detail-anchor").locator("a").click();
  await page.waitForURL(/anchor=flight-LH400/);
  await testid("anchor-card").waitFor();
  await rowsAre([early.id, late.id]);
  // Moved an hour later: the page shows the new instant and the jobs' new due times.
  const moved = await api("PUT", "/v1/anchors/flight-LH400", { at: new Date(at.getTime() + 3600 * 1000).toISOString() });
  assert.equal(moved.jobs_moved, 2);
  await page.reload();
  await testid("anchor-card").waitFor();
  const job = await api("GET", `/v1/jobs/${early.id}`);
  assert.equal(Date.parse(job.next_due_at), at.getTime() + 3600 * 1000 - 8 * 3600 * 1000);
  await shot("15-anchor");
  await noInjection();
});

step("allow: a handed-off occurrence's job names the job and the occurrence it delivers", async () => {
  const parent = await api("POST", "/v1/jobs", { type: "report.allow", schedule: { every: "1h" }, target: { queue: "allowed" }, overlap: "allow" });
  const triggered = await api("POST", `/v1/jobs/${parent.id}/trigger`);
  // Leasing hands the occurrence to a job of its own and leases that job's message.
  const leased = (await api("POST", "/v1/queues/allowed/lease", { max: 1, wait_ms: 5000, visibility_ms: 600000 })).messages;
  assert.equal(leased.length, 1);
  assert.equal(leased[0].delivery_id, triggered.delivery_id);
  const children = (await api("GET", `/v1/jobs?label=hourglass/occurrence-of=${parent.id}`)).jobs;
  assert.equal(children.length, 1);
  await page.goto(`${BASE}/#/jobs/${children[0].id}`);
  await ready("job");
  const row = await testid("job-detail-occurrence-of").textContent();
  assert.ok(row.includes(parent.id), row);
  await testid("job-detail-occurrence-of").locator("a").click();
  await page.waitForURL(new RegExp(`#/jobs/${parent.id}`));
  await ready("job");
  assert.match(await testid("job-detail-overlap").textContent(), /allow/);
  await noInjection();
});

step("roles: a reader key sees the 403 of what its role may not read or do", async () => {
  assert.ok(KEYED && READER_KEY && ADMIN_KEY, "HOURGLASS_KEYED_URL and the keys are set by scripts/browser-test");
  const response = await fetch(`${KEYED}/v1/jobs`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` },
    body: JSON.stringify({ schedule: { after: "1h" }, target: { queue: "roles" } }),
  });
  assert.equal(response.status, 201);
  const job = await response.json();
  // Another origin (port), so its own sessionStorage: enter the reader key.
  await page.goto(`${KEYED}/#/`);
  await testid("api-key").fill(READER_KEY);
  await testid("save-credentials").click();
  await ready("overview");
  // The header says what the key may do: its role and namespace, its routes as the tooltip.
  await page.waitForFunction(() => document.getElementById("identity").dataset.role === "reader");
  assert.match(await testid("identity").textContent(), /^reader · /);
  const routes = await testid("identity").getAttribute("title");
  assert.match(routes, /^GET \/v1\/jobs$/m);
  assert.doesNotMatch(routes, /^POST \/v1\/jobs$/m);
  // What a reader may read is shown; what it may not, the node's message naming who may.
  assert.equal(await testid("stat-dead-letters").textContent(), "0");
  assert.match(await testid("breakers-refused").textContent(), /role admin; this key's role is reader/);
  assert.equal(await testid("connections-none").count(), 1);
  assert.equal(await testid("nodes-refused").count(), 1);
  await shot("15-roles-overview");
  // An action it may not take answers the 403 in the status line, and changes nothing.
  await page.goto(`${KEYED}/#/jobs/${job.id}`);
  await ready("job");
  await testid("action-pause").click();
  await page.waitForFunction(() => document.getElementById("status").dataset.kind === "error");
  assert.match(await testid("status").textContent(), /writer or admin; this key's role is reader/);
  const after = await fetch(`${KEYED}/v1/jobs/${job.id}`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  assert.equal((await after.json()).state, "active");
  await shot("16-roles-refused-action");
  assert.equal(await page.evaluate(() => window.__xss), undefined, "injected markup ran");
});

// ---------------------------------------------------------------------------------------------

let passed = 0;
let failed = 0;
try {
  for (const { name, fn } of steps) {
    const started = Date.now();
    try {
      await fn();
      passed += 1;
      console.log(`ok   ${name} (${Date.now() - started} ms)`);
    } catch (err) {
      failed += 1;
      console.log(`FAIL ${name}\n${err && err.stack ? err.stack : err}`);
      await shot(`failure-${passed + failed}`).catch(() => {});
      break;
    }
  }
} finally {
  await context.close().catch(() => {});
  receiver.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
const skipped = steps.length - passed - failed;
console.log(`screenshots: ${SHOTS}`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} not run` : ""}`);
process.exit(failed ? 1 : 0);
