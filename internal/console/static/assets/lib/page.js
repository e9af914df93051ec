// The page frame: <main> and how a page replaces its content or shows an error.

import { el, fill } from "./dom.js";

export const main = document.getElementById("main");

export function render(...nodes) {
  fill(main, ...nodes);
  const h1 = main.querySelector("h1");
  if (h1) document.title = `${h1.textContent} · Redrive`;
}

export function failed(err) {
  if (err.status === 401 || err.name === "AbortError") return;
  render(el("h1", {}, "Something went wrong"), el("p", { class: "error", role: "alert" }, err.message));
}

// every calls fn every ms until signal aborts (a page's polling).
export function every(ms, signal, fn) {
  const id = setInterval(() => { if (!signal.aborted) fn(); }, ms);
  signal.addEventListener("abort", () => clearInterval(id));
}

// throttled returns fn limited to one call per ms, trailing calls kept.
export function throttled(ms, signal, fn) {
  let timer = null;
  return () => {
    if (timer || signal.aborted) return;
    timer = setTimeout(() => { timer = null; if (!signal.aborted) fn(); }, ms);
  };
}
