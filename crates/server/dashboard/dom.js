// DOM helpers: elements and SVG built from attributes and children, with every value entering
// the page as text (never as markup: job types and payloads are user-controlled); the status line;
// and the stat card the overview and queue pages share.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") {
      for (const [event, handler] of Object.entries(v)) node.addEventListener(event, handler);
    } else {
      node.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function setStatus(message, kind = "info") {
  const status = document.getElementById("status");
  status.textContent = message || "";
  status.dataset.kind = kind;
}

export function showError(err) {
  setStatus(err instanceof Error ? err.message : String(err), "error");
}

export function stat(label, testid, value, hint) {
  return el(
    "div",
    { class: "card stat" },
    el("span", { class: "stat-label", id: `${testid}-label` }, label),
    el("span", { class: "stat-value", "data-testid": testid, "aria-labelledby": `${testid}-label` }, value),
    hint ? el("span", { class: "stat-hint" }, hint) : null,
  );
}
