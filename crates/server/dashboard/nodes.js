// The overview's card of live nodes (GET /v1/nodes), with a note in place of the table for a key
// that may not list them.

import { ApiError, api } from "./api.js";
import { el } from "./dom.js";
import { fmtNumber, timeCell } from "./format.js";

// The cluster's live nodes: cluster-wide, so with API keys configured it needs an admin key of
// every namespace; another key sees a note instead of the table.
export async function nodesCard() {
  let nodes = null;
  let refused = null;
  try {
    ({ nodes } = await api("GET", "/v1/nodes"));
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) throw err;
    refused = err;
  }
  const body = refused
    ? el("p", { class: "muted", "data-testid": "nodes-refused" }, "The list of nodes covers the whole cluster: it needs an API key of every namespace with the admin role.")
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
