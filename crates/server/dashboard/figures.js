// The node's figures over time: GET /v1/summary sampled every few seconds in the background (a
// window of the last minutes kept), the rates between samples (fires per second, mean and p99 fire
// lateness), and the sparkline that charts them.

import { ApiError, api } from "./api.js";
import { svg } from "./dom.js";
import { fmtNumber } from "./format.js";

export const SAMPLE_EVERY_MS = 3000;
export const SAMPLE_WINDOW_MS = 5 * 60 * 1000;

// Oldest first; each as toSample makes it.
export const samples = [];

const listeners = [];

// `sampled()` hears of each new sample, `failed(err)` of each failed one.
export function onSample(sampled, failed) {
  listeners.push({ sampled, failed });
}

// One summary as the charts read it: counters and gauges by name, lateness buckets cumulative by
// upper bound, the last one +Inf (all observations).
function toSample(summary) {
  const { node, store } = summary;
  const lateness = node.fire_lateness;
  return {
    at: Date.now(),
    outcomes: { ...node.deliveries },
    latenessSum: lateness.sum_seconds,
    latenessCount: lateness.count,
    buckets: [...lateness.buckets.map((b) => [b.le, b.count]), [Infinity, lateness.count]],
    inFlight: node.in_flight,
    timerQueue: node.timer_queue,
    backlog: store.due_backlog,
    backlogAgeMs: store.due_backlog_age_seconds * 1000,
    jobsByState: { ...store.jobs },
    queueAvailable: store.queue_messages.available,
    queueInFlight: store.queue_messages.in_flight,
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

export function rates() {
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
    let summary;
    try {
      summary = await api("GET", "/v1/summary");
    } catch (err) {
      // The figures cover every namespace: with API keys configured they need an admin key.
      if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
        throw new Error("node metrics need an admin API key");
      }
      throw err;
    }
    samples.push(toSample(summary));
    const cutoff = Date.now() - SAMPLE_WINDOW_MS;
    while (samples.length > 2 && samples[0].at < cutoff) samples.shift();
    for (const l of listeners) l.sampled();
  } catch (err) {
    for (const l of listeners) l.failed(err);
  }
}

export function startSampling() {
  if (sampling) return;
  sample();
  sampling = window.setInterval(sample, SAMPLE_EVERY_MS);
}

export function sparkline(values, { label, testid, unit }) {
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
