// The jobs page: the next hour's timeline, the filtered and paged list of jobs, and bulk pause,
// resume and cancel of the rows checked.

import { PAGE_SIZE, api, query } from "./api.js";
import { el, setStatus, showError, svg } from "./dom.js";
import { JOB_STATES, fmtRelative, fmtTime, jobLink, labelChips, scheduleSummary, shortId, stateBadge, timeCell } from "./format.js";
import { render } from "./router.js";

const TIMELINE_WINDOW_MS = 60 * 60 * 1000;
const TIMELINE_LIMIT = 200;

function filterForm(params) {
  const state = el(
    "select",
    { id: "filter-state", name: "state", "data-testid": "filter-state" },
    el("option", { value: "" }, "any state"),
    JOB_STATES.map((s) => el("option", { value: s, selected: params.get("state") === s }, s)),
  );
  const type = el("input", {
    id: "filter-type",
    name: "type",
    type: "search",
    placeholder: "exact type, e.g. reminder.flight",
    value: params.get("type") || "",
    "data-testid": "filter-type",
  });
  // Label selectors, space-separated: `tenant=acme kind` (all must match).
  const labels = el("input", {
    id: "filter-label",
    name: "label",
    type: "search",
    placeholder: "tenant=acme kind",
    value: params.getAll("label").join(" "),
    "data-testid": "filter-label",
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
    el("label", {}, "Labels ", labels),
    el("label", { class: "check" }, upcoming, " due from now on"),
    el("button", { type: "submit", "data-testid": "filter-submit" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    if (state.value) q.set("state", state.value);
    if (type.value.trim()) q.set("type", type.value.trim());
    for (const selector of labels.value.split(/\s+/).filter(Boolean)) q.append("label", selector);
    if (upcoming.checked) q.set("upcoming", "1");
    // An anchor's page keeps its anchor through a new search.
    if (params.get("anchor")) q.set("anchor", params.get("anchor"));
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
    el(
      "td",
      {},
      el("span", { "data-testid": "job-type" }, job.type || el("span", { class: "muted" }, "—")),
      job.labels ? el("div", { class: "small" }, labelChips(job.labels, "job-row-label")) : null,
    ),
    el("td", {}, stateBadge(job.state)),
    el("td", {}, scheduleSummary(job.schedule)),
    el(
      "td",
      {},
      job.next_due_at
        ? [
            timeCell(job.next_due_at),
            el("div", { class: "muted small" }, fmtRelative(job.next_due_at)),
            // With jitter the occurrence fires later than its due time.
            job.next_fire_at ? el("div", { class: "muted small", "data-testid": "job-next-fire" }, `fires ${fmtTime(job.next_fire_at)}`) : null,
          ]
        : "—",
    ),
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

export async function renderJobs(params) {
  const filters = {
    state: params.get("state") || undefined,
    type: params.get("type") || undefined,
    label: params.getAll("label"),
    due_after: params.get("upcoming") === "1" ? new Date().toISOString() : undefined,
    anchor: params.get("anchor") || undefined,
    limit: PAGE_SIZE,
  };
  const [upcoming, first, anchor] = await Promise.all([
    renderUpcoming(),
    api("GET", `/v1/jobs${query(filters)}`),
    filters.anchor ? api("GET", `/v1/anchors/${encodeURIComponent(filters.anchor)}`) : null,
  ]);
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
  // With ?anchor=NAME this is the anchor's page: its instant, and the jobs that refer to it.
  const anchorCard = anchor
    ? el(
        "section",
        { class: "card", "aria-labelledby": "anchor-title", "data-testid": "anchor-card" },
        el("h2", { id: "anchor-title" }, "Anchor ", el("span", { class: "mono" }, anchor.name)),
        el(
          "p",
          { "data-testid": "anchor-at" },
          `At ${fmtTime(anchor.at)} (${fmtRelative(anchor.at)}); last moved ${fmtTime(anchor.updated_at)}. Moving it re-times its active and paused jobs, listed below.`,
        ),
        el("p", {}, el("a", { href: "#/jobs" }, "All jobs")),
      )
    : null;
  return [
    el("h1", {}, anchor ? `Jobs on anchor ${anchor.name}` : "Jobs"),
    anchorCard,
    upcoming,
    el(
      "section",
      { class: "card", "aria-labelledby": "jobs-title" },
      el("h2", { id: "jobs-title" }, anchor ? "The anchor's jobs" : "All jobs"),
      filterForm(params),
      bulkBar,
      tableBox,
      el("div", { class: "pager" }, prev, pageInfo, next),
    ),
  ];
}
