// Retry with edit: change the value, headers or target topic of the
// redelivery (the stored record keeps what was received), review the
// changes against the original, then confirm.

import { el, fill, status, plural } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { reload } from "../lib/nav.js";
import { diffView } from "../lib/diff.js";
import { check } from "../lib/json.js";

// The editor holds the value as stored, byte for byte, and what is sent is
// what it holds: checking it as JSON changes nothing in it (lib/json.js
// checks the text; no value goes through JSON.parse and back), so a field
// the operator leaves alone is produced exactly as it arrived.
//
// A textarea holds line breaks as LF only: a value whose lines all end in
// CR LF is edited with LF and sent with CR LF again; one mixing the two is
// sent with LF, and the editor says so.
function lineBreaks(text) {
  const crs = (text.match(/\r/g) || []).length;
  if (crs === 0) return "lf";
  return crs === (text.match(/\r\n/g) || []).length && crs === (text.match(/\n/g) || []).length ? "crlf" : "mixed";
}

export const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

// headersEditor is the table of headers to set on the redelivery: node is
// the fieldset, rows() the headers as typed ({ key, value }).
export function headersEditor() {
  const body = el("tbody", {});
  const add = () => {
    const row = el("tr", {},
      el("td", {}, el("input", { class: "hkey", "aria-label": "Header key", autocomplete: "off" })),
      el("td", {}, el("input", { class: "hval", "aria-label": "Header value", autocomplete: "off" })),
      el("td", {}, el("button", { type: "button", class: "secondary", onclick: () => row.remove() }, "Remove")));
    body.append(row);
    row.querySelector("input").focus();
  };
  const node = el("fieldset", {}, el("legend", {}, "Headers to set (replace headers of the same key)"),
    el("table", { class: "headers-edit" }, body),
    el("button", { type: "button", class: "secondary", id: "edit-add-header", onclick: add }, "Add header"));
  const rows = () => [...body.querySelectorAll("tr")].map((tr) => ({ key: tr.querySelector(".hkey").value.trim(), value: tr.querySelector(".hval").value }));
  return { node, rows };
}

// headerChanges lists the headers an edit sets, each saying what it replaces.
export function headerChanges(r, hs) {
  return hs.length ? el("ul", { class: "header-changes" }, hs.map((h) => {
    const old = (r.headers || []).filter((x) => x.key === h.key).map((x) => x.value);
    return el("li", {}, el("code", {}, `${h.key}: ${h.value}`), old.length ? ` (replaces ${old.map((o) => JSON.stringify(o)).join(", ")})` : " (added)");
  })) : el("p", {}, "Headers: unchanged.");
}

export function retryEditor(r, kind, outcome, close, signal) {
  const isJSON = kind.kind === "json";
  const stored = r.value ?? "";
  const eol = r.value_encoding === "base64" ? "lf" : lineBreaks(stored);
  const before = eol === "lf" ? stored : stored.replace(/\r\n?/g, "\n");
  const rows = Math.min(24, Math.max(before.split("\n").length, Math.ceil(before.length / 100)) + 2);
  const value = el("textarea", { id: "edit-value", rows: String(rows), spellcheck: "false", "aria-describedby": "edit-value-check" }, before);
  const encoding = el("select", { id: "edit-encoding" }, ["utf8", "base64"].map((e) => el("option", { value: e, selected: (r.value_encoding || "utf8") === e }, e)));
  const asJSON = el("input", { id: "edit-json", type: "checkbox", checked: isJSON });
  const check_ = el("p", { id: "edit-value-check", class: "check", "aria-live": "polite" });
  const topic = el("input", { id: "edit-topic", placeholder: r.queue, autocomplete: "off", "aria-describedby": "edit-topic-help" });
  const headers = headersEditor();
  const review = el("div", { id: "edit-review", class: "review", "aria-live": "polite" });
  const problems = status();

  // validate checks the form; it returns the override or null (and says why).
  const validate = () => {
    const errs = [];
    check_.textContent = "";
    check_.className = "check";
    if (asJSON.checked) {
      const err = check(value.value);
      if (err) {
        errs.push(`value: not valid JSON (${err.message})`);
        check_.textContent = `Not valid JSON: ${err.message}.`;
        check_.className = "check error";
      } else {
        check_.textContent = "Valid JSON.";
        check_.className = "check ok";
      }
    }
    if (encoding.value === "base64") {
      try { atob(value.value.trim()); } catch { errs.push("value: not valid base64"); }
    }
    const t = topic.value.trim();
    if (t && !TOPIC.test(t)) errs.push("target topic: 1 to 249 of a-z A-Z 0-9 . _ -");
    const hs = headers.rows();
    hs.forEach((h, i) => { if (!h.key) errs.push(`header ${i + 1}: the key is empty`); });
    if (errs.length) return { errs };
    const override = {};
    const changed = value.value !== before || encoding.value !== (r.value_encoding || "utf8");
    if (changed) {
      // The text as typed, with the stored value's CR LF line breaks back.
      override.value = eol === "crlf" && encoding.value === "utf8" ? value.value.replace(/\n/g, "\r\n") : value.value;
      override.value_encoding = encoding.value;
    }
    if (t && t !== r.queue) override.queue = t;
    if (hs.length) override.headers = hs;
    return { override, changed, hs, t };
  };
  value.addEventListener("input", () => { fill(review); if (asJSON.checked) validate(); });
  asJSON.addEventListener("change", validate);
  if (isJSON) validate();

  const showReview = () => {
    const v = validate();
    problems.clear();
    if (v.errs) { problems.fail(v.errs.join("; ")); fill(review); return; }
    const { override, changed, hs, t } = v;
    if (Object.keys(override).length === 0) {
      problems.fail("Nothing is changed: use Retry now to redeliver the record as it is.");
      return;
    }
    fill(review,
      el("h3", {}, "Review"),
      changed ? [el("p", {}, "Value (- original, + redelivered; the text is sent as it is here):"), diffView(before, value.value)] : el("p", {}, "Value: unchanged."),
      el("p", {}, "Target topic: ", override.queue ? el("strong", {}, `${r.queue} → ${override.queue}`) : `unchanged (${t || r.queue})`),
      headerChanges(r, hs),
      el("div", { class: "actions" },
        el("button", { type: "button", id: "edit-confirm", onclick: async (e) => {
          e.target.disabled = true;
          try {
            await api(`/ojs/v1/dead-letter/${r.id}/retry`, { method: "POST", body: { override } });
            outcome.ok("Retried with your changes: the edited record goes back to its topic now.");
            close();
            setTimeout(() => { if (!signal.aborted) reload(); }, 800);
          } catch (err) {
            problems.fail(err.message);
            e.target.disabled = false;
          }
        } }, "Confirm retry"),
        el("button", { type: "button", class: "secondary", onclick: () => fill(review) }, "Back to editing")));
    review.querySelector("#edit-confirm").focus();
  };

  return [
    el("h2", {}, "Retry with edit"),
    el("p", { class: "muted" }, "The changes apply to the redelivered record only; the stored record keeps what was received."),
    el("div", { class: "field" }, el("label", { for: "edit-value" }, "Value ",
      el("span", { class: "small muted" }, `as stored${isJSON ? `: ${plural(kind.nodes, "JSON value")}` : ""}; what you leave alone is sent byte for byte`)), value, check_,
    eol === "mixed" ? el("p", { class: "check error", id: "edit-eol" }, "This value mixes CR LF and LF line breaks: the editor holds them as LF, and an edited value is sent with LF line breaks.") : null),
    el("div", { class: "inline" },
      el("label", { for: "edit-encoding" }, "Encoding"), encoding,
      el("label", { for: "edit-json" }, asJSON, " Check as JSON")),
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
