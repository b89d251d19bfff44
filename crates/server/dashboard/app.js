// The Hourglass dashboard's entry module (loaded by index.html as <script type="module">): the
// credentials form, the routes from hash paths to views, and start-up. Plain ES modules, no
// dependencies: the page reads and acts through the public HTTP API only (figures from
// /v1/summary), so an API key sees exactly what the API lets it see. Every value from the server
// enters the page as text (textContent / attributes), never as markup: job types and payloads are
// user-controlled.

import { api, credentials, store } from "./api.js";
import { renderAudit } from "./audit.js";
import { renderDeadLetters } from "./dead-letters.js";
import { startSampling } from "./figures.js";
import { renderJob } from "./job.js";
import { renderJobs } from "./jobs.js";
import { renderOverview } from "./overview.js";
import { renderQueue, renderQueues } from "./queues.js";
import { render, setRoutes } from "./router.js";

// What the key in use may do, beside the form: its role and namespace from /v1/whoami, and the
// routes it may call as the badge's tooltip. A missing or unknown key shows the node's message.
// Only the latest ask is shown (an answer for the key before can arrive after it).
let asked = 0;
async function showIdentity() {
  const badge = document.getElementById("identity");
  const ask = ++asked;
  try {
    const who = await api("GET", "/v1/whoami");
    if (ask !== asked) return;
    badge.textContent = who.development
      ? "development: admin of every namespace"
      : `${who.role} · ${who.namespace}${who.all_namespaces ? " (any namespace)" : ""}`;
    badge.title = who.routes.map((r) => `${r.method} ${r.path}`).join("\n");
    badge.dataset.role = who.role;
  } catch (err) {
    if (ask !== asked) return;
    badge.textContent = err.message;
    badge.title = "";
    delete badge.dataset.role;
  }
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
    showIdentity();
  });
}

// Which view a hash path shows (`#/jobs/ID`, `#/queues?cursor=...`): its name and renderer.
function route(parts, params) {
  if (parts[0] === "jobs" && parts[1]) return { name: "job", renderer: () => renderJob(parts[1]) };
  if (parts[0] === "jobs") return { name: "jobs", renderer: () => renderJobs(params) };
  if (parts[0] === "dead-letters") return { name: "dead-letters", renderer: () => renderDeadLetters(params) };
  if (parts[0] === "audit") return { name: "audit", renderer: () => renderAudit(params) };
  if (parts[0] === "queues" && parts[1]) return { name: "queue", renderer: () => renderQueue(parts[1], params) };
  if (parts[0] === "queues") return { name: "queues", renderer: renderQueues };
  return { name: "overview", renderer: renderOverview };
}

setRoutes(route);
setupCredentials();
window.addEventListener("hashchange", render);
startSampling();
render();
showIdentity();
