// The record list: every filter of GET /ojs/v1/dead-letter in the URL, keyset
// (cursor) paging, "N new" from the event stream, and bulk retry or purge of
// everything the filter matches.

import { el, link, table, ago, plural, shortSize, sizeText } from "../lib/dom.js";
import { api, subscribe } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go } from "../lib/nav.js";
import { bulkPanel } from "./bulk.js";

// FILTERS are the list's query parameters, with their labels and inputs.
const FILTERS = [
  ["queue", "Queue"], ["type", "Type"], ["error_type", "Error type"],
  ["state", "State", ["retryable", "available", "completed", "discarded"]],
  ["exhaustion", "Exhaustion", ["dead_letter", "discard"]],
  ["unacknowledged", "Unacknowledged", ["true", "false"]],
  ["since", "Since (RFC 3339)"], ["until", "Until (RFC 3339)"], ["key", "Key"], ["q", "Text in value"],
  ["path", "JSON path"], ["value", "JSON value at path"], ["header", "Header (key=value)"], ["incident", "Incident"],
];

export async function records(signal) {
  const params = new URLSearchParams(location.search);
  const query = new URLSearchParams();
  for (const [f] of FILTERS) if (params.get(f)) query.set(f, params.get(f));
  const listQuery = new URLSearchParams(query);
  if (params.get("cursor")) listQuery.set("cursor", params.get("cursor"));
  const page = await api("/ojs/v1/dead-letter?" + listQuery, { signal });
  const pg = page.pagination;
  const next = new URLSearchParams(query);
  next.set("cursor", pg.next_cursor || "");
  const filtered = [...query.keys()].length > 0;
  const fresh = newRecordsNotice(query);
  render(
    el("h1", {}, "Records"),
    filterForm(params),
    fresh,
    el("div", { class: "listbar" },
      el("p", { class: "muted", id: "total" }, `${pg.total.toLocaleString("en")}${pg.total_capped ? "+" : ""}${pg.total_estimated ? " (estimated)" : ""} matching`,
        params.get("cursor") ? ["; ", link(`/ui/records${query.toString() ? "?" + query : ""}`, "first page")] : null),
      bulkPanel(query, filtered)),
    recordsTable(page.items || []),
    pg.has_more ? el("p", {}, link(`/ui/records?${next}`, "Next page →", { rel: "next" })) : null,
  );
  subscribe(eventQuery(query), (ev) => { if (ev.type === "dead_letter.added") fresh.add(); }, signal);
}

function filterForm(params) {
  const form = el("form", { class: "filters", "aria-label": "Filters", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [f] of FILTERS) {
      const v = form.elements[f].value.trim();
      if (v) next.set(f, v);
    }
    go(`/ui/records${next.toString() ? "?" + next : ""}`);
  } },
  FILTERS.map(([f, label, choices]) => el("label", {}, label,
    choices ? el("select", { name: f }, ["", ...choices].map((s) => el("option", { value: s, selected: params.get(f) === s }, s || "any")))
      : el("input", { name: f, value: params.get(f) || "", autocomplete: "off" }))),
  el("div", { class: "formactions" },
    el("button", { type: "submit" }, "Filter"),
    link("/ui/records", "Clear", { class: "button secondary" })));
  return form;
}

// newRecordsNotice counts records added since the page loaded (by the event
// stream, for the same queue) and offers to show them.
function newRecordsNotice(query) {
  let n = 0;
  const text = el("span");
  const box = el("p", { class: "fresh", role: "status", hidden: true }, text, " ",
    el("button", { type: "button", class: "secondary", onclick: () => {
      const q = new URLSearchParams(query);
      go(`/ui/records${q.toString() ? "?" + q : ""}`, { replace: true });
    } }, "Show"));
  box.add = () => {
    n++;
    text.textContent = `${plural(n, "new failure")} since this page loaded${[...query.keys()].some((k) => k !== "queue") ? " (not all may match the other filters)" : ""}.`;
    box.hidden = false;
  };
  return box;
}

function eventQuery(query) {
  const q = new URLSearchParams({ type: "dead_letter.added" });
  if (query.get("queue")) q.set("topic", query.get("queue"));
  return q.toString();
}

// recordsTable lists records from the API's previews: a list item's key
// is at most 1 KiB and its errors the latest one, cut (docs/api.md).
export function recordsTable(items) {
  if (items.length === 0) return el("p", { class: "muted empty-list" }, "No records match.");
  return table(["Key", "Queue", "Error type", "Message", "Attempt", "State", "Age"],
    items.map((r) => {
      const errors = r.errors || [];
      const last = errors[errors.length - 1] || {};
      return el("tr", {},
        keyCell(r),
        el("td", { class: "qname" }, r.queue), el("td", { class: "etype" }, r.error_type),
        el("td", { class: "msg" }, shorten(last.message || "", MESSAGE_CHARS, last.truncated)),
        el("td", { class: "num" }, `${r.attempt}/${r.max_attempts}`),
        el("td", { class: `state-${r.state}` }, stateText(r)),
        el("td", {}, ago(r.created_at)));
    }), { class: "records" });
}

// KEY_CHARS and MESSAGE_CHARS are how much of a key and an error message a
// row shows; the record page shows them whole.
const KEY_CHARS = 60;
const MESSAGE_CHARS = 300;

// shorten cuts s to n characters (not UTF-16 halves) with an ellipsis, also
// when the API already cut it (more).
function shorten(s, n, more = false) {
  const chars = Array.from(s);
  if (chars.length > n) return chars.slice(0, n).join("") + "…";
  return more ? s + "…" : s;
}

// keyCell shows the start of a key, linking to its record; a key cut short
// ends in an ellipsis and says its whole size.
function keyCell(r) {
  const href = `/ui/records/${r.id}`;
  if (r.key == null) return el("td", { class: "key" }, link(href, "(no key)"));
  const shown = shorten(r.key, KEY_CHARS, r.key_truncated);
  const whole = shown === r.key;
  return el("td", { class: "key" },
    link(href, shown, whole ? {} : { title: `A key of ${sizeText(r.key_size)}: the record shows it whole` }),
    whole ? null : el("span", { class: "muted size" }, ` ${shortSize(r.key_size)}`),
    r.key_encoding === "base64" ? [" ", el("span", { class: "tag" }, "base64")] : null);
}

export const stateText = (r) => r.in_flight ? `${r.state} (being redelivered now)`
  : r.exhaustion ? `${r.state} (${r.exhaustion})`
  : r.state === "available" && r.unacknowledged_at ? "available (unacknowledged)"
  : r.state === "completed" && r.completed_by ? `completed (${r.completed_by === "ack" ? "acknowledged" : "redelivered"})`
  : r.state;
