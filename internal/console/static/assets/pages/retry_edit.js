// Retry with edit: change the value, headers or target topic of the
// redelivery (the stored record keeps what was received), review the
// changes against the original, then confirm.

import { el, fill, status } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { reload } from "../lib/nav.js";
import { diffView } from "../lib/diff.js";
import { pretty, stringify } from "../lib/json.js";

// original is the value as the editor starts with it: pretty JSON for a JSON
// payload (so the diff is by line; compact past PRETTY_DEPTH levels), else
// the value as stored.
function original(r) {
  if (r.payload !== undefined) return pretty(r.payload);
  return r.value ?? "";
}

const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

export function retryEditor(r, outcome, close, signal) {
  const isJSON = r.payload !== undefined;
  const before = original(r);
  const value = el("textarea", { id: "edit-value", rows: String(Math.min(24, before.split("\n").length + 2)), spellcheck: "false", "aria-describedby": "edit-value-check" }, before);
  const encoding = el("select", { id: "edit-encoding" }, ["utf8", "base64"].map((e) => el("option", { value: e, selected: (r.value_encoding || "utf8") === e }, e)));
  const asJSON = el("input", { id: "edit-json", type: "checkbox", checked: isJSON });
  const check = el("p", { id: "edit-value-check", class: "check", "aria-live": "polite" });
  const topic = el("input", { id: "edit-topic", placeholder: r.queue, autocomplete: "off", "aria-describedby": "edit-topic-help" });
  const headers = el("tbody", {});
  const review = el("div", { id: "edit-review", class: "review", "aria-live": "polite" });
  const problems = status();

  const addHeader = (k = "", v = "") => {
    const row = el("tr", {},
      el("td", {}, el("input", { class: "hkey", value: k, "aria-label": "Header key", autocomplete: "off" })),
      el("td", {}, el("input", { class: "hval", value: v, "aria-label": "Header value", autocomplete: "off" })),
      el("td", {}, el("button", { type: "button", class: "secondary", onclick: () => row.remove() }, "Remove")));
    headers.append(row);
    row.querySelector("input").focus();
  };

  // validate checks the form; it returns the override or null (and says why).
  const validate = () => {
    const errs = [];
    check.textContent = "";
    check.className = "check";
    if (asJSON.checked) {
      try { JSON.parse(value.value); check.textContent = "Valid JSON."; check.className = "check ok"; } catch (e) {
        errs.push(`value: not valid JSON (${e.message})`);
        check.textContent = `Not valid JSON: ${e.message}`;
        check.className = "check error";
      }
    }
    if (encoding.value === "base64") {
      try { atob(value.value.trim()); } catch { errs.push("value: not valid base64"); }
    }
    const t = topic.value.trim();
    if (t && !TOPIC.test(t)) errs.push("target topic: 1 to 249 of a-z A-Z 0-9 . _ -");
    const hs = [...headers.querySelectorAll("tr")].map((tr) => ({ key: tr.querySelector(".hkey").value.trim(), value: tr.querySelector(".hval").value }));
    hs.forEach((h, i) => { if (!h.key) errs.push(`header ${i + 1}: the key is empty`); });
    if (errs.length) return { errs };
    const override = {};
    const changed = value.value !== before || encoding.value !== (r.value_encoding || "utf8");
    if (changed) {
      // A JSON value is sent compact: the pretty form is only for editing.
      override.value = asJSON.checked ? stringify(JSON.parse(value.value)) : value.value;
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
      changed ? [el("p", {}, "Value (- original, + redelivered):"), diffView(before, asJSON.checked ? pretty(JSON.parse(value.value)) : value.value)] : el("p", {}, "Value: unchanged."),
      el("p", {}, "Target topic: ", override.queue ? el("strong", {}, `${r.queue} → ${override.queue}`) : `unchanged (${t || r.queue})`),
      hs.length ? el("ul", { class: "header-changes" }, hs.map((h) => {
        const old = (r.headers || []).filter((x) => x.key === h.key).map((x) => x.value);
        return el("li", {}, el("code", {}, `${h.key}: ${h.value}`), old.length ? ` (replaces ${old.map((o) => JSON.stringify(o)).join(", ")})` : " (added)");
      })) : el("p", {}, "Headers: unchanged."),
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
    el("div", { class: "field" }, el("label", { for: "edit-value" }, "Value"), value, check),
    el("div", { class: "inline" },
      el("label", { for: "edit-encoding" }, "Encoding"), encoding,
      el("label", { for: "edit-json" }, asJSON, " Check as JSON")),
    el("div", { class: "field" }, el("label", { for: "edit-topic" }, "Target topic"), topic,
      el("small", { id: "edit-topic-help", class: "muted" }, `Empty: the record's topic, ${r.queue}.`)),
    el("fieldset", {}, el("legend", {}, "Headers to set (replace headers of the same key)"),
      el("table", { class: "headers-edit" }, headers),
      el("button", { type: "button", class: "secondary", id: "edit-add-header", onclick: () => addHeader() }, "Add header")),
    problems,
    el("div", { class: "actions" },
      el("button", { type: "button", id: "edit-review-button", onclick: showReview }, "Review changes"),
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    review,
  ];
}
