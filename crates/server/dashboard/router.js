// The router: which view the location hash names, rendering it into <main> (a newer render wins
// over one still loading), marking the current navigation link. Views call render() to redraw
// after a change; the routes themselves are set by app.js, so this module imports no view.

import { el, setStatus, showError } from "./dom.js";

export let currentView = null;
let renderToken = 0;
let route = () => {
  throw new Error("no routes");
};

// Sets what a hash path shows: `resolve(parts, params)` answers { name, renderer }.
export function setRoutes(resolve) {
  route = resolve;
}

function view() {
  return document.getElementById("view");
}

function parseHash() {
  const hash = window.location.hash.replace(/^#/, "") || "/";
  const [path, qs] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(qs || "") };
}

export async function render() {
  const token = ++renderToken;
  const { parts, params } = parseHash();
  const { name, renderer } = route(parts, params);
  currentView = name;
  for (const link of document.querySelectorAll("nav a[data-nav]")) {
    const parent = { job: "jobs", queue: "queues" }[name];
    const active = link.dataset.nav === name || link.dataset.nav === parent;
    if (active) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  setStatus("");
  const main = view();
  main.dataset.view = name;
  delete main.dataset.ready;
  main.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  try {
    const content = await renderer();
    if (token !== renderToken) return;
    main.replaceChildren(...[content].flat());
    main.dataset.ready = name;
  } catch (err) {
    if (token !== renderToken) return;
    main.replaceChildren(el("p", { class: "error", "data-testid": "view-error" }, err.message));
    showError(err);
  }
}
