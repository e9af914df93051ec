// One record: its state, schedule, redelivery and archive state, value,
// headers and error history, with retry (as is or edited), delete, and
// downloads of its key and value as the bytes stored.

import { el, fill, link, table, ago, facts, status, duration, sizeText, shortSize } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go, reload } from "../lib/nav.js";
import { writeButton, confirmThen } from "../lib/write.js";
import { valueView, HEX_LIMIT } from "../lib/value.js";
import { downloadPart } from "../lib/download.js";
import { pretty } from "../lib/json.js";
import { scheduleView } from "../lib/schedule.js";
import { stateText } from "./records.js";
import { retryEditor } from "./retry_edit.js";

// Any record can be retried but one a scheduler is producing right now (in
// flight) and a completed one.
const retryable = (r) => !r.in_flight && r.state !== "completed";

// From LARGE_VALUE bytes on, a value's download is offered before the value;
// from VIEW_ON_DEMAND on, the value is laid out only when asked (a tree or
// text of megabytes is slow to lay out and no use to read in a page).
const LARGE_VALUE = 64 * 1024;
const VIEW_ON_DEMAND = 1024 * 1024;

// KEY_TITLE and KEY_SHOWN are how many characters of the key the title and
// the key's line show.
const KEY_TITLE = 80;
const KEY_SHOWN = 4096;

// cut shortens s to n characters (not UTF-16 halves), with an ellipsis.
const cut = (s, n) => {
  const chars = Array.from(s.length > 4 * n ? s.slice(0, 4 * n) : s);
  return chars.length > n ? chars.slice(0, n).join("") + "…" : s;
};

export async function record(signal, id) {
  const r = await api(`/ojs/v1/dead-letter/${encodeURIComponent(id)}`, { signal });
  const outcome = status();
  const saved = status();
  saved.id = "download-status";
  // download saves the key or value; the button says it is busy meanwhile.
  const download = (part) => async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    saved.clear();
    saved.textContent = `Downloading the ${part}…`;
    try {
      const { name, size } = await downloadPart(r.id, part, signal);
      saved.ok(`Downloaded the ${part} as ${name}: ${sizeText(size)}.`);
    } catch (err) {
      if (err.name !== "AbortError") saved.fail(`Download the ${part}: ${err.message}`);
    } finally { button.disabled = false; }
  };
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
  const cannot = retryable(r) ? null : r.in_flight
    ? "It is being redelivered right now: retry it once the produce is settled (reload in a few seconds)."
    : `It is completed (${r.completed_by === "ack" ? "the consumer acknowledged its redelivery" : "its redelivery was produced and no failure came back"}): there is nothing to retry.`;
  // A binary or large value is offered for download up front, under the actions.
  const notice = valueNotice(r, download("value"));
  render(
    el("h1", {}, `Record ${r.key != null ? cut(r.key, KEY_TITLE) : r.id}`),
    facts([
      ["Id", el("code", {}, r.id)],
      ["Key", keyFact(r)],
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
      writeButton("Delete", confirmThen(`Delete record ${r.id}? This cannot be undone.`, remove), { id: "delete", class: "danger" }),
      r.value != null && !notice ? el("button", { type: "button", id: "download-value", class: "secondary", onclick: download("value"),
        title: `The value as stored, ${sizeText(r.value_size)}, as a file` }, "Download value") : null,
      r.key != null ? el("button", { type: "button", id: "download-key", class: "secondary", onclick: download("key"),
        title: `The key as stored, ${sizeText(r.key_size)}, as a file` }, "Download key") : null),
    cannot ? el("p", { class: "muted" }, cannot) : null,
    notice,
    outcome,
    saved,
    editor,
    el("h2", {}, "Retry schedule"),
    retryPolicy(r),
    el("h2", {}, "Value ", r.value != null ? el("span", { class: "small muted", id: "value-size" }, `${kindOf(r)}, ${sizeText(r.value_size)}`) : null),
    valueSection(r),
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

// kindOf says what a value is: JSON (the API parsed it), text or binary.
const kindOf = (r) => (r.payload !== undefined ? "JSON" : r.value_encoding === "base64" ? "binary" : "text");

// keyFact shows the whole key (up to KEY_SHOWN characters) and its size.
function keyFact(r) {
  if (r.key == null) return el("span", { id: "facts-key", class: "muted" }, "null");
  const binary = r.key_encoding === "base64";
  return el("span", { id: "facts-key" }, el("code", { class: "key" }, cut(r.key, KEY_SHOWN)), " ",
    el("span", { class: "muted" }, `(${binary ? "binary, shown as base64; " : ""}${sizeText(r.key_size)})`));
}

// valueNotice offers a binary or large value for download (null for others):
// the hex dump shows the start of a binary value only, and a large one is
// better read with a tool than in a page.
function valueNotice(r, download) {
  const n = r.value_size ?? 0;
  const binary = r.value_encoding === "base64";
  if (r.value == null || (!binary && n < LARGE_VALUE)) return null;
  const why = binary
    ? `This value is binary: ${sizeText(n)}. ${n > HEX_LIMIT ? `The page shows its first ${HEX_LIMIT.toLocaleString("en")} bytes as hex; download it for all of them.` : "The page shows it as hex; download it to open it with a tool of your own."}`
    : `This value is ${sizeText(n)} of ${kindOf(r) === "JSON" ? "JSON" : "text"}, too large to read usefully in the page: download it to open it in an editor${kindOf(r) === "JSON" ? " or with jq" : ""}.`;
  return el("div", { id: "value-download", class: "callout" }, el("p", {}, why),
    el("div", { class: "actions" }, el("button", { type: "button", id: "download-value", onclick: download }, `Download value (${shortSize(n)})`)));
}

// valueSection shows the value; one of VIEW_ON_DEMAND bytes or more (not
// binary: its hex dump is short) is laid out only when asked.
function valueSection(r) {
  const view = () => valueView(r.value, r.value_encoding, r.payload);
  if (r.value == null || r.value_encoding === "base64" || (r.value_size ?? 0) < VIEW_ON_DEMAND) return view();
  const shown = el("div", { id: "value-view" },
    el("p", { class: "muted" }, "Not laid out here, to keep the page quick: download it (above) to read it. ",
      el("button", { type: "button", id: "value-show", class: "secondary", onclick: () => fill(shown, view()) }, "Show it here anyway")));
  return shown;
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
    if (!f.next_attempt_at) {
      // not_routable: refused, not failed; nothing is tried again until an
      // operator retries it with a topic to deliver it to.
      return el("span", { class: "blocked" }, `not redelivered (${f.reason}): ${f.message}; not tried again`);
    }
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
