// Dead letters: the table with replay and delete on each row (also shown on a job's page), and
// the paged list with replay of everything on the page.

import { PAGE_SIZE, api, query } from "./api.js";
import { el, setStatus, showError } from "./dom.js";
import { jobLink, shortId, timeCell } from "./format.js";
import { render } from "./router.js";

// Rows of dead letters with replay and delete buttons; an emptied table gives way to a note.
// `onRemoved(left)` hears how many rows are left after each one goes.
export function deadLetterTable(letters, onRemoved = () => {}) {
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

export async function renderDeadLetters(params) {
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
