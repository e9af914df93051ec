// The audit log: every state-changing call by a known key, refused ones too;
// a configuration change shows what it changed (its before and after).

import { el, link, ago } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go } from "../lib/nav.js";

const FILTERS = [["key_name", "Key"], ["action", "Action"], ["target", "Target"], ["since", "Since (RFC 3339)"], ["until", "Until (RFC 3339)"]];

export async function audit(signal) {
  const params = new URLSearchParams(location.search);
  const q = new URLSearchParams({ limit: "100" });
  for (const [f] of FILTERS) if (params.get(f)) q.set(f, params.get(f));
  if (params.get("cursor")) q.set("cursor", params.get("cursor"));
  const page = await api("/ojs/v1/audit?" + q, { signal });
  const form = el("form", { class: "filters", "aria-label": "Filters", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [f] of FILTERS) if (form.elements[f].value.trim()) next.set(f, form.elements[f].value.trim());
    go(`/ui/audit${next.toString() ? "?" + next : ""}`);
  } }, el("div", { class: "filterbar" },
    FILTERS.map(([f, label]) => el("label", {}, label, el("input", { name: f, value: params.get(f) || "", autocomplete: "off" }))),
    el("div", { class: "formactions" }, el("button", { type: "submit" }, "Filter"))));
  const next = new URLSearchParams(params);
  next.set("cursor", page.pagination?.next_cursor || "");
  const items = page.items || [];
  render(
    el("h1", {}, "Audit log"), form,
    items.length === 0 ? el("p", { class: "muted" }, "No audited calls match. Retries, deletes, bulk tasks and queue changes are recorded here.")
      : el("div", { class: "tablewrap" }, el("table", { id: "audit" },
        el("thead", {}, el("tr", {}, ["When", "Key", "Action", "Target", "Records", "Status", "Change", "Request"].map((h, i) =>
          el("th", { scope: "col", class: i === 4 ? "num" : i === 7 ? "opt" : null }, h)))),
        el("tbody", {}, items.map((a) => el("tr", {},
          el("td", { class: "when" }, ago(a.at)), el("td", {}, a.key_name), el("td", {}, a.action),
          el("td", { class: "msg" }, a.target || (a.filter ? JSON.stringify(a.filter) : "")),
          el("td", { class: "num" }, a.count ?? ""), el("td", { class: a.status >= 400 ? "error" : "" }, String(a.status)),
          el("td", { class: "change" }, changeView(a)),
          el("td", { class: "muted opt" }, a.request_id)))))),
    page.pagination?.has_more ? el("p", {}, link(`/ui/audit?${next}`, "Older →", { rel: "next" })) : null,
  );
}

// NOISE are fields of a changed thing that change with every save.
const NOISE = new Set(["created_at", "updated_at"]);

// changeView shows what a configuration change changed: one line per field
// (dotted path: before → after), the whole before and after on demand.
function changeView(a) {
  if (a.before == null && a.after == null) return "";
  const before = flatten(a.before), after = flatten(a.after);
  const keys = [...new Set([...before.keys(), ...after.keys()])].filter((k) => !NOISE.has(k) && before.get(k) !== after.get(k)).sort();
  const verb = a.before == null ? "created" : a.after == null ? "removed" : keys.length === 0 ? "unchanged" : null;
  return el("details", { class: "audit-change" },
    el("summary", {}, verb ? `${verb}${keys.length && verb !== "removed" ? `: ${plainList(keys)}` : ""}` : plainList(keys)),
    keys.length ? el("ul", { class: "fields" }, keys.map((k) => el("li", {},
      el("code", {}, k), ": ",
      el("span", { class: "del" }, before.has(k) ? before.get(k) : "(none)"), " → ",
      el("span", { class: "add" }, after.has(k) ? after.get(k) : "(none)")))) : null,
    el("div", { class: "beforeafter" },
      el("div", {}, el("strong", {}, "Before"), el("pre", {}, a.before == null ? "(none)" : JSON.stringify(a.before, null, 2))),
      el("div", {}, el("strong", {}, "After"), el("pre", {}, a.after == null ? "(none)" : JSON.stringify(a.after, null, 2)))));
}

// plainList names at most three fields, and how many more.
function plainList(keys) {
  return keys.length <= 3 ? keys.join(", ") : `${keys.slice(0, 3).join(", ")} and ${keys.length - 3} more`;
}

// flatten maps a JSON value's leaves to their dotted paths, as JSON text.
function flatten(v, prefix = "", out = new Map()) {
  if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out.set(prefix, JSON.stringify(v));
  }
  return out;
}
