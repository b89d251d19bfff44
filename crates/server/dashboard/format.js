// Formatting: instants (in the viewer's zone or a job's), relative times, numbers and ages; how a
// schedule and a target read; job-state badges, job links and short ids.

import { el } from "./dom.js";

// The states a job can be in, in the order the dashboard lists them.
export const JOB_STATES = ["active", "paused", "completed", "failed", "cancelled"];

export function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// The viewer's zone, as the browser names it ("Europe/Berlin").
export const VIEWER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

// An instant in an IANA zone, with the zone's abbreviation or offset ("09:30 CET").
export function fmtTimeIn(iso, zone) {
  if (!iso) return "—";
  const d = new Date(iso);
  try {
    return d.toLocaleString(undefined, { timeZone: zone, timeZoneName: "short" });
  } catch {
    return fmtTime(iso);
  }
}

export function fmtRelative(iso) {
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

export function timeCell(iso) {
  return el("time", { datetime: iso || undefined, title: iso || undefined }, fmtTime(iso));
}

export function fmtNumber(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  return n.toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function scheduleSummary(s) {
  if (!s) return "";
  if (s.at) return `once at ${fmtTime(s.at)}`;
  if (s.cron) return `cron ${s.cron}${s.timezone ? ` (${s.timezone})` : ""}`;
  if (s.every) return `every ${s.every}`;
  if (s.after) return `after ${s.after}`;
  return JSON.stringify(s);
}

export function stateBadge(state) {
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

export function targetText(target) {
  if (target && target.webhook) return webhookText(target.webhook);
  if (target && target.queue) return `queue ${target.queue}`;
  for (const [kind, text] of Object.entries(RESOURCE_FIELDS)) {
    if (target && target[kind]) return `${kind} via ${target[kind].connection}: ${text(target[kind])}`;
  }
  return JSON.stringify(target);
}

export function fmtAge(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function jobLink(id, text) {
  return el("a", { href: `#/jobs/${encodeURIComponent(id)}`, class: "mono", title: id }, text || id);
}

// A job's labels as `key=value` chips, each a link to the jobs it selects; null without labels.
export function labelChips(labels, testid = "job-label") {
  const pairs = Object.entries(labels || {});
  if (!pairs.length) return null;
  return el(
    "span",
    { class: "labels" },
    pairs.map(([k, v]) =>
      el("a", { class: "label mono", href: `#/jobs?${new URLSearchParams({ label: `${k}=${v}` })}`, "data-testid": testid }, `${k}=${v}`),
    ),
  );
}

// A job id is time-ordered: its first characters are the same for jobs created close together,
// so lists show its random tail instead.
export function shortId(id) {
  return "…" + id.slice(-12);
}
