// Retry with edit of a value decoded from the Schema Registry wire format:
// the operator edits its JSON (the record's payload), which is checked
// against the record's schema as it is typed (POST …/payload/check); the
// review shows the line diff of the JSON, and the retry sends it as
// override.payload, which the server encodes with the record's own schema
// (same schema id, Confluent wire format). The stored record keeps the
// bytes it arrived with.
//
// The payload is read and sent as text (lib/json.js), never through
// JSON.parse: a 19-digit long or a decimal keeps every digit.

import { el, fill, status, plural, sizeText } from "../lib/dom.js";
import { api, apiExact, withRaw } from "../lib/api.js";
import { reload } from "../lib/nav.js";
import { diffView } from "../lib/diff.js";
import { parse, check, pretty, keyOf } from "../lib/json.js";
import { schemaText } from "../lib/value.js";
import { TOPIC, headersEditor, headerChanges } from "./retry_edit.js";

// CHECK_AFTER is how long typing pauses before the payload is checked
// against the schema.
const CHECK_AFTER = 300;

// fieldErrors lists the API's field errors of a payload (422
// validation_error): each field's JSON Pointer in the payload (the field
// says "payload/amount" or "override.payload/amount") and what the schema
// expects. It returns the list's items.
export function fieldErrors(err) {
  const fields = (err && err.details && err.details.fields) || [];
  return fields.map((f) => {
    const path = String(f.field || "").replace(/^(override\.)?payload/, "") || "(the whole value)";
    return el("li", {}, el("code", { class: "path" }, path), " ", f.message || "");
  });
}

// normal is a JSON text laid out as pretty lays it out (every token as
// written), its objects' keys sorted: the schema, not the text, orders the
// fields of the encoded record, so the diff shows values, not spacing or
// order. (Without recursion: a payload may nest deep.)
function normal(text) {
  const doc = parse(text);
  const work = [doc.root];
  while (work.length) {
    const n = work.pop();
    if (n.type === "object") {
      n.entries.sort(([a], [b]) => { const x = keyOf(a), y = keyOf(b); return x < y ? -1 : x > y ? 1 : 0; });
      work.push(...n.entries.map(([, v]) => v));
    } else if (n.type === "array") work.push(...n.items);
  }
  return pretty(doc);
}

export function payloadEditor(r, payloadText, outcome, close, signal) {
  const before = normal(payloadText);
  const rows = Math.min(24, before.split("\n").length + 2);
  const value = el("textarea", { id: "edit-payload", rows: String(rows), spellcheck: "false", "aria-describedby": "edit-payload-check edit-payload-errors" }, before);
  const check_ = el("p", { id: "edit-payload-check", class: "check", "aria-live": "polite" });
  const errors = el("ul", { id: "edit-payload-errors", class: "field-errors", "aria-label": "Where the payload does not match the schema" });
  const topic = el("input", { id: "edit-topic", placeholder: r.queue, autocomplete: "off", "aria-describedby": "edit-topic-help" });
  const headers = headersEditor();
  const review = el("div", { id: "edit-review", class: "review", "aria-live": "polite" });
  const problems = status();
  const schema = schemaText(r.value_schema);

  // checked is the answer of the latest schema check: for the text it
  // checked, valid true, false (errors shown) or null (checking unavailable).
  let checked = { text: null, valid: null };
  let pending = null, timer = 0;
  const say = (cls, text) => { check_.className = `check ${cls}`; check_.textContent = text; };
  const stop = () => { clearTimeout(timer); pending?.abort(); pending = null; };
  signal.addEventListener("abort", stop);

  const schemaCheck = async (text) => {
    pending = new AbortController();
    const mine = pending;
    try {
      const res = await api(`/ojs/v1/dead-letter/${r.id}/payload/check`, { method: "POST", json: withRaw({}, "payload", text), signal: mine.signal });
      if (mine !== pending) return;
      checked = { text, valid: true };
      fill(errors);
      say("ok", res && res.value_schema
        ? `Valid: matches ${schemaText(res.value_schema)}${res.size != null ? `; ${sizeText(res.size)} encoded` : ""}.`
        : "Valid JSON.");
    } catch (err) {
      if (mine !== pending || err.name === "AbortError") return;
      if (err.status === 422) {
        checked = { text, valid: false };
        const items = fieldErrors(err);
        fill(errors, items);
        say("error", items.length ? `Does not match the schema: ${plural(items.length, "field error")}.` : `Does not match the schema: ${err.message}`);
      } else {
        // An older server (404) or a registry out of reach (503): the
        // retry itself is still checked when it is sent.
        checked = { text, valid: null };
        fill(errors);
        say("muted", `Checking unavailable${err.status === 404 || err.status === 405 ? "" : ` (${err.message})`}: the payload is checked against the schema when the retry is sent.`);
      }
    } finally {
      if (mine === pending) pending = null;
    }
  };

  // syntax checks the text as JSON at once; the schema check follows once
  // typing pauses. It returns the JSON syntax error, or null.
  const syntax = () => {
    stop();
    const err = check(value.value);
    if (err) {
      fill(errors);
      checked = { text: null, valid: null };
      say("error", `Not valid JSON: ${err.message}.`);
      return err;
    }
    if (checked.text !== value.value) {
      say("", "Checking against the schema…");
      const text = value.value;
      timer = setTimeout(() => schemaCheck(text), CHECK_AFTER);
    }
    return null;
  };
  value.addEventListener("input", () => { fill(review); problems.clear(); syntax(); });
  schemaCheck(value.value);

  const showReview = () => {
    problems.clear();
    fill(review);
    const errs = [];
    const bad = check(value.value);
    if (bad) errs.push(`payload: not valid JSON (${bad.message})`);
    else if (checked.text === value.value && checked.valid === false) errs.push("payload: does not match the schema (see the field errors under it)");
    const t = topic.value.trim();
    if (t && !TOPIC.test(t)) errs.push("target topic: 1 to 249 of a-z A-Z 0-9 . _ -");
    const hs = headers.rows();
    hs.forEach((h, i) => { if (!h.key) errs.push(`header ${i + 1}: the key is empty`); });
    if (errs.length) { problems.fail(errs.join("; ")); return; }
    const after = normal(value.value);
    const changed = after !== before;
    const override = {};
    if (t && t !== r.queue) override.queue = t;
    if (hs.length) override.headers = hs;
    if (!changed && Object.keys(override).length === 0) {
      problems.fail("Nothing is changed: use Retry now to redeliver the record as it is.");
      return;
    }
    const text = value.value.trim();
    fill(review,
      el("h3", {}, "Review"),
      changed ? [el("p", {}, `Payload (- original, + redelivered), encoded with ${schema}:`), diffView(before, after)] : el("p", {}, "Payload: unchanged (the bytes as received are sent)."),
      el("p", {}, "Target topic: ", override.queue ? el("strong", {}, `${r.queue} → ${override.queue}`) : `unchanged (${t || r.queue})`),
      headerChanges(r, hs),
      el("div", { class: "actions" },
        el("button", { type: "button", id: "edit-confirm", onclick: async (e) => {
          e.target.disabled = true;
          try {
            const body = changed ? withRaw(override, "payload", text) : JSON.stringify(override);
            await apiExact(`/ojs/v1/dead-letter/${r.id}/retry`, { method: "POST", json: `{"override":${body}}` });
            outcome.ok("Retried with your changes: the edited record, encoded with its schema, goes back to its topic now.");
            close();
            setTimeout(() => { if (!signal.aborted) reload(); }, 800);
          } catch (err) {
            if (err.status === 422) {
              const items = fieldErrors(err);
              fill(errors, items);
              say("error", `Does not match the schema: ${plural(items.length, "field error")}.`);
            }
            problems.fail(err.message);
            e.target.disabled = false;
          }
        } }, "Confirm retry"),
        el("button", { type: "button", class: "secondary", onclick: () => fill(review) }, "Back to editing")));
    review.querySelector("#edit-confirm").focus();
  };

  return [
    el("h2", {}, "Retry with edit"),
    el("p", { class: "muted" }, "The changes apply to the redelivered record only; the stored record keeps the bytes it arrived with."),
    el("div", { class: "field" }, el("label", { for: "edit-payload" }, "Payload ",
      el("span", { class: "small muted" }, `decoded with ${schema}; checked against it as you type, and encoded with it when sent`)),
    value, check_, errors),
    el("div", { class: "field" }, el("label", { for: "edit-topic" }, "Target topic"), topic,
      el("small", { id: "edit-topic-help", class: "muted" }, `Empty: the record's topic, ${r.queue}.`)),
    headers.node,
    problems,
    el("div", { class: "actions" },
      el("button", { type: "button", id: "edit-review-button", onclick: showReview }, "Review changes"),
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    review,
  ];
}
