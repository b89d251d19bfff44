// Pull queues: every queue of the namespace with its counts, and one queue's counts and messages,
// oldest available first.

import { PAGE_SIZE, api, query } from "./api.js";
import { el, stat } from "./dom.js";
import { fmtAge, fmtNumber, fmtRelative, jobLink, shortId, timeCell } from "./format.js";

export async function renderQueues() {
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

export async function renderQueue(name, params) {
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
