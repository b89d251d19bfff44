// The audit log: who (an API key's id) changed what in the namespace, newest first, a page at a
// time, optionally only one job's entries (`#/audit?job=ID`). Writers and admins may read it; any
// other key sees the API's refusal, which names the roles that may.

import { PAGE_SIZE, api, query, unlessRefused } from "./api.js";
import { el } from "./dom.js";
import { jobLink, shortId, timeCell } from "./format.js";

// What an entry concerns: its jobs (a batch's count and first ids), its dead letter, its fields.
function concerns(e) {
  const jobs = e.jobs.map((id) => jobLink(id, shortId(id)));
  const parts = [];
  if (jobs.length === 1 && e.job_count === 1) parts.push(jobs[0]);
  else if (jobs.length) parts.push(`${e.job_count} jobs: `, ...jobs.flatMap((j, i) => (i ? [", ", j] : [j])), e.job_count > jobs.length ? ", …" : "");
  if (e.dead_letter_id) parts.push(parts.length ? " · " : "", `dead letter ${e.dead_letter_id}`);
  if (e.fields.length) parts.push(parts.length ? " · " : "", `fields: ${e.fields.join(", ")}`);
  return parts.length ? parts : [el("span", { class: "muted" }, "—")];
}

export async function renderAudit(params) {
  const cursor = params.get("cursor") || undefined;
  const job = params.get("job") || undefined;
  let refused = null;
  const page = await unlessRefused(api("GET", `/v1/audit${query({ limit: PAGE_SIZE, cursor, job })}`), (e) => (refused = e));
  const heading = el("h1", {}, job ? `Audit log of job ${shortId(job)}` : "Audit log");
  if (!page) {
    return [heading, el("section", { class: "card" }, el("p", { class: "muted", "data-testid": "audit-refused" }, refused.message))];
  }
  const rows = page.entries.map((e) =>
    el(
      "tr",
      { "data-testid": "audit-row", "data-action": e.action },
      el("td", {}, timeCell(e.at)),
      el("td", {}, el("code", {}, e.key_id)),
      el("td", {}, e.action.replace("_", " ")),
      el("td", {}, ...concerns(e)),
    ),
  );
  const table = rows.length
    ? el(
        "table",
        { "data-testid": "audit-table" },
        el("thead", {}, el("tr", {}, ["When", "Key", "Action", "Concerns"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rows),
      )
    : el("p", { class: "muted", "data-testid": "audit-empty" }, "No entries. Nothing was changed through the API, or retention removed it.");
  const base = job ? `#/audit?job=${encodeURIComponent(job)}` : "#/audit";
  const more = (c) => `${base}${job ? "&" : "?"}cursor=${encodeURIComponent(c)}`;
  return [
    heading,
    el(
      "section",
      { class: "card" },
      el("p", { class: "muted small" }, "One entry per API request that changed something: creates, changes, pauses, resumes, cancels, triggers, dead-letter replays and deletions, signing-secret rotations. Keys are shown by id (the first 12 hex digits of their SHA-256), never themselves."),
      table,
      el(
        "div",
        { class: "pager" },
        cursor ? el("a", { href: base, "data-testid": "first-page" }, "← Newest") : null,
        page.next_cursor ? el("a", { href: more(page.next_cursor), "data-testid": "next-page" }, "Older →") : null,
      ),
    ),
  ];
}
