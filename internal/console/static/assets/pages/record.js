// One record: its state, schedule, redelivery and archive state, value,
// headers and error history, with retry (as is or edited), delete, and
// downloads of its key and value as the bytes stored.

import { el, fill, link, table, ago, facts, status, duration, sizeText, shortSize, plural } from "../lib/dom.js";
import { api, apiText } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go, reload } from "../lib/nav.js";
import { writeButton, confirmThen } from "../lib/write.js";
import { valueKind, valuePanel, smallJSON, schemaText, hexDump, HEX_LIMIT, TREE_DEPTH } from "../lib/value.js";
import { downloadPart } from "../lib/download.js";
import { parse, member, scalarText, isEmpty, pretty } from "../lib/json.js";
import { scheduleView } from "../lib/schedule.js";
import { stateText } from "./records.js";
import { retryEditor } from "./retry_edit.js";
import { payloadEditor } from "./payload_edit.js";

// Any record can be retried but one a scheduler is producing right now (in
// flight) and a completed one.
const retryable = (r) => !r.in_flight && r.state !== "completed";

// From LARGE_VALUE bytes on, a value's download is offered before the value
// (lib/value.js lays out one of a megabyte or more only when asked).
const LARGE_VALUE = 64 * 1024;

// KEY_TITLE and KEY_SHOWN are how many characters of the key the title and
// the key's line show (the key's line shows the rest when asked).
const KEY_TITLE = 80;
const KEY_SHOWN = 200;

// cut shortens s to n characters (not UTF-16 halves), with an ellipsis.
const cut = (s, n) => {
  const chars = Array.from(s.length > 4 * n ? s.slice(0, 4 * n) : s);
  return chars.length > n ? chars.slice(0, n).join("") + "…" : s;
};

export async function record(signal, id) {
  const { data: r, text } = await apiText(`/ojs/v1/dead-letter/${encodeURIComponent(id)}`, { signal });
  // The value, its JSON and what else the producer wrote are read from the
  // text as written (lib/json.js), never from the payload JSON.parse made.
  const exact = exactParts(text);
  const kind = valueKind(r.value, r.value_encoding);
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
  const notice = valueNotice(r, kind, download("value"));
  const exhausted = r.state === "discarded";
  const errors = [...(r.errors || []).keys()].reverse();
  render(
    el("h1", { id: "record-title" }, "Record ", r.key != null ? [r.key_encoding === "base64" ? [base64Tag(), " "] : null, cut(r.key, KEY_TITLE)] : r.id),
    recordFacts(r, exact),
    el("div", { class: "actions" },
      writeButton("Retry now", retryNow, { id: "retry-now", disabled: !!cannot, title: cannot, need: ["retry", r.queue] }),
      writeButton("Retry with edit…", () => {
        editor.hidden = false;
        // A value decoded from the Schema Registry wire format is edited as
        // its JSON and encoded again with its schema; any other value as
        // the bytes it is (a JSON one byte for byte).
        const closeEditor = () => { editor.hidden = true; };
        fill(editor, r.value_schema && exact.payload
          ? payloadEditor(r, exact.payload, outcome, closeEditor, signal)
          : retryEditor(r, kind, outcome, closeEditor, signal));
        editor.querySelector("textarea")?.focus();
      }, { id: "retry-edit", class: "secondary", disabled: !!cannot, title: cannot, need: ["edit", r.queue] }),
      writeButton("Delete", confirmThen(`Delete record ${r.id}? This cannot be undone.`, remove), { id: "delete", class: "danger", need: ["purge", r.queue] }),
      r.key != null ? el("button", { type: "button", id: "download-key", class: "secondary", onclick: download("key"),
        title: `The key as stored, ${sizeText(r.key_size)}, as a file` }, "Download key") : null),
    cannot ? el("p", { class: "muted" }, cannot) : null,
    notice,
    outcome,
    saved,
    editor,
    el("h2", {}, "Errors ", errors.length > 1 ? el("span", { class: "small muted" }, `${errors.length}, the latest first`) : null),
    el("ol", { class: "timeline", id: "errors" }, errors.map((i) => errorEntry(r.errors[i], exact.details[i]))),
    el("h2", {}, "Value ", kind.kind !== "none" ? el("span", { class: "small muted", id: "value-size" }, valueSize(r, kind)) : null),
    el("section", { id: "value", "aria-label": "Value" }, valuePanel(r, kind, download("value"), exact.payload)),
    r.redelivery ? [el("h2", {}, "Edited for redelivery"), redeliveryEdit(r.redelivery, exact.redeliveryPayload)] : null,
    el("h2", {}, "Headers"),
    headersTable(r.headers || []),
    exact.meta && !isEmpty(exact.meta.root) ? [el("h2", {}, "Meta"), smallJSON(exact.meta, { id: "meta" })] : null,
    el("details", { class: "section", id: "schedule", open: !exhausted },
      el("summary", {}, el("h2", {}, "Retry schedule"), exhausted ? el("span", { class: "small muted" }, " exhausted: no retries are left (open for the policy)") : null),
      retryPolicy(r, exact.retry)),
  );
}

// exactParts reads what a producer wrote into a record's JSON answer from
// its text, numbers as written: the retry policy, the meta, each error's
// details, the source coordinates (JSON.parse would round what does not
// fit a double). Objects and arrays are read only where they are needed.
function exactParts(text) {
  const none = { details: [], retry: null, meta: null, source: null, payload: null, redeliveryPayload: null };
  let top;
  try { top = parse(text, { maxDepth: 1 }).root; } catch { return none; }
  const sub = (doc, node, maxDepth = TREE_DEPTH) => (node && node.type === "folded" ? parse(doc.src.slice(node.start, node.end), { maxDepth }) : null);
  const whole = { src: text };
  const errors = sub(whole, member(top, "errors"), 2);
  const redelivery = sub(whole, member(top, "redelivery"), 1);
  return {
    details: (errors?.root?.items || []).map((e) => sub(errors, member(e, "details"))),
    retry: sub(whole, member(top, "retry"), 1)?.root ?? null,
    meta: sub(whole, member(top, "meta")),
    source: sub(whole, member(top, "source"), 1)?.root ?? null,
    // A decoded value's JSON as the API wrote it (digits kept).
    payload: payloadText(text, member(top, "payload")),
    // An edit's payload (a retry with override.payload, or a patch).
    redeliveryPayload: redelivery ? payloadText(redelivery.src, member(redelivery.root, "payload")) : null,
  };
}

// payloadText is the payload's JSON text as written, or null.
function payloadText(text, node) {
  return node && node.type !== "null" ? text.slice(node.start, node.end) : null;
}

// recordFacts lays the record's facts out two to a row where there is room;
// the long ones (key, source, redelivery, archive) take a row each.
function recordFacts(r, exact) {
  const offset = scalarText(member(exact.source, "offset")) || (r.source.offset != null ? String(r.source.offset) : "");
  const facts = [
    ["State", el("span", { id: "record-state", class: `state-${r.state}` }, stateText(r))],
    ["Attempt", `${r.attempt} of ${r.max_attempts}`],
    ["Queue", link(`/ui/queues/${encodeURIComponent(r.queue)}`, r.queue)],
    ["Error type", r.error_type],
    ["Next retry", ago(r.next_retry_at)],
    ["Incident", r.incident ? link(`/ui/records?incident=${r.incident}`, r.incident) : "—"],
    ["Created", ago(r.created_at)],
    ["Format", r.format],
    ["Key", keyFact(r), true],
    ["Source", `${r.source.topic}${r.source.partition != null ? ` [${r.source.partition}] @ ${offset}` : ""}${r.source.group ? `, group ${r.source.group}` : ""}`, true],
    ["Redelivery", redeliveryText(r), true],
    ["Archive", archiveText(r), true],
    ["Trace", traceFact(r), true],
    ...(r.masked ? [["Masked", el("span", { id: "record-masked", class: "muted" },
      `fields shown as *** are masked: this key may not unmask queue ${r.queue}; sent back unchanged in Retry with edit, they keep their values`), true]] : []),
    ["Id", el("code", {}, r.id), true],
  ];
  return el("dl", { class: "facts", id: "record-facts" }, facts.map(([k, v, wide]) => [el("dt", {}, k), el("dd", { class: wide ? "wide" : null }, v)]));
}

// traceFact is the record's trace id, linked to the operator's tracing UI
// when the server has a REDRIVE_TRACE_URL ({trace_id} replaced).
function traceFact(r) {
  if (!r.trace_id) return el("span", { id: "record-trace", class: "muted" }, "none (the record carries no traceparent)");
  const tmpl = document.documentElement.dataset.traceTemplate || "";
  if (!tmpl) return el("code", { id: "record-trace" }, r.trace_id);
  const href = tmpl.split("{trace_id}").join(encodeURIComponent(r.trace_id));
  return el("a", { id: "record-trace", href, target: "_blank", rel: "noopener noreferrer" }, el("code", {}, r.trace_id));
}

// errorEntry is one failed attempt: its type, code, time and message, with
// its backtrace and details folded under it (details as the API has them,
// numbers as written).
function errorEntry(e, details) {
  return el("li", {},
    el("div", {}, el("strong", {}, `attempt ${e.attempt}: ${e.type}`), " ", e.code ? el("span", { class: "tag" }, e.code) : null, " ", ago(e.occurred_at)),
    message(e.message || ""),
    (e.backtrace || []).length ? el("details", {}, el("summary", {}, `Backtrace (${e.backtrace.length} frames)`), el("pre", {}, e.backtrace.join("\n"))) : null,
    details && !isEmpty(details.root) ? el("details", { class: "error-details" }, el("summary", {}, "Details"), smallJSON(details)) : null);
}

// MESSAGE_SHOWN is how many characters of an error message show before a
// "show all": a message of pages would push the value out of sight.
const MESSAGE_SHOWN = 600;

// message shows an error message, a long one cut until asked.
const message = (text) => clipped(text, MESSAGE_SHOWN, "div", "msg");

// clipped is text in a tag of class cls, cut to n characters (not UTF-16
// halves) with a button that shows the whole of it.
function clipped(text, n, tag, cls) {
  const chars = Array.from(text.length > 4 * n ? text.slice(0, 4 * n) : text);
  if (chars.length <= n) return el(tag, { class: cls }, text);
  const shown = el(tag, { class: cls }, chars.slice(0, n).join(""), "… ",
    el("button", { type: "button", class: "link", onclick: () => fill(shown, text) }, `Show all ${plural(Array.from(text).length, "character")}`));
  return shown;
}

// valueSize says what a value is (JSON, text or binary) and its size.
function valueSize(r, kind) {
  const what = { json: "JSON", text: "text", binary: "binary" }[kind.kind];
  return `${what}, ${sizeText(r.value_size ?? 0)}${kind.kind === "json" ? `, ${plural(kind.nodes, "JSON value")}` : ""}`;
}

const base64Tag = () => el("span", { class: "tag enc", title: "Not UTF-8: shown as the base64 of its bytes" }, "base64");

// keyFact shows the whole key (up to KEY_SHOWN characters) and its size; a
// binary key is shown as base64, and marked so.
function keyFact(r) {
  if (r.key == null) return el("span", { id: "facts-key", class: "muted" }, "null");
  const binary = r.key_encoding === "base64";
  return el("span", { id: "facts-key" }, binary ? [base64Tag(), " "] : null, clipped(r.key, KEY_SHOWN, "code", "key"), " ",
    el("span", { class: "muted" }, `(${binary ? "binary, shown as base64; " : ""}${sizeText(r.key_size)})`));
}

// valueNotice offers a binary or large value for download (null for others):
// the hex dump shows the start of a binary value only, and a large one is
// better read with a tool than in a page.
function valueNotice(r, kind, download) {
  const n = r.value_size ?? 0;
  const binary = kind.kind === "binary";
  if (kind.kind === "none" || (!binary && n < LARGE_VALUE)) return null;
  if (r.value_schema && binary && n <= HEX_LIMIT) return null; // shown decoded, its hex on asking
  const json = kind.kind === "json";
  const why = binary
    ? `This value is binary: ${sizeText(n)}. ${n > HEX_LIMIT ? `The page shows its first ${HEX_LIMIT.toLocaleString("en")} bytes as hex; download it for all of them.` : "The page shows it as hex; download it to open it with a tool of your own."}`
    : `This value is ${sizeText(n)} of ${json ? "JSON" : "text"}, too large to read usefully in the page: download it to open it in an editor${json ? " or with jq" : ""}.`;
  return el("div", { id: "value-download", class: "callout" }, el("p", {}, why),
    el("div", { class: "actions" }, el("button", { type: "button", onclick: download }, `Download value (${shortSize(n)})`)));
}

// retryPolicy shows the record's retry policy (its numbers as the API wrote
// them: a producer may have set it) and the delay table.
function retryPolicy(r, p) {
  const f = (k) => scalarText(member(p, k));
  return [
    facts([
      ["Next retry", r.next_retry_at ? ago(r.next_retry_at) : r.state === "discarded" ? "none: exhausted, waiting for an operator or a replay rule" : "—"],
      ["Policy", f("backoff_strategy") ? `max_attempts ${f("max_attempts")}, ${f("backoff_strategy")} backoff` : "the queue's"],
      f("initial_interval") ? ["Initial interval", duration(f("initial_interval"))] : null,
      f("max_interval") ? ["Max interval", duration(f("max_interval"))] : null,
      f("backoff_coefficient") ? ["Coefficient", f("backoff_coefficient")] : null,
      ["On exhaustion", f("on_exhaustion") || "—"],
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

// headersTable shows headers as received; one that is not UTF-8 is shown
// as base64, and marked so.
function headersTable(headers, id = "headers") {
  if (headers.length === 0) return el("p", { class: "muted" }, "No headers.");
  return table(["Key", "Value"], headers.map((h) => el("tr", {},
    el("th", { scope: "row", class: "hkey" }, h.key),
    el("td", { class: "msg" }, h.encoding === "base64" ? [base64Tag(), " "] : null, el("span", { class: "hvalue" }, h.value)))), { id });
}

// redeliveryEdit shows an operator's edit for the next redelivery: a
// payload (its JSON as the API wrote it, and the schema that encodes it,
// the encoded bytes as hex) or a value, the target topic and the headers.
function redeliveryEdit(x, payload) {
  const encoded = payload != null && x.value_schema;
  return facts([
    x.queue ? ["Target topic", x.queue] : null,
    payload != null ? ["Payload", [x.value_schema ? el("p", { class: "schema", id: "redelivery-schema" }, `encoded with ${schemaText(x.value_schema)}`) : null,
      el("pre", { class: "raw", id: "redelivery-payload" }, prettyText(payload))]] : null,
    x.value != null ? [encoded ? "Encoded value" : "Value", encoded && x.value_encoding === "base64"
      ? el("pre", { class: "hex", id: "redelivery-value" }, hexDump(x.value))
      : [x.value_encoding === "base64" ? base64Tag() : null, el("pre", { class: "raw", id: "redelivery-value" }, x.value)]] : null,
    (x.headers || []).length ? ["Headers", headersTable(x.headers, "redelivery-headers")] : null,
  ]);
}

// prettyText indents a JSON text, every token as written (itself if it is
// not JSON).
function prettyText(text) {
  try { return pretty(parse(text)); } catch { return text; }
}
