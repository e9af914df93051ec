// The audit log: every state-changing call by a known key, refused ones too.

import { el, link, table, ago } from "../lib/dom.js";
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
  } }, FILTERS.map(([f, label]) => el("label", {}, label, el("input", { name: f, value: params.get(f) || "", autocomplete: "off" }))),
  el("div", { class: "formactions" }, el("button", { type: "submit" }, "Filter")));
  const next = new URLSearchParams(params);
  next.set("cursor", page.pagination?.next_cursor || "");
  const items = page.items || [];
  render(
    el("h1", {}, "Audit log"), form,
    items.length === 0 ? el("p", { class: "muted" }, "No audited calls match. Retries, deletes, bulk tasks and queue changes are recorded here.")
      : table(["When", "Key", "Action", "Target", "Records", "Status", "Request"], items.map((a) => el("tr", {},
        el("td", {}, ago(a.at)), el("td", {}, a.key_name), el("td", {}, a.action),
        el("td", { class: "msg" }, a.target || (a.filter ? JSON.stringify(a.filter) : "")),
        el("td", { class: "num" }, a.count ?? ""), el("td", { class: a.status >= 400 ? "error" : "" }, String(a.status)),
        el("td", { class: "muted" }, a.request_id))), { id: "audit" }),
    page.pagination?.has_more ? el("p", {}, link(`/ui/audit?${next}`, "Older →", { rel: "next" })) : null,
  );
}
