// Bulk retry and purge, of everything a filter matches or of the records an
// operator picked: a dry run first (the count, and the records a retry would
// skip), then on confirmation a task whose progress the task page shows. A
// purge of everything, or of a whole queue, is only sent once the operator
// has typed the count or the queue's name.

import { el, fill, plural } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { writeButton } from "../lib/write.js";
import { go } from "../lib/nav.js";

// bulkFilter turns the list's query into the bulk API's JSON filter, key by
// key as the key table (lib/filter.js) says: a repeatable key (header) is a
// list there, a boolean (unacknowledged) true or false, and the rest text
// (value too: the API matches the text 17 as 17 and as "17").
export function bulkFilter(query, keys) {
  const byName = new Map(keys.map((k) => [k.name, k]));
  const f = {};
  for (const [name, v] of query) {
    const k = byName.get(name);
    if (k?.repeatable) (f[name] ||= []).push(v);
    else if (k?.kind === "bool") f[name] = v === "true";
    else f[name] = v;
  }
  return f;
}

// bulkPanel is the Retry and Purge buttons with the panel of their dry run.
// filterOf gives the filter when a button is pressed; scope says what it
// is: filtered (false: no filter at all), queue (the filter is only this
// queue), picked (the records picked on the page, by id). id prefixes the
// ids of the controls.
export function bulkPanel(filterOf, { filtered = true, queue = null, picked = false, id = "bulk" } = {}) {
  const panel = el("div", { class: "bulk", id, hidden: true, role: "region", "aria-label": picked ? "Action on the selected records" : "Bulk action" });
  const close = () => { panel.hidden = true; fill(panel); };
  const start = (kind) => async () => {
    panel.hidden = false;
    fill(panel, el("p", {}, "Counting…"));
    try {
      fill(panel, await dryRun(kind, filterOf(), { filtered, queue, picked, id }, close));
      panel.querySelector("input, button")?.focus();
    } catch (e) {
      fill(panel, el("p", { class: "error", role: "alert" }, e.message));
    }
  };
  const node = el("div", { class: "bulkbar" },
    writeButton(picked ? "Retry selected…" : "Retry all matching…", start("retry"), { id: `${id}-retry` }),
    writeButton(picked ? "Purge selected…" : "Purge all matching…", start("purge"), { id: `${id}-purge`, class: "danger" }),
    panel);
  node.close = close;
  return node;
}

async function dryRun(kind, filter, scope, close) {
  const call = (body) => kind === "retry"
    ? api("/ojs/v1/dead-letter/retry", { method: "POST", body })
    : api("/ojs/v1/dead-letter", { method: "DELETE", body });
  const dry = await call({ filter, confirm: false });
  const verb = kind === "retry" ? "retried" : "deleted";
  const { id } = scope;
  const rate = el("input", { id: `${id}-rate`, type: "number", min: "0", step: "any", placeholder: "unlimited", inputmode: "decimal" });
  const outcome = el("p", { role: "status" });
  const lines = [
    el("p", { id: `${id}-count` }, el("strong", {}, plural(dry.would_affect, "record")), ` would be ${verb}.`,
      dry.skipped ? ` ${plural(dry.skipped, "record")} would be skipped: their topic is one of Redrive's own (retry each with a target topic).` : "",
      scope.picked && dry.would_affect + (dry.skipped || 0) < filter.ids.length
        ? ` ${plural(filter.ids.length - dry.would_affect - (dry.skipped || 0), "picked record")} would be left alone: ${kind === "retry" ? "not retryable now, or gone" : "gone already"}.` : ""),
    !scope.filtered ? el("p", { class: "error" }, `No filter: this ${kind === "retry" ? "retries" : "deletes"} every record that matches, in every queue.`) : null,
  ];
  if (dry.would_affect === 0) return [...lines, el("button", { type: "button", class: "secondary", onclick: close }, "Close")];
  // A purge of every record, or of a whole queue, waits for the operator
  // to type what it deletes.
  const typed = kind === "purge" && !scope.picked
    ? (!scope.filtered ? { want: String(dry.would_affect), what: `the number of records, ${dry.would_affect}` }
      : scope.queue ? { want: scope.queue, what: `the queue's name, ${scope.queue}` } : null)
    : null;
  const confirm = el("button", { type: "button", id: `${id}-confirm`, class: kind === "purge" ? "danger" : "", disabled: !!typed, onclick: async (e) => {
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
  } }, kind === "retry" ? `Retry ${plural(dry.would_affect, "record")}` : `Delete ${plural(dry.would_affect, "record")}`);
  const check = typed ? el("div", { class: "inline" },
    el("label", { for: `${id}-typed` }, `To delete them, type ${typed.what}:`),
    el("input", { id: `${id}-typed`, autocomplete: "off", spellcheck: "false", oninput: (e) => {
      confirm.disabled = e.target.value.trim().replaceAll(",", "") !== typed.want;
    } })) : null;
  return [
    ...lines,
    check,
    el("div", { class: "inline" },
      el("label", { for: `${id}-rate` }, "Rate limit (records/s)"), rate,
      confirm,
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    outcome,
  ];
}
