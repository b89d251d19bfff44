// One job's page: its details, schedule with the next fire times (in the viewer's zone and the
// job's), payload, runs and dead letters, and the pause, resume, trigger and cancel actions.

import { api, query } from "./api.js";
import { deadLetterTable } from "./dead-letters.js";
import { el, setStatus, showError } from "./dom.js";
import { VIEWER_ZONE, fmtRelative, fmtTime, fmtTimeIn, labelChips, scheduleSummary, stateBadge, targetText, timeCell } from "./format.js";
import { render } from "./router.js";

// A callback as a line: its target, and what it adds to the default (dead letters only, no
// payload).
function callbackText(callback, failure) {
  const extras = [
    failure && callback.every_attempt ? "every failed attempt" : null,
    callback.include_payload ? "with the payload" : null,
    `${callback.retry.max_attempts} attempts`,
  ].filter(Boolean);
  return `${targetText(callback.target)} (${extras.join(", ")})`;
}

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
          el(
            "td",
            {},
            el("span", { class: `badge outcome-${r.outcome}`, "data-testid": "run-outcome" }, String(r.outcome)),
            // A run of an occurrence a backfill ran (`POST /v1/jobs/{id}/backfill`).
            r.backfill ? el("span", { class: "badge", "data-testid": "run-backfill" }, "backfill") : null,
          ),
        ),
      ),
    ),
  );
}

export async function renderJob(id) {
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
      // The job's id: a jittered schedule's fire times are the job's own.
      // An anchored schedule shows the instant it resolved to beside its anchor; the preview
      // takes the instant (a schedule gives one or the other).
      const { anchor: _anchor, offset: _offset, ...resolved } = job.schedule;
      const p = await api("POST", "/v1/schedules/preview", { schedule: resolved, count: 10, job_id: job.id });
      preview = { description: p.description, times: p.fire_times, nominal: p.nominal_times || null };
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
          job.labels ? ["Labels", labelChips(job.labels), "job-detail-labels"] : null,
          ["Namespace", job.namespace, "job-detail-namespace"],
          ["Target", targetText(job.target), "job-detail-target"],
          ["Next due", job.next_due_at ? `${fmtTime(job.next_due_at)} (${fmtRelative(job.next_due_at)})` : "—", "job-detail-next"],
          // With jitter or a calendar's roll, the pending occurrence fires away from its due time.
          job.next_fire_at
            ? ["Next fire", `${fmtTime(job.next_fire_at)} (${fmtRelative(job.next_fire_at)}${[job.schedule.jitter ? `, jitter ${job.schedule.jitter}` : "", job.schedule.calendar ? `, calendar ${job.schedule.calendar}` : ""].join("")})`, "job-detail-next-fire"]
            : null,
          job.schedule && job.schedule.anchor
            ? [
                "Anchor",
                el(
                  "span",
                  {},
                  el("a", { href: `#/jobs?anchor=${encodeURIComponent(job.schedule.anchor)}` }, job.schedule.anchor),
                  ` (offset ${job.schedule.offset || "0s"}; the job moves when the anchor does)`,
                ),
                "job-detail-anchor",
              ]
            : null,
          job.schedule && job.schedule.calendar
            ? ["Calendar", `${job.schedule.calendar} (roll: ${job.schedule.roll || "skip"})`, "job-detail-calendar"]
            : null,
          job.next_attempt_at && job.next_attempt_at !== job.next_fire_at
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
          job.last_error && (!job.next_attempt_at || job.next_attempt_at === job.next_fire_at)
            ? ["Last error", el("span", { class: "error-text" }, job.last_error), "job-detail-last-error"]
            : null,
          ["Runs / skipped", `${job.runs} / ${job.skipped}`, "job-detail-runs"],
          // Meaningful for recurring jobs only; older nodes' answers have no `overlap`.
          job.overlap && !job.schedule.at
            ? ["Overlap", job.overlap.replace("_", " "), "job-detail-overlap"]
            : null,
          ["Retry", `${job.retry.max_attempts} attempts, backoff ${job.retry.initial_backoff}–${job.retry.max_backoff}`, "job-detail-retry"],
          // Callbacks: where the job's failures and successes are reported.
          job.on_failure
            ? ["On failure", callbackText(job.on_failure, true), "job-detail-on-failure"]
            : null,
          job.on_success
            ? ["On success", callbackText(job.on_success, false), "job-detail-on-success"]
            : null,
          // A callback job: the job whose occurrence it reports.
          job.callback_of
            ? [
                "Callback of",
                el("a", { href: `#/jobs/${encodeURIComponent(job.callback_of.job_id)}`, class: "mono" }, `${job.callback_of.job_id} (${job.callback_of.event})`),
                "job-detail-callback-of",
              ]
            : null,
          // A job delivering one occurrence of an `overlap: allow` job (its runs are that job's).
          job.occurrence_of
            ? [
                "Occurrence of",
                el(
                  "span",
                  {},
                  el("a", { href: `#/jobs/${encodeURIComponent(job.occurrence_of.job_id)}`, class: "mono" }, job.occurrence_of.job_id),
                  ` due ${fmtTime(job.occurrence_of.due_at)} (runs recorded there)`,
                ),
                "job-detail-occurrence-of",
              ]
            : null,
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
                preview.times.map((t, i) =>
                  el(
                    "li",
                    { "data-testid": "fire-time" },
                    timeCell(t),
                    " ",
                    jobZone && jobZone !== VIEWER_ZONE
                      ? el("span", { class: "small", "data-testid": "fire-time-job-zone" }, `· ${fmtTimeIn(t, jobZone)} `)
                      : null,
                    el("span", { class: "muted small" }, fmtRelative(t)),
                    preview.nominal
                      ? el("span", { class: "muted small", "data-testid": "fire-time-due" }, ` · due ${fmtTime(preview.nominal[i])}`)
                      : null,
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
