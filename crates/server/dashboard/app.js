// The Hourglass dashboard. Plain ES module, no dependencies: it reads and acts through the public
// HTTP API only, so an API key sees exactly what the API lets it see. Every value from the server
// enters the page as text (textContent / attributes), never as markup: job types and payloads are
// user-controlled.

const SAMPLE_EVERY_MS = 3000;
const SAMPLE_WINDOW_MS = 5 * 60 * 1000;
const PAGE_SIZE = 50;
const TIMELINE_WINDOW_MS = 60 * 60 * 1000;
const TIMELINE_LIMIT = 200;
const STATES = ["active", "paused", "completed", "failed", "cancelled"];

// ---------------------------------------------------------------------------------------------
// Credentials

const store = window.sessionStorage;

function credentials() {
  return {
    namespace: store.getItem("hourglass.namespace") || "",
    key: store.getItem("hourglass.key") || "",
  };
}

function setupCredentials() {
  const form = document.getElementById("credentials");
  const ns = document.getElementById("namespace");
  const key = document.getElementById("api-key");
  const current = credentials();
  ns.value = current.namespace;
  key.value = current.key;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    store.setItem("hourglass.namespace", ns.value.trim());
    store.setItem("hourglass.key", key.value.trim());
    render();
  });
}

// ---------------------------------------------------------------------------------------------
// API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const { namespace, key } = credentials();
  const headers = { accept: "application/json" };
  if (namespace) headers["hourglass-namespace"] = namespace;
  if (key) headers.authorization = `Bearer ${key}`;
  const init = { method, headers };
  // The node wants the JSON type on every write, also without a body (pause, trigger, replay).
  if (method !== "GET" && method !== "HEAD") headers["content-type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const err = data && data.error ? data.error : {};
    let message = err.message || `${response.status} ${response.statusText}`;
    if (response.status === 401) message += " — enter an API key above";
    throw new ApiError(response.status, err.code || "http_error", message);
  }
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

// ---------------------------------------------------------------------------------------------
// DOM helpers: text only

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") {
      for (const [event, handler] of Object.entries(v)) node.addEventListener(event, handler);
    } else {
      node.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function setStatus(message, kind = "info") {
  const status = document.getElementById("status");
  status.textContent = message || "";
  status.dataset.kind = kind;
}

function showError(err) {
  setStatus(err instanceof Error ? err.message : String(err), "error");
}

// ---------------------------------------------------------------------------------------------
// Formatting

function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// The viewer's zone, as the browser names it ("Europe/Berlin").
const VIEWER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

// An instant in an IANA zone, with the zone's abbreviation or offset ("09:30 CET").
function fmtTimeIn(iso, zone) {
  if (!iso) return "—";
  const d = new Date(iso);
  try {
    return d.toLocaleString(undefined, { timeZone: zone, timeZoneName: "short" });
  } catch {
    return fmtTime(iso);
  }
}

function fmtRelative(iso) {
  if (!iso) return "";
  const ms = new Date(iso).getTime() - Date.now();
  const abs = Math.abs(ms);
  const units = [
    [86400000, "d"],
    [3600000, "h"],
    [60000, "min"],
    [1000, "s"],
  ];
  let text = "now";
  for (const [size, unit] of units) {
    if (abs >= size) {
      text = `${Math.floor(abs / size)} ${unit}`;
      break;
    }
  }
  if (text === "now") return text;
  return ms >= 0 ? `in ${text}` : `${text} ago`;
}

function timeCell(iso) {
  return el("time", { datetime: iso || undefined, title: iso || undefined }, fmtTime(iso));
}

function fmtNumber(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  return n.toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function scheduleSummary(s) {
  if (!s) return "";
  if (s.at) return `once at ${fmtTime(s.at)}`;
  if (s.cron) return `cron ${s.cron}${s.timezone ? ` (${s.timezone})` : ""}`;
  if (s.every) return `every ${s.every}`;
  if (s.after) return `after ${s.after}`;
  return JSON.stringify(s);
}

function stateBadge(state) {
  return el("span", { class: `badge state-${state}`, "data-testid": "job-state" }, state);
}

// What each bus or cloud target kind publishes to, by its field.
const RESOURCE_FIELDS = {
  eventbridge: (t) => `bus ${t.bus} (${t.detail_type})`,
  sqs: (t) => t.queue_url,
  sns: (t) => t.topic_arn,
  lambda: (t) => `function ${t.function}`,
  nats: (t) => `subject ${t.subject}`,
  redis_stream: (t) => `stream ${t.stream}`,
  amqp: (t) => `exchange ${t.exchange || "(default)"} ${t.routing_key || ""}`.trim(),
};

// A webhook's URL, and the limits its target asks for (a rate limit, batches).
function webhookText(webhook) {
  const limits = [];
  if (webhook.rate_limit) limits.push(`at most ${webhook.rate_limit} a second`);
  if (webhook.batch) limits.push(`batches of up to ${webhook.batch.max_items}`);
  return limits.length ? `${webhook.url} (${limits.join("; ")})` : webhook.url;
}

function targetText(target) {
  if (target && target.webhook) return webhookText(target.webhook);
  if (target && target.queue) return `queue ${target.queue}`;
  for (const [kind, text] of Object.entries(RESOURCE_FIELDS)) {
    if (target && target[kind]) return `${kind} via ${target[kind].connection}: ${text(target[kind])}`;
  }
  return JSON.stringify(target);
}

function fmtAge(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

function jobLink(id, text) {
  return el("a", { href: `#/jobs/${encodeURIComponent(id)}`, class: "mono", title: id }, text || id);
}

// A job id is time-ordered: its first characters are the same for jobs created close together,
// so lists show its random tail instead.
function shortId(id) {
  return "…" + id.slice(-12);
}

// ---------------------------------------------------------------------------------------------
// Metrics: parsed from the Prometheus / OpenMetrics text of /metrics, sampled in the background

const samples = [];

function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      for (const lm of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[lm[1]] = lm[2];
      }
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

const JOB_STATES = ["active", "paused", "completed", "failed", "cancelled"];

function summarize(series) {
  const sum = (name, filter = () => true) =>
    series.filter((s) => s.name === name && filter(s.labels)).reduce((a, s) => a + s.value, 0);
  const outcomes = {};
  for (const s of series) {
    if (s.name === "hourglass_deliveries_total") {
      const o = s.labels.outcome || "unknown";
      outcomes[o] = (outcomes[o] || 0) + s.value;
    }
  }
  const buckets = new Map();
  for (const s of series) {
    if (s.name === "hourglass_fire_lateness_seconds_bucket") {
      const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
      buckets.set(le, (buckets.get(le) || 0) + s.value);
    }
  }
  return {
    at: Date.now(),
    outcomes,
    latenessSum: sum("hourglass_fire_lateness_seconds_sum"),
    latenessCount: sum("hourglass_fire_lateness_seconds_count"),
    buckets: [...buckets.entries()].sort((a, b) => a[0] - b[0]),
    inFlight: sum("hourglass_in_flight"),
    timerQueue: sum("hourglass_timer_queue"),
    backlog: sum("hourglass_due_backlog"),
    backlogAgeMs: sum("hourglass_due_backlog_age_seconds") * 1000,
    jobsByState: Object.fromEntries(
      JOB_STATES.map((state) => [state, sum("hourglass_jobs", (l) => l.state === state)]),
    ),
    queueAvailable: sum("hourglass_queue_messages", (l) => l.state === "available"),
    queueInFlight: sum("hourglass_queue_messages", (l) => l.state === "in_flight"),
  };
}

// The p99 of the observations between two cumulative histograms: the upper bound of the bucket
// that holds it.
function quantile(prev, cur, q) {
  const before = new Map(prev.buckets);
  const deltas = cur.buckets.map(([le, n]) => [le, n - (before.get(le) || 0)]);
  const total = deltas.length ? deltas[deltas.length - 1][1] : 0;
  if (total <= 0) return null;
  for (const [le, n] of deltas) if (n >= q * total) return le;
  return null;
}

function rates() {
  const points = [];
  for (let i = 1; i < samples.length; i++) {
    const prev = samples[i - 1];
    const cur = samples[i];
    const dt = (cur.at - prev.at) / 1000;
    const fired = cur.latenessCount - prev.latenessCount;
    if (dt <= 0 || fired < 0) continue;
    points.push({
      at: cur.at,
      firesPerSec: fired / dt,
      meanLatenessMs: fired > 0 ? ((cur.latenessSum - prev.latenessSum) / fired) * 1000 : 0,
      p99LatenessMs: (quantile(prev, cur, 0.99) ?? 0) * 1000,
    });
  }
  return points;
}

let sampling = null;

async function sample() {
  try {
    // /metrics covers every namespace: with API keys configured it needs an admin key.
    const { key } = credentials();
    const headers = key ? { authorization: `Bearer ${key}` } : {};
    const response = await fetch("/metrics", { headers });
    if (response.status === 401 || response.status === 403) {
      throw new Error("node metrics need an admin API key");
    }
    if (!response.ok) throw new Error(`/metrics answered ${response.status}`);
    samples.push(summarize(parseMetrics(await response.text())));
    const cutoff = Date.now() - SAMPLE_WINDOW_MS;
    while (samples.length > 2 && samples[0].at < cutoff) samples.shift();
    if (currentView === "overview") renderOverviewStats();
  } catch (err) {
    if (currentView === "overview") showError(err);
  }
}

function startSampling() {
  if (sampling) return;
  sample();
  sampling = window.setInterval(sample, SAMPLE_EVERY_MS);
}

function sparkline(values, { label, testid, unit }) {
  const width = 240;
  const height = 48;
  const max = Math.max(1e-9, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`);
  const last = values.length ? values[values.length - 1] : 0;
  return svg(
    "svg",
    {
      class: "spark",
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `${label}: ${values.length} samples, latest ${fmtNumber(last, 2)} ${unit}, peak ${fmtNumber(max < 1e-6 ? 0 : max, 2)} ${unit}`,
      "data-testid": testid,
      preserveAspectRatio: "none",
    },
    svg("title", {}, label),
    svg("line", { x1: 0, y1: height - 1, x2: width, y2: height - 1, class: "spark-axis" }),
    pts.length > 1 ? svg("polyline", { points: pts.join(" "), class: "spark-line" }) : null,
  );
}

// ---------------------------------------------------------------------------------------------
// Views

let currentView = null;
let renderToken = 0;

function view() {
  return document.getElementById("view");
}

function parseHash() {
  const hash = window.location.hash.replace(/^#/, "") || "/";
  const [path, qs] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(qs || "") };
}

async function render() {
  const token = ++renderToken;
  const { parts, params } = parseHash();
  let name = "overview";
  let renderer = renderOverview;
  if (parts[0] === "jobs" && parts[1]) {
    name = "job";
    renderer = () => renderJob(parts[1]);
  } else if (parts[0] === "jobs") {
    name = "jobs";
    renderer = () => renderJobs(params);
  } else if (parts[0] === "dead-letters") {
    name = "dead-letters";
    renderer = () => renderDeadLetters(params);
  } else if (parts[0] === "queues" && parts[1]) {
    name = "queue";
    renderer = () => renderQueue(parts[1], params);
  } else if (parts[0] === "queues") {
    name = "queues";
    renderer = renderQueues;
  }
  currentView = name;
  for (const link of document.querySelectorAll("nav a[data-nav]")) {
    const parent = { job: "jobs", queue: "queues" }[name];
    const active = link.dataset.nav === name || link.dataset.nav === parent;
    if (active) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  setStatus("");
  const main = view();
  main.dataset.view = name;
  delete main.dataset.ready;
  main.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  try {
    const content = await renderer();
    if (token !== renderToken) return;
    main.replaceChildren(...[content].flat());
    main.dataset.ready = name;
  } catch (err) {
    if (token !== renderToken) return;
    main.replaceChildren(el("p", { class: "error", "data-testid": "view-error" }, err.message));
    showError(err);
  }
}

// Overview -----------------------------------------------------------------------------------

function stat(label, testid, value, hint) {
  return el(
    "div",
    { class: "card stat" },
    el("span", { class: "stat-label", id: `${testid}-label` }, label),
    el("span", { class: "stat-value", "data-testid": testid, "aria-labelledby": `${testid}-label` }, value),
    hint ? el("span", { class: "stat-hint" }, hint) : null,
  );
}

function renderOverviewStats() {
  const box = document.getElementById("overview-stats");
  if (!box) return;
  const latest = samples[samples.length - 1];
  const series = rates();
  const lastRate = series[series.length - 1];
  const o = latest ? latest.outcomes : {};
  const n = (v) => (latest ? fmtNumber(v || 0) : "—");
  box.replaceChildren(
    el(
      "section",
      { class: "grid", "aria-label": "Throughput" },
      el(
        "div",
        { class: "card chart" },
        el("h3", {}, "Fires per second"),
        el("p", { class: "big", "data-testid": "fires-per-sec" }, lastRate ? fmtNumber(lastRate.firesPerSec, 2) : "—"),
        sparkline(series.map((p) => p.firesPerSec), { label: "Fires per second", testid: "spark-fires", unit: "/s" }),
      ),
      el(
        "div",
        { class: "card chart" },
        el("h3", { "data-testid": "lateness-title" }, `Fire lateness, last ${SAMPLE_EVERY_MS / 1000} s (mean, ms)`),
        el(
          "p",
          { class: "big", "data-testid": "lateness-mean" },
          lastRate ? fmtNumber(lastRate.meanLatenessMs, 1) : "—",
          lastRate ? el("small", {}, ` p99 ≤ ${fmtNumber(lastRate.p99LatenessMs, 0)} ms`) : null,
        ),
        sparkline(series.map((p) => p.meanLatenessMs), { label: "Mean fire lateness", testid: "spark-lateness", unit: "ms" }),
      ),
    ),
    el(
      "section",
      { class: "grid stats", "aria-label": "Counters" },
      stat("Delivered", "stat-delivered", n(o.delivered), "attempts since start"),
      stat("Retried", "stat-retry", n(o.retry), "attempts since start"),
      stat("Dead-lettered", "stat-dead-letter", n(o.dead_letter), "attempts since start"),
      stat("In flight", "stat-in-flight", n(latest && latest.inFlight)),
      stat("Timer queue", "stat-timer-queue", n(latest && latest.timerQueue)),
      stat(
        "Due backlog",
        "stat-backlog",
        n(latest && latest.backlog),
        latest && latest.backlog > 0 ? `oldest due ${fmtAge(Math.round(latest.backlogAgeMs))} ago` : "past due, not yet claimed",
      ),
      stat("Queue messages waiting", "stat-queue-available", n(latest && latest.queueAvailable), latest ? `${fmtNumber(latest.queueInFlight)} leased by workers` : null),
      stat(
        "Fire lateness since node start",
        "stat-lateness-overall",
        latest && latest.latenessCount > 0 ? `${fmtNumber((latest.latenessSum / latest.latenessCount) * 1000, 1)} ms` : "—",
        "mean; a queue message counts until a worker's lease takes it",
      ),
    ),
    el(
      "section",
      { class: "grid stats", "aria-label": "Jobs by state", "data-testid": "jobs-by-state" },
      JOB_STATES.map((state) =>
        el(
          "a",
          { class: "card stat", href: `#/jobs?state=${state}`, "data-testid": `state-count-${state}` },
          el("span", { class: "stat-label" }, `Jobs ${state}`),
          el("span", { class: "stat-value" }, n(latest && latest.jobsByState[state])),
        ),
      ),
    ),
    el(
      "p",
      { class: "muted small" },
      `Jobs by state count the whole store (every namespace), read at most every 10 s. Sampled from /metrics every ${SAMPLE_EVERY_MS / 1000} s in this tab; charts show the last ${SAMPLE_WINDOW_MS / 60000} minutes (${series.length} intervals). Counters are node-wide.`,
    ),
  );
}

async function renderOverview() {
  startSampling();
  const letters = await api("GET", `/v1/dead-letters${query({ limit: 1000 })}`);
  const count = letters.dead_letters.length;
  const failures = el(
    "div",
    { class: "card stat failures" },
    el("span", { class: "stat-label", id: "stat-failures-label" }, "Failures waiting (dead letters)"),
    el(
      "span",
      { class: "stat-value", "data-testid": "stat-dead-letters", "aria-labelledby": "stat-failures-label" },
      letters.next_cursor ? `${count}+` : String(count),
    ),
    el("a", { href: "#/dead-letters", class: "stat-hint" }, "Review dead letters →"),
  );
  const { breakers } = await api("GET", "/v1/breakers");
  const held = el(
    "div",
    { class: "card breakers", "data-testid": "breakers" },
    el("span", { class: "stat-label", id: "breakers-label" }, "Destinations held back (open breakers)"),
    breakers.length
      ? el(
          "table",
          { "data-testid": "breakers-table", "aria-labelledby": "breakers-label" },
          el("thead", {}, el("tr", {}, ["Destination", "Open since"].map((h) => el("th", { scope: "col" }, h)))),
          el(
            "tbody",
            {},
            breakers.map((b) =>
              el(
                "tr",
                { "data-testid": "breaker-row" },
                el("td", { class: "mono" }, b.destination),
                el("td", {}, timeCell(b.open_since)),
              ),
            ),
          ),
        )
      : el("p", { class: "muted", "data-testid": "breakers-none" }, "None: every destination is answering."),
    el(
      "p",
      { class: "muted small" },
      "Deliveries to a destination that keeps failing wait, without spending attempts, until a probe gets an answer. Per node.",
    ),
  );
  const { connections } = await api("GET", "/v1/connections");
  const buses = el(
    "div",
    { class: "card connections", "data-testid": "connections" },
    el("span", { class: "stat-label", id: "connections-label" }, "Bus and cloud connections"),
    connections.length
      ? el(
          "table",
          { "data-testid": "connections-table", "aria-labelledby": "connections-label" },
          el("thead", {}, el("tr", {}, ["Name", "Kind", "Sent", "Retried", "Refused"].map((h) => el("th", { scope: "col" }, h)))),
          el(
            "tbody",
            {},
            connections.map((c) =>
              el(
                "tr",
                { "data-testid": "connection-row" },
                el("td", { class: "mono" }, c.name),
                el("td", {}, c.kind),
                // A connection other namespaces may use too shows no counts: they are everyone's.
                ...(c.published
                  ? [
                      el("td", {}, fmtNumber(c.published.delivered)),
                      el("td", {}, fmtNumber(c.published.retry)),
                      el("td", {}, fmtNumber(c.published.rejected)),
                    ]
                  : [el("td", { colspan: "3", class: "muted", title: "Shared with other namespaces: its counts are not shown" }, "shared")]),
              ),
            ),
          ),
        )
      : el("p", { class: "muted", "data-testid": "connections-none" }, "None configured for this namespace (see README, Targets)."),
    el("p", { class: "muted small" }, "Publishes through each connection on this node since it started (for connections this namespace has to itself)."),
  );
  const stats = el("div", { id: "overview-stats" });
  const content = [
    el("h1", {}, "Overview"),
    el("section", { class: "grid", "aria-label": "Failures" }, failures, held, buses),
    await nodesCard(),
    stats,
  ];
  queueMicrotask(renderOverviewStats);
  return content;
}

// The cluster's live nodes: cluster-wide, so with API keys configured it needs an admin key; a
// namespace key sees a note instead of the table.
async function nodesCard() {
  let nodes = null;
  let refused = null;
  try {
    ({ nodes } = await api("GET", "/v1/nodes"));
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) throw err;
    refused = err;
  }
  const body = refused
    ? el("p", { class: "muted", "data-testid": "nodes-refused" }, "The list of nodes covers the whole cluster: it needs an admin API key.")
    : nodes.length
      ? el(
          "table",
          { "data-testid": "nodes-table", "aria-labelledby": "nodes-label" },
          el(
            "thead",
            {},
            el("tr", {}, ["Node", "Version", "Started", "Last heartbeat", "Claims held"].map((h) => el("th", { scope: "col" }, h))),
          ),
          el(
            "tbody",
            {},
            nodes.map((n) =>
              el(
                "tr",
                { "data-testid": "node-row" },
                el("td", { class: "mono", "data-testid": "node-id" }, n.id),
                el("td", {}, n.version),
                el("td", {}, timeCell(n.started_at)),
                el("td", {}, timeCell(n.last_heartbeat)),
                el("td", { class: "num", "data-testid": "node-claims" }, fmtNumber(n.claims_held)),
              ),
            ),
          ),
        )
      : el("p", { class: "muted", "data-testid": "nodes-none" }, "None: no node has written a heartbeat in the last 15 s.");
  return el(
    "section",
    { class: "card nodes", "aria-label": "Nodes", "data-testid": "nodes" },
    el("span", { class: "stat-label", id: "nodes-label" }, "Live nodes"),
    body,
    el(
      "p",
      { class: "muted small" },
      "Every node writes a heartbeat to the store every 5 s and is listed for 15 s after its latest; claims held are its own count at that heartbeat. A node missing here stopped, was killed, or cannot reach the store.",
    ),
  );
}

// Jobs ---------------------------------------------------------------------------------------

function filterForm(params) {
  const state = el(
    "select",
    { id: "filter-state", name: "state", "data-testid": "filter-state" },
    el("option", { value: "" }, "any state"),
    STATES.map((s) => el("option", { value: s, selected: params.get("state") === s }, s)),
  );
  const type = el("input", {
    id: "filter-type",
    name: "type",
    type: "search",
    placeholder: "exact type, e.g. reminder.flight",
    value: params.get("type") || "",
    "data-testid": "filter-type",
  });
  const upcoming = el("input", {
    id: "filter-upcoming",
    name: "upcoming",
    type: "checkbox",
    checked: params.get("upcoming") === "1",
    "data-testid": "filter-upcoming",
  });
  const form = el(
    "form",
    { class: "filters", role: "search", "data-testid": "job-filters", "aria-label": "Filter jobs" },
    el("label", {}, "State ", state),
    el("label", {}, "Type ", type),
    el("label", { class: "check" }, upcoming, " due from now on"),
    el("button", { type: "submit", "data-testid": "filter-submit" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    if (state.value) q.set("state", state.value);
    if (type.value.trim()) q.set("type", type.value.trim());
    if (upcoming.checked) q.set("upcoming", "1");
    const s = q.toString();
    window.location.hash = `#/jobs${s ? `?${s}` : ""}`;
  });
  return form;
}

function jobRow(job, selectable) {
  return el(
    "tr",
    { "data-testid": "job-row", "data-id": job.id },
    selectable
      ? el(
          "td",
          {},
          el("input", { type: "checkbox", class: "select-job", "data-testid": "select-job", value: job.id, "aria-label": `Select job ${job.key || job.id}` }),
        )
      : null,
    el(
      "td",
      {},
      jobLink(job.id, job.key || shortId(job.id)),
      job.key ? el("div", { class: "muted small mono" }, shortId(job.id)) : null,
    ),
    el("td", { "data-testid": "job-type" }, job.type || el("span", { class: "muted" }, "—")),
    el("td", {}, stateBadge(job.state)),
    el("td", {}, scheduleSummary(job.schedule)),
    el("td", {}, job.next_due_at ? [timeCell(job.next_due_at), el("div", { class: "muted small" }, fmtRelative(job.next_due_at))] : "—"),
    el("td", { class: "num" }, String(job.runs)),
  );
}

function jobTable(jobs, testid, selectable = false) {
  if (!jobs.length) return el("p", { class: "muted", "data-testid": `${testid}-empty` }, "No jobs match.");
  return el(
    "table",
    { "data-testid": testid },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        [selectable ? "" : null, "Job", "Type", "State", "Schedule", "Next due", "Runs"]
          .filter((h) => h !== null)
          .map((h) => el("th", { scope: "col" }, h)),
      ),
    ),
    el("tbody", {}, jobs.map((job) => jobRow(job, selectable))),
  );
}

function timeline(jobs, from, to) {
  const width = 800;
  const height = 64;
  const pad = 12;
  const x = (t) => pad + ((t - from) / (to - from)) * (width - 2 * pad);
  const ticks = [];
  for (let i = 0; i <= 6; i++) {
    const t = from + ((to - from) * i) / 6;
    ticks.push(
      svg("line", { x1: x(t), x2: x(t), y1: 36, y2: 42, class: "tl-tick" }),
      svg("text", { x: x(t), y: 56, class: "tl-label", "text-anchor": i === 0 ? "start" : i === 6 ? "end" : "middle" }, i === 0 ? "now" : `+${Math.round((t - from) / 60000)} min`),
    );
  }
  const dots = jobs.map((job) => {
    const t = new Date(job.next_due_at).getTime();
    return svg(
      "a",
      { href: `#/jobs/${job.id}`, "data-testid": "timeline-dot" },
      svg(
        "circle",
        { cx: x(t).toFixed(1), cy: 24, r: 5, class: `tl-dot state-${job.state}` },
        svg("title", {}, `${job.type || "(no type)"} — ${fmtTime(job.next_due_at)} (${fmtRelative(job.next_due_at)})`),
      ),
    );
  });
  return svg(
    "svg",
    {
      class: "timeline",
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `${jobs.length} jobs due in the next hour`,
      "data-testid": "timeline",
    },
    svg("line", { x1: pad, x2: width - pad, y1: 39, y2: 39, class: "tl-axis" }),
    ticks,
    dots,
  );
}

async function renderUpcoming() {
  const from = Date.now();
  const to = from + TIMELINE_WINDOW_MS;
  const page = await api(
    "GET",
    `/v1/jobs${query({
      state: "active",
      due_after: new Date(from).toISOString(),
      due_before: new Date(to).toISOString(),
      limit: TIMELINE_LIMIT,
    })}`,
  );
  const jobs = page.jobs.filter((j) => j.next_due_at);
  jobs.sort((a, b) => a.next_due_at.localeCompare(b.next_due_at));
  return el(
    "section",
    { class: "card", "aria-labelledby": "upcoming-title", "data-testid": "upcoming" },
    el("h2", { id: "upcoming-title" }, "Due in the next hour"),
    timeline(jobs, from, to),
    el(
      "p",
      { class: "muted small" },
      page.next_cursor
        ? `Showing ${jobs.length} of more than ${TIMELINE_LIMIT} active jobs due in this hour.`
        : `${jobs.length} active job${jobs.length === 1 ? "" : "s"} due in this hour.`,
    ),
  );
}

async function renderJobs(params) {
  const filters = {
    state: params.get("state") || undefined,
    type: params.get("type") || undefined,
    due_after: params.get("upcoming") === "1" ? new Date().toISOString() : undefined,
    limit: PAGE_SIZE,
  };
  const [upcoming, first] = await Promise.all([renderUpcoming(), api("GET", `/v1/jobs${query(filters)}`)]);
  const tableBox = el("div", { id: "job-table" }, jobTable(first.jobs, "job-table", true));
  // Bulk actions on the checked rows of this page: one request per job, the failures listed.
  const bulk = (name, label, method, suffix) => {
    const button = el("button", { type: "button", class: name === "cancel" ? "danger" : undefined, "data-testid": `bulk-${name}` }, label);
    button.addEventListener("click", async () => {
      const ids = [...tableBox.querySelectorAll("input.select-job:checked")].map((c) => c.value);
      if (!ids.length) {
        setStatus("Select jobs first.");
        return;
      }
      if (name === "cancel" && !window.confirm(`Cancel ${ids.length} jobs? They will not fire again.`)) return;
      button.disabled = true;
      const failed = [];
      for (const id of ids) {
        try {
          await api(method, `/v1/jobs/${encodeURIComponent(id)}${suffix}`);
        } catch (err) {
          failed.push(`${shortId(id)}: ${err.message}`);
        }
      }
      button.disabled = false;
      await render();
      if (failed.length) showError(new Error(`${label}: ${ids.length - failed.length} done; ${failed.length} failed: ${failed.join("; ")}`));
      else setStatus(`${label}: ${ids.length} jobs.`);
    });
    return button;
  };
  const bulkBar = el(
    "div",
    { class: "actions", role: "group", "aria-label": "Bulk actions on the selected jobs" },
    bulk("pause", "Pause selected", "POST", "/pause"),
    bulk("resume", "Resume selected", "POST", "/resume"),
    bulk("cancel", "Cancel selected", "DELETE", ""),
  );
  const pageInfo = el("span", { class: "muted small", "data-testid": "page-info" }, `Page 1 · ${first.jobs.length} jobs`);
  let cursor = first.next_cursor;
  let pageNo = 1;
  const history = [];
  const next = el("button", { type: "button", "data-testid": "next-page", disabled: !cursor }, "Next page →");
  const prev = el("button", { type: "button", "data-testid": "prev-page", disabled: true }, "← Previous page");
  const load = async (at) => {
    const page = await api("GET", `/v1/jobs${query({ ...filters, cursor: at })}`);
    tableBox.replaceChildren(jobTable(page.jobs, "job-table", true));
    pageInfo.textContent = `Page ${pageNo} · ${page.jobs.length} jobs`;
    cursor = page.next_cursor;
    next.disabled = !cursor;
    prev.disabled = pageNo === 1;
  };
  next.addEventListener("click", () => {
    history.push(cursor);
    pageNo += 1;
    load(cursor).catch(showError);
  });
  prev.addEventListener("click", () => {
    history.pop();
    pageNo -= 1;
    load(history[history.length - 1]).catch(showError);
  });
  return [
    el("h1", {}, "Jobs"),
    upcoming,
    el(
      "section",
      { class: "card", "aria-labelledby": "jobs-title" },
      el("h2", { id: "jobs-title" }, "All jobs"),
      filterForm(params),
      bulkBar,
      tableBox,
      el("div", { class: "pager" }, prev, pageInfo, next),
    ),
  ];
}

// Job ----------------------------------------------------------------------------------------

function detail(rows) {
  return el(
    "dl",
    { class: "details" },
    rows.filter(Boolean).map(([k, v, testid]) => [el("dt", {}, k), el("dd", { "data-testid": testid }, v)]),
  );
}

function runsTable(runs) {
  if (!runs.length) return el("p", { class: "muted", "data-testid": "runs-empty" }, "No delivery attempts yet.");
  return el(
    "table",
    { "data-testid": "runs-table" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ["Started", "Due", "Attempt", "Status", "Latency", "Error", "Outcome"].map((h) => el("th", { scope: "col" }, h)),
      ),
    ),
    el(
      "tbody",
      {},
      runs.map((r) =>
        el(
          "tr",
          { "data-testid": "run-row" },
          el("td", {}, timeCell(r.started_at)),
          el("td", {}, timeCell(r.due_at)),
          el("td", { class: "num" }, String(r.attempt)),
          el("td", { class: "num", "data-testid": "run-status" }, r.status_code == null ? "—" : String(r.status_code)),
          el("td", { class: "num" }, r.latency_ms == null ? "—" : `${r.latency_ms} ms`),
          el(
            "td",
            { class: "error-text" },
            r.error || "",
            r.response
              ? el(
                  "details",
                  {},
                  el("summary", { class: "small" }, "answer"),
                  el("pre", { class: "code small", "data-testid": "run-response" }, r.response),
                )
              : null,
          ),
          el("td", {}, el("span", { class: `badge outcome-${r.outcome}`, "data-testid": "run-outcome" }, String(r.outcome))),
        ),
      ),
    ),
  );
}

async function renderJob(id) {
  const path = `/v1/jobs/${encodeURIComponent(id)}`;
  const [job, runs, letters] = await Promise.all([
    api("GET", path),
    api("GET", `${path}/runs${query({ limit: 100 })}`),
    api("GET", `/v1/dead-letters${query({ limit: 1000 })}`),
  ]);
  const ownLetters = letters.dead_letters.filter((d) => d.job_id === job.id);
  const jobZone = job.schedule && job.schedule.timezone;

  let preview;
  if (job.state === "active" || job.state === "paused") {
    try {
      const p = await api("POST", "/v1/schedules/preview", { schedule: job.schedule, count: 10 });
      preview = { description: p.description, times: p.fire_times };
    } catch (err) {
      preview = { description: scheduleSummary(job.schedule), times: [], note: err.message };
    }
  } else {
    preview = { description: scheduleSummary(job.schedule), times: [], note: `The job is ${job.state}; it fires no more.` };
  }

  const action = (name, label, enabled, method = "POST", suffix = `/${name}`) => {
    const button = el(
      "button",
      { type: "button", class: name === "cancel" ? "danger" : undefined, "data-testid": `action-${name}`, disabled: !enabled },
      label,
    );
    button.addEventListener("click", async () => {
      if (name === "cancel" && !window.confirm("Cancel this job? It will not fire again.")) return;
      button.disabled = true;
      try {
        await api(method, `${path}${suffix}`);
        await render();
        setStatus(`Job ${label.toLowerCase()}: done.`);
      } catch (err) {
        button.disabled = false;
        showError(err);
      }
    });
    return button;
  };
  const live = job.state === "active" || job.state === "paused";

  return [
    el("p", { class: "crumbs" }, el("a", { href: "#/jobs" }, "← Jobs")),
    el("h1", {}, "Job ", el("span", { class: "mono", "data-testid": "job-id" }, job.id), " ", stateBadge(job.state)),
    el(
      "div",
      { class: "actions", role: "group", "aria-label": "Job actions" },
      action("pause", "Pause", job.state === "active"),
      action("resume", "Resume", job.state === "paused"),
      action("trigger", "Trigger now", job.state !== "cancelled"),
      action("cancel", "Cancel", live, "DELETE", ""),
    ),
    el(
      "div",
      { class: "grid two" },
      el(
        "section",
        { class: "card", "aria-labelledby": "job-details-title" },
        el("h2", { id: "job-details-title" }, "Details"),
        detail([
          ["Type", job.type || "—", "job-detail-type"],
          ["Key", job.key || "—", "job-detail-key"],
          ["Namespace", job.namespace, "job-detail-namespace"],
          ["Target", targetText(job.target), "job-detail-target"],
          ["Next due", job.next_due_at ? `${fmtTime(job.next_due_at)} (${fmtRelative(job.next_due_at)})` : "—", "job-detail-next"],
          job.next_attempt_at
            ? [
                "Retrying",
                el(
                  "span",
                  {},
                  `attempt ${job.attempt} failed${job.last_error ? `: ${job.last_error}` : ""}; next attempt ${fmtTime(job.next_attempt_at)} (${fmtRelative(job.next_attempt_at)})`,
                ),
                "job-detail-retrying",
              ]
            : null,
          // Outside a backoff (the job failed, or a recurring job moved on), the latest failure.
          job.last_error && !job.next_attempt_at
            ? ["Last error", el("span", { class: "error-text" }, job.last_error), "job-detail-last-error"]
            : null,
          ["Runs / skipped", `${job.runs} / ${job.skipped}`, "job-detail-runs"],
          ["Retry", `${job.retry.max_attempts} attempts, backoff ${job.retry.initial_backoff}–${job.retry.max_backoff}`, "job-detail-retry"],
          ["Created", fmtTime(job.created_at), "job-detail-created"],
          ["Updated", fmtTime(job.updated_at), "job-detail-updated"],
        ]),
      ),
      el(
        "section",
        { class: "card", "aria-labelledby": "schedule-title" },
        el("h2", { id: "schedule-title" }, "Schedule"),
        el("p", { class: "lead", "data-testid": "schedule-description" }, preview.description),
        el(
          "p",
          { class: "muted small", "data-testid": "times-zone" },
          jobZone && jobZone !== VIEWER_ZONE
            ? `Times in your zone (${VIEWER_ZONE}), and in the job's (${jobZone}).`
            : `Times in your zone (${VIEWER_ZONE}).`,
        ),
        el("pre", { class: "code small" }, JSON.stringify(job.schedule, null, 2)),
        preview.note ? el("p", { class: "muted small", "data-testid": "fire-times-note" }, preview.note) : null,
        preview.times.length
          ? [
              el("h3", {}, `Next ${preview.times.length} fire times`),
              el(
                "ol",
                { class: "fire-times", "data-testid": "fire-times" },
                preview.times.map((t) =>
                  el(
                    "li",
                    { "data-testid": "fire-time" },
                    timeCell(t),
                    " ",
                    jobZone && jobZone !== VIEWER_ZONE
                      ? el("span", { class: "small", "data-testid": "fire-time-job-zone" }, `· ${fmtTimeIn(t, jobZone)} `)
                      : null,
                    el("span", { class: "muted small" }, fmtRelative(t)),
                  ),
                ),
              ),
            ]
          : null,
      ),
    ),
    el(
      "section",
      { class: "card", "aria-labelledby": "payload-title" },
      el("h2", { id: "payload-title" }, "Payload"),
      el("pre", { class: "code", "data-testid": "payload" }, JSON.stringify(job.payload, null, 2)),
    ),
    el(
      "section",
      { class: "card", "aria-labelledby": "runs-title" },
      el("h2", { id: "runs-title" }, `Runs (${runs.runs.length}${runs.runs.length === 100 ? ", newest" : ""})`),
      runsTable(runs.runs),
    ),
    ownLetters.length
      ? el(
          "section",
          { class: "card", "aria-labelledby": "job-letters-title", "data-testid": "job-dead-letters" },
          el("h2", { id: "job-letters-title" }, `Dead letters (${ownLetters.length})`),
          deadLetterTable(ownLetters),
        )
      : null,
  ].filter(Boolean);
}

// Dead letters -------------------------------------------------------------------------------

// Rows of dead letters with replay and delete buttons; an emptied table gives way to a note.
// `onRemoved(left)` hears how many rows are left after each one goes.
function deadLetterTable(letters, onRemoved = () => {}) {
  const empty = () => el("p", { class: "muted", "data-testid": "dead-letters-empty" }, "No dead letters. Nothing failed for good.");
  const removed = (row) => {
    const tbody = row.parentElement;
    row.remove();
    const left = tbody ? tbody.children.length : 0;
    if (tbody && !left) tbody.closest("table").replaceWith(empty());
    onRemoved(left);
  };
  const rows = letters.map((d) => {
    const replay = el("button", { type: "button", "data-testid": "replay", "aria-label": `Replay dead letter ${d.id}` }, "Replay");
    const remove = el("button", { type: "button", class: "danger", "data-testid": "delete", "aria-label": `Delete dead letter ${d.id}` }, "Delete");
    const row = el(
      "tr",
      { "data-testid": "dead-letter-row", "data-id": d.id },
      el("td", { class: "num" }, d.id),
      el("td", {}, jobLink(d.job_id, shortId(d.job_id))),
      el("td", {}, d.type || el("span", { class: "muted" }, "—")),
      el("td", {}, timeCell(d.due_at)),
      el("td", { class: "num" }, String(d.attempts)),
      el("td", { class: "error-text" }, d.reason || ""),
      el("td", { class: "row-actions" }, replay, " ", remove),
    );
    replay.addEventListener("click", async () => {
      replay.disabled = remove.disabled = true;
      try {
        const job = await api("POST", `/v1/dead-letters/${encodeURIComponent(d.id)}/replay`);
        removed(row);
        const status = document.getElementById("status");
        status.dataset.kind = "info";
        status.replaceChildren(`Dead letter ${d.id} replayed as job `, jobLink(job.id), ".");
      } catch (err) {
        replay.disabled = remove.disabled = false;
        showError(err);
      }
    });
    remove.addEventListener("click", async () => {
      if (!window.confirm(`Delete dead letter ${d.id}? Its occurrence will not be delivered.`)) return;
      replay.disabled = remove.disabled = true;
      try {
        await api("DELETE", `/v1/dead-letters/${encodeURIComponent(d.id)}`);
        removed(row);
        setStatus(`Dead letter ${d.id} deleted.`);
      } catch (err) {
        replay.disabled = remove.disabled = false;
        showError(err);
      }
    });
    return row;
  });
  if (!rows.length) return empty();
  return el(
    "table",
    { "data-testid": "dead-letters-table" },
    el(
      "thead",
      {},
      el("tr", {}, ["Id", "Job", "Type", "Due", "Attempts", "Reason", ""].map((h) => el("th", { scope: "col" }, h))),
    ),
    el("tbody", {}, rows),
  );
}

async function renderDeadLetters(params) {
  const cursor = params.get("cursor") || undefined;
  const page = await api("GET", `/v1/dead-letters${query({ limit: PAGE_SIZE, cursor })}`);
  // Only over a list with something in it; it goes with the last row replayed or deleted.
  const replayAll = el("button", { type: "button", "data-testid": "replay-all" }, `Replay all ${page.dead_letters.length} on this page`);
  const bulkActions = page.dead_letters.length
    ? el("div", { class: "actions", role: "group", "aria-label": "Bulk actions" }, replayAll)
    : null;
  const rowsLeft = (left) => {
    if (!left) bulkActions?.remove();
    else replayAll.textContent = `Replay all ${left} on this page`;
  };
  replayAll.addEventListener("click", async () => {
    // The letters still shown: one replayed or deleted on its own row is gone already.
    const shown = new Set([...document.querySelectorAll('[data-testid="dead-letter-row"]')].map((r) => r.dataset.id));
    const letters = page.dead_letters.filter((l) => shown.has(String(l.id)));
    if (!window.confirm(`Replay ${letters.length} dead letters? Each becomes a new one-off job due now.`)) return;
    replayAll.disabled = true;
    let done = 0;
    const failed = [];
    for (const d of letters) {
      try {
        await api("POST", `/v1/dead-letters/${encodeURIComponent(d.id)}/replay`);
        done += 1;
      } catch (err) {
        failed.push(`${d.id}: ${err.message}`);
      }
    }
    await render();
    if (failed.length) showError(new Error(`Replayed ${done}; ${failed.length} failed: ${failed.join("; ")}`));
    else setStatus(`Replayed ${done} dead letters.`);
  });
  return [
    el("h1", {}, "Dead letters"),
    el(
      "section",
      { class: "card" },
      el("p", { class: "muted small" }, "Occurrences whose last delivery attempt failed. Replay creates a new one-off job due now; delete drops the occurrence."),
      bulkActions,
      deadLetterTable(page.dead_letters, rowsLeft),
      el(
        "div",
        { class: "pager" },
        cursor ? el("a", { href: "#/dead-letters", "data-testid": "first-page" }, "← First page") : null,
        page.next_cursor
          ? el("a", { href: `#/dead-letters?cursor=${encodeURIComponent(page.next_cursor)}`, "data-testid": "next-page" }, "Next page →")
          : null,
      ),
    ),
  ];
}

// Queues -------------------------------------------------------------------------------------

async function renderQueues() {
  // The list comes a page at a time; the overview shows every queue.
  const queues = [];
  let cursor;
  do {
    const page = await api("GET", `/v1/queues${query({ limit: 1000, cursor })}`);
    queues.push(...page.queues);
    cursor = page.next_cursor || undefined;
  } while (cursor);
  const rows = queues.map((q) =>
    el(
      "tr",
      { "data-testid": "queue-row", "data-queue": q.name },
      el("td", {}, el("a", { href: `#/queues/${encodeURIComponent(q.name)}`, class: "mono", "data-testid": "queue-link" }, q.name)),
      el("td", { class: "num", "data-testid": "queue-available" }, fmtNumber(q.available)),
      el("td", { class: "num", "data-testid": "queue-in-flight" }, fmtNumber(q.in_flight)),
      el("td", { class: "num", "data-testid": "queue-scheduled" }, fmtNumber(q.scheduled)),
      el("td", { class: "num", "data-testid": "queue-oldest" }, fmtAge(q.oldest_available_age_ms)),
    ),
  );
  const table = rows.length
    ? el(
        "table",
        { "data-testid": "queues-table" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            ["Queue", "Available", "In flight", "Scheduled", "Oldest available"].map((h) => el("th", { scope: "col" }, h)),
          ),
        ),
        el("tbody", {}, rows),
      )
    : el("p", { class: "muted", "data-testid": "queues-empty" }, "No queue has active jobs in this namespace.");
  return [
    el("h1", {}, "Queues"),
    el(
      "section",
      { class: "card" },
      el(
        "p",
        { class: "muted small" },
        "Pull queues of this namespace: messages due and waiting for a worker (available), leased by a worker (in flight), and not yet due (scheduled).",
      ),
      table,
    ),
  ];
}

// Queue ----------------------------------------------------------------------------------------

// When a message is (again) available to a worker: its available time, or a leased one's lease
// end. Oldest first; ties by creation (the id).
function availableAt(m) {
  const at = m.status === "leased" ? m.leased_until : m.available_at;
  return at ? new Date(at).getTime() : Infinity;
}

function byAvailability(a, b) {
  return availableAt(a) - availableAt(b) || (a.job_id < b.job_id ? -1 : a.job_id > b.job_id ? 1 : 0);
}

function messageRow(m) {
  const when =
    m.status === "leased"
      ? ["lease lapses ", timeCell(m.leased_until), el("div", { class: "muted small" }, fmtRelative(m.leased_until))]
      : m.available_at
        ? [timeCell(m.available_at), el("div", { class: "muted small" }, fmtRelative(m.available_at))]
        : "—";
  return el(
    "tr",
    { "data-testid": "message-row", "data-id": m.job_id, "data-status": m.status },
    el(
      "td",
      {},
      jobLink(m.job_id, m.key || shortId(m.job_id)),
      m.key ? el("div", { class: "muted small mono" }, shortId(m.job_id)) : null,
    ),
    el("td", {}, m.type || el("span", { class: "muted" }, "—")),
    el("td", {}, el("span", { class: `badge message-${m.status}`, "data-testid": "message-status" }, String(m.status))),
    el("td", {}, timeCell(m.due_at)),
    el("td", { "data-testid": "message-when" }, when),
    el("td", { class: "num", "data-testid": "message-attempts" }, `${m.failed_attempts} / ${m.max_attempts}`),
    el("td", { class: "error-text", "data-testid": "message-error" }, m.last_error || ""),
  );
}

async function renderQueue(name, params) {
  const cursor = params.get("cursor") || undefined;
  const path = `/v1/queues/${encodeURIComponent(name)}`;
  const [counts, page] = await Promise.all([
    api("GET", path),
    api("GET", `${path}/messages${query({ limit: PAGE_SIZE, cursor })}`),
  ]);
  const table = page.messages.length
    ? el(
        "table",
        { "data-testid": "messages-table" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            ["Job", "Type", "Status", "Due", "Available / lease", "Failed attempts", "Last error"].map((h) => el("th", { scope: "col" }, h)),
          ),
        ),
        el("tbody", {}, [...page.messages].sort(byAvailability).map(messageRow)),
      )
    : el("p", { class: "muted", "data-testid": "messages-empty" }, cursor ? "No more messages." : "No messages: no active job targets this queue.");
  const here = `#/queues/${encodeURIComponent(name)}`;
  return [
    el("p", { class: "crumbs" }, el("a", { href: "#/queues" }, "← Queues")),
    el("h1", {}, "Queue ", el("span", { class: "mono", "data-testid": "queue-name" }, name)),
    el(
      "section",
      { class: "grid stats", "aria-label": "Counts" },
      stat("Available", "queue-count-available", fmtNumber(counts.available), "due, waiting for a worker"),
      stat("In flight", "queue-count-in-flight", fmtNumber(counts.in_flight), "leased by a worker"),
      stat("Scheduled", "queue-count-scheduled", fmtNumber(counts.scheduled), "not due yet"),
      stat("Oldest available", "queue-count-oldest", fmtAge(counts.oldest_available_age_ms), "waiting the longest"),
    ),
    el(
      "section",
      { class: "card", "aria-labelledby": "messages-title" },
      el("h2", { id: "messages-title" }, "Messages"),
      el(
        "p",
        { class: "muted small" },
        `Oldest first by when each is available to a worker (a leased one when its lease lapses), ${PAGE_SIZE} a page; pages follow the order the messages were created in. A leased message comes back when its lease lapses unless its worker acks, nacks or extends it first.`,
      ),
      table,
      el(
        "div",
        { class: "pager" },
        cursor ? el("a", { href: here, "data-testid": "first-page" }, "← First page") : null,
        page.next_cursor
          ? el("a", { href: `${here}?cursor=${encodeURIComponent(page.next_cursor)}`, "data-testid": "next-page" }, "Next page →")
          : null,
      ),
    ),
  ];
}

// ---------------------------------------------------------------------------------------------

setupCredentials();
window.addEventListener("hashchange", render);
startSampling();
render();
