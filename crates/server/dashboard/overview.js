// The overview: failures waiting, open breakers, bus connections and live nodes, over the node's
// figures (throughput, lateness, counters, jobs by state) redrawn as each summary sample comes.

import { api, query, unlessRefused } from "./api.js";
import { el, showError, stat } from "./dom.js";
import { SAMPLE_EVERY_MS, SAMPLE_WINDOW_MS, onSample, rates, samples, sparkline, startSampling } from "./figures.js";
import { JOB_STATES, fmtAge, fmtNumber, timeCell } from "./format.js";
import { nodesCard } from "./nodes.js";
import { currentView } from "./router.js";

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
      `Jobs by state count the whole store (every namespace), read at most every 10 s. Sampled from /v1/summary every ${SAMPLE_EVERY_MS / 1000} s in this tab; charts show the last ${SAMPLE_WINDOW_MS / 60000} minutes (${series.length} intervals). Counters are node-wide.`,
    ),
  );
}

// A card's note in place of what the key's role may not read: the node's 403 message.
function refusedNote(err, testid) {
  return el("p", { class: "muted", "data-testid": testid }, err.message);
}

export async function renderOverview() {
  startSampling();
  let lettersRefused = null;
  let breakersRefused = null;
  let connectionsRefused = null;
  const [letters, breakerList, connectionList] = await Promise.all([
    unlessRefused(api("GET", `/v1/dead-letters${query({ limit: 1000 })}`), (e) => (lettersRefused = e)),
    unlessRefused(api("GET", "/v1/breakers"), (e) => (breakersRefused = e)),
    unlessRefused(api("GET", "/v1/connections"), (e) => (connectionsRefused = e)),
  ]);
  const count = letters ? letters.dead_letters.length : 0;
  const failures = el(
    "div",
    { class: "card stat failures" },
    el("span", { class: "stat-label", id: "stat-failures-label" }, "Failures waiting (dead letters)"),
    el(
      "span",
      { class: "stat-value", "data-testid": "stat-dead-letters", "aria-labelledby": "stat-failures-label" },
      lettersRefused ? "—" : letters.next_cursor ? `${count}+` : String(count),
    ),
    lettersRefused ? refusedNote(lettersRefused, "dead-letters-refused") : null,
    el("a", { href: "#/dead-letters", class: "stat-hint" }, "Review dead letters →"),
  );
  const breakers = breakerList ? breakerList.breakers : [];
  const held = el(
    "div",
    { class: "card breakers", "data-testid": "breakers" },
    el("span", { class: "stat-label", id: "breakers-label" }, "Destinations held back (open breakers)"),
    breakersRefused
      ? refusedNote(breakersRefused, "breakers-refused")
      : breakers.length
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
  const connections = connectionList ? connectionList.connections : [];
  const buses = el(
    "div",
    { class: "card connections", "data-testid": "connections" },
    el("span", { class: "stat-label", id: "connections-label" }, "Bus and cloud connections"),
    connectionsRefused
      ? refusedNote(connectionsRefused, "connections-refused")
      : connections.length
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

// Each sample redraws the figures while the overview is shown; a failed one says why there.
onSample(
  () => {
    if (currentView === "overview") renderOverviewStats();
  },
  (err) => {
    if (currentView === "overview") showError(err);
  },
);
