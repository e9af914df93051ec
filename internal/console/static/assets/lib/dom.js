// DOM helpers shared by every page: element construction, links that route
// inside the application, times and durations for humans.

import { go } from "./nav.js";

// el builds an element: attributes (on* are listeners; true sets a boolean
// attribute; null/undefined/false skip) and children (strings become text, so
// nothing from the API is ever parsed as HTML).
export function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else if (v === true) n.setAttribute(k, "");
    else n.setAttribute(k, v);
  }
  return fill(n, ...children);
}

// fill replaces node's children: arrays are flattened, null/undefined/false
// skipped, and strings become text.
export function fill(node, ...children) {
  node.replaceChildren(...children.flat(Infinity)
    .filter((c) => c !== undefined && c !== null && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
  return node;
}

// link is an <a> that routes in place (a new tab still works: it is a real href).
export function link(href, text, attrs = {}) {
  return el("a", { ...attrs, href, onclick: (e) => {
    if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    go(href);
  } }, text);
}

// A column whose cells are numbers (class "num") gets a right-aligned header,
// so the heading sits over its figures. A table wider than the window
// scrolls in its own box rather than widening the page.
export function table(headers, rows, attrs = {}) {
  const first = [rows].flat(Infinity).find((r) => r instanceof Element);
  const num = (i) => first?.children[i]?.classList.contains("num") ? "num" : null;
  return el("div", { class: "tablewrap" }, el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map((h, i) => el("th", { scope: "col", class: num(i) }, h)))),
    el("tbody", {}, rows)));
}

// facts renders a definition list from [term, value] pairs.
export function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter(Boolean).map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// status is a live region for the outcome of an action.
export function status() {
  const s = el("p", { role: "status", class: "status" });
  s.ok = (msg) => { s.className = "status ok"; s.textContent = msg; };
  s.fail = (msg) => { s.className = "status error"; s.textContent = msg; };
  s.clear = () => { s.className = "status"; s.textContent = ""; };
  return s;
}

const UNITS = [[86400, "d", "day"], [3600, "h", "hour"], [60, "min", "minute"], [1, "s", "second"]];

// ago shows a time relative to now, with the UTC time on hover.
export function ago(iso) {
  if (!iso) return el("span", { class: "muted" }, "—");
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  const abs = Math.abs(s);
  const [size, unit] = UNITS.find(([n]) => abs >= n) || UNITS[3];
  const n = Math.round(abs / size);
  const text = abs < 1 ? "just now" : s >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
  return el("time", { datetime: iso, title: new Date(iso).toISOString().replace(".000Z", "Z") + " UTC" }, text);
}

const ISO = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

// words says an ISO 8601 duration (PT1H30M) in words (1 hour 30 minutes).
export function words(iso) {
  const m = ISO.exec(iso || "");
  if (!m || iso === "P" || iso.endsWith("T")) return iso || "";
  const parts = [[m[1], "day"], [m[2], "hour"], [m[3], "minute"], [m[4], "second"]]
    .filter(([v]) => v && Number(v) !== 0)
    .map(([v, u]) => `${Number(v)} ${u}${Number(v) === 1 ? "" : "s"}`);
  return parts.length ? parts.join(" ") : "0 seconds";
}

// duration shows an ISO 8601 duration with its words on hover.
export function duration(iso) {
  if (!iso) return el("span", { class: "muted" }, "—");
  const w = words(iso);
  return el("span", { class: "duration", title: w }, iso, w !== iso ? el("span", { class: "muted" }, ` (${w})`) : null);
}

export function plural(n, one, many = one + "s") {
  return `${Number(n).toLocaleString("en")} ${n === 1 ? one : many}`;
}

const SIZE_UNITS = [[2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]];

// shortSize says a size in bytes briefly: exact below 10 KiB ("3,000
// bytes"), else in KiB, MiB or GiB ("3.0 MiB").
export function shortSize(n) {
  if (n < 10 * 1024) return plural(n, "byte");
  const [size, unit] = SIZE_UNITS.find(([s]) => n >= s);
  return `${(n / size).toFixed(1)} ${unit}`;
}

// sizeText says a size in bytes exactly, and in KiB, MiB or GiB from 10 KiB
// on ("3,145,728 bytes (3.0 MiB)").
export function sizeText(n) {
  return n < 10 * 1024 ? plural(n, "byte") : `${plural(n, "byte")} (${shortSize(n)})`;
}
