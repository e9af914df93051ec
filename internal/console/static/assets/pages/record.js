// One record: its state, schedule, redelivery and archive state, value,
// headers and error history, with retry (as is or edited) and delete.

import { el, fill, link, table, ago, facts, status, duration } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go, reload } from "../lib/nav.js";
import { writeButton, confirmThen } from "../lib/write.js";
import { valueView } from "../lib/value.js";
import { pretty } from "../lib/json.js";
import { scheduleView } from "../lib/schedule.js";
import { stateText } from "./records.js";
import { retryEditor } from "./retry_edit.js";

// Records that can be retried: a waiting retry is brought forward, a
// discarded one comes back; available and completed ones are in flight or done.
const retryable = (r) => r.state === "discarded" || r.state === "retryable";

export async function record(signal, id) {
  const r = await api(`/ojs/v1/dead-letter/${encodeURIComponent(id)}`, { signal });
  const outcome = status();
  const editor = el("section", { id: "retry-editor", hidden: true, "aria-label": "Retry with edit" });
  const retryNow = async () => {
    try {
      await api(`/ojs/v1/dead-letter/${r.id}/retry`, { method: "POST", body: {} });
      outcome.ok("Retried: the record goes back to its topic now.");
      setTimeout(() => { if (!signal.aborted) reload(); }, 800);
    } catch (e) { outcome.fail(e.message); }
  };
  const remove = async () => {
    try {
      await api(`/ojs/v1/dead-letter/${r.id}`, { method: "DELETE" });
      go(`/ui/records?queue=${encodeURIComponent(r.queue)}`);
    } catch (e) { outcome.fail(e.message); }
  };
  const cannot = retryable(r) ? null : `A ${r.state} record cannot be retried: it is ${r.state === "available" ? "being redelivered" : "done"}.`;
  render(
    el("h1", {}, `Record ${r.key ?? r.id}`),
    facts([
      ["Id", el("code", {}, r.id)],
      ["Queue", link(`/ui/queues/${encodeURIComponent(r.queue)}`, r.queue)],
      ["State", el("span", { id: "record-state", class: `state-${r.state}` }, stateText(r))],
      ["Attempt", `${r.attempt} of ${r.max_attempts}`],
      ["Next retry", ago(r.next_retry_at)],
      ["Error type", r.error_type],
      ["Incident", r.incident ? link(`/ui/records?incident=${r.incident}`, r.incident) : "—"],
      ["Source", `${r.source.topic}${r.source.partition != null ? ` [${r.source.partition}] @ ${r.source.offset}` : ""}${r.source.group ? `, group ${r.source.group}` : ""}`],
      ["Format", r.format],
      ["Created", ago(r.created_at)],
      ["Redelivery", redeliveryText(r)],
      ["Archive", archiveText(r)],
    ]),
    el("div", { class: "actions" },
      writeButton("Retry now", retryNow, { id: "retry-now", disabled: !!cannot, title: cannot }),
      writeButton("Retry with edit…", () => {
        editor.hidden = false;
        fill(editor, retryEditor(r, outcome, () => { editor.hidden = true; }, signal));
        editor.querySelector("textarea")?.focus();
      }, { id: "retry-edit", class: "secondary", disabled: !!cannot, title: cannot }),
      writeButton("Delete", confirmThen(`Delete record ${r.id}? This cannot be undone.`, remove), { id: "delete", class: "danger" })),
    cannot ? el("p", { class: "muted" }, cannot) : null,
    outcome,
    editor,
    el("h2", {}, "Retry schedule"),
    retryPolicy(r),
    el("h2", {}, "Value"),
    valueView(r.value, r.value_encoding, r.payload),
    r.redelivery ? [el("h2", {}, "Edited for redelivery"), redeliveryEdit(r.redelivery)] : null,
    el("h2", {}, "Headers"),
    headersTable(r.headers || []),
    el("h2", {}, "Errors"),
    el("ol", { class: "timeline", id: "errors" }, (r.errors || []).map((e) => el("li", {},
      el("div", {}, el("strong", {}, `attempt ${e.attempt}: ${e.type}`), " ", e.code ? el("span", { class: "tag" }, e.code) : null, " ", ago(e.occurred_at)),
      el("div", { class: "msg" }, e.message),
      (e.backtrace || []).length ? el("details", {}, el("summary", {}, `Backtrace (${e.backtrace.length} frames)`), el("pre", {}, e.backtrace.join("\n"))) : null,
      e.details ? el("details", {}, el("summary", {}, "Details"), el("pre", {}, pretty(e.details))) : null))),
  );
}

function retryPolicy(r) {
  const p = r.retry || {};
  return [
    facts([
      ["Next retry", r.next_retry_at ? ago(r.next_retry_at) : r.state === "discarded" ? "none: exhausted, waiting for an operator or a replay rule" : "—"],
      ["Policy", p.backoff_strategy ? `max_attempts ${p.max_attempts}, ${p.backoff_strategy} backoff`: "the queue's"],
      p.initial_interval ? ["Initial interval", duration(p.initial_interval)] : null,
      p.max_interval ? ["Max interval", duration(p.max_interval)] : null,
      p.backoff_coefficient ? ["Coefficient", String(p.backoff_coefficient)] : null,
      ["On exhaustion", p.on_exhaustion || "—"],
    ]),
    scheduleView(r.schedule),
  ];
}

function redeliveryText(r) {
  if (r.redelivery_failure) {
    const f = r.redelivery_failure;
    return el("span", { class: "blocked" }, `failing (${f.reason}, ${f.failures}×): ${f.message}; next attempt `, ago(f.next_attempt_at));
  }
  return r.redelivered_at ? ["last redelivered ", ago(r.redelivered_at)] : "not redelivered yet";
}

function archiveText(r) {
  const a = r.archive;
  if (!a) return "—";
  return el("span", { class: a.state === "failed" ? "blocked" : "" }, a.state,
    a.reason ? ` (${a.reason})` : "", a.archived_at ? [", ", ago(a.archived_at)] : "",
    a.failure ? `: ${a.failure.reason}, ${a.failure.message}` : "");
}

function headersTable(headers) {
  if (headers.length === 0) return el("p", { class: "muted" }, "No headers.");
  return table(["Key", "Value"], headers.map((h) => el("tr", {},
    el("th", { scope: "row" }, h.key), el("td", { class: "msg" }, h.encoding === "base64" ? `(base64) ${h.value}` : h.value))), { id: "headers" });
}

function redeliveryEdit(x) {
  return facts([
    x.queue ? ["Target topic", x.queue] : null,
    x.value != null ? ["Value", el("pre", {}, x.value_encoding === "base64" ? `(base64) ${x.value}` : x.value)] : null,
    (x.headers || []).length ? ["Headers", headersTable(x.headers)] : null,
  ]);
}
