// Bulk retry and purge of everything a filter matches: a dry run first (the
// count, and the records a retry would skip), then on confirmation a task
// whose progress the task page shows.

import { el, fill, plural } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { writeButton } from "../lib/write.js";
import { go } from "../lib/nav.js";

// bulkFilter turns the list's query into the bulk API's JSON filter:
// header is a list there, and value a JSON scalar.
export function bulkFilter(query) {
  const f = {};
  for (const [k, v] of query) {
    if (k === "header") (f.header ||= []).push(v);
    else if (k === "value") f.value = jsonScalar(v);
    else f[k] = v;
  }
  return f;
}

function jsonScalar(v) {
  try {
    const x = JSON.parse(v);
    if (x === null || typeof x !== "object") return x;
  } catch { /* text */ }
  return v;
}

export function bulkPanel(query, filtered) {
  const panel = el("div", { class: "bulk", id: "bulk", hidden: true, role: "region", "aria-label": "Bulk action" });
  const start = (kind) => async () => {
    panel.hidden = false;
    fill(panel, el("p", {}, "Counting…"));
    try {
      fill(panel, await dryRun(kind, bulkFilter(query), filtered, () => { panel.hidden = true; }));
      panel.querySelector("input, button")?.focus();
    } catch (e) {
      fill(panel, el("p", { class: "error", role: "alert" }, e.message));
    }
  };
  return el("div", { class: "bulkbar" },
    writeButton("Retry all matching…", start("retry"), { id: "bulk-retry" }),
    writeButton("Purge all matching…", start("purge"), { id: "bulk-purge", class: "danger" }),
    panel);
}

async function dryRun(kind, filter, filtered, close) {
  const call = (body) => kind === "retry"
    ? api("/ojs/v1/dead-letter/retry", { method: "POST", body })
    : api("/ojs/v1/dead-letter", { method: "DELETE", body });
  const dry = await call({ filter, confirm: false });
  const verb = kind === "retry" ? "retried" : "deleted";
  const rate = el("input", { id: "bulk-rate", type: "number", min: "0", step: "any", placeholder: "unlimited", inputmode: "decimal" });
  const outcome = el("p", { role: "status" });
  const lines = [
    el("p", { id: "bulk-count" }, el("strong", {}, plural(dry.would_affect, "record")), ` would be ${verb}.`,
      dry.skipped ? ` ${plural(dry.skipped, "record")} would be skipped: their topic is one of Redrive's own (retry each with a target topic).` : ""),
    !filtered ? el("p", { class: "error" }, `No filter: this ${kind === "retry" ? "retries" : "deletes"} every record that matches, in every queue.`) : null,
  ];
  if (dry.would_affect === 0) return [...lines, el("button", { type: "button", class: "secondary", onclick: close }, "Close")];
  return [
    ...lines,
    el("div", { class: "inline" },
      el("label", { for: "bulk-rate" }, "Rate limit (records/s)"), rate,
      el("button", { type: "button", id: "bulk-confirm", class: kind === "purge" ? "danger" : "", onclick: async (e) => {
        e.target.disabled = true;
        const body = { filter, confirm: true };
        if (rate.value !== "") body.rate_limit = Number(rate.value);
        try {
          const out = await call(body);
          go(`/ui/tasks/${out.task.id}`);
        } catch (err) {
          outcome.className = "error";
          outcome.textContent = err.message;
          e.target.disabled = false;
        }
      } }, kind === "retry" ? `Retry ${plural(dry.would_affect, "record")}` : `Delete ${plural(dry.would_affect, "record")}`),
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    outcome,
  ];
}
