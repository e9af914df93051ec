// The record list: every filter of GET /ojs/v1/dead-letter in the URL (the
// everyday ones in a bar, the rest under "More filters"), queue and error
// type picked from what the API knows, time presets, sortable columns,
// keyset paging both ways, "N new" from the event stream, per-row retry and
// delete, and bulk retry or purge of the picked rows or of everything the
// filter matches.

import { el, fill, link, table, ago, plural, shortSize, sizeText, status } from "../lib/dom.js";
import { api, subscribe } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go } from "../lib/nav.js";
import { writeButton } from "../lib/write.js";
import { filterKeys, choices } from "../lib/filter.js";
import { bulkPanel, bulkFilter } from "./bulk.js";
import { exportPath, exportRecords } from "../lib/download.js";

// BAR are the filters in the bar; the list's other filter keys go under
// "More filters". Every field comes from the server's key table
// (lib/filter.js): its label, its choices, its example as the hint.
const BAR = ["queue", "error_type", "state"];

// listFilters splits the keys the list takes into the bar's and the others
// (in the table's order); all are every filter the API takes, as the list's
// URL holds them.
function listFilters(keys) {
  const all = keys.filter((k) => k.sources.includes("list"));
  return {
    all,
    primary: BAR.map((name) => all.find((k) => k.name === name)).filter(Boolean),
    more: all.filter((k) => !BAR.includes(k.name)),
  };
}

// WITHIN are the time presets: the console's "within" parameter, turned
// into since= when the page asks the API, so a bookmarked "last hour" stays
// the last hour.
const WITHIN = [["15m", "last 15 min", 15 * 60], ["1h", "last hour", 3600], ["24h", "last 24 hours", 86400], ["7d", "last 7 days", 7 * 86400]];

// SORTS are the sortable columns: the API's sort field, the order a first
// click asks for, the words for each direction, and whether it needs a
// queue (all but age do: the API reads them from per-queue indexes).
const SORTS = {
  created_at: { first: "-created_at", label: "Age", asc: "oldest first", desc: "newest first", needsQueue: false },
  attempt: { first: "-attempt", label: "Attempt", asc: "fewest first", desc: "most first", needsQueue: true },
  next_retry_at: { first: "next_retry_at", label: "Next retry", asc: "soonest first", desc: "latest first", needsQueue: true },
  failed_at: { first: "-failed_at", label: "Last failed", asc: "earliest first", desc: "latest first", needsQueue: true },
};

const PICKS = 20; // suggestions in a pick-list

export async function records(signal) {
  const params = new URLSearchParams(location.search);
  const keys = await filterKeys();
  const filters = listFilters(keys);
  const view = new URLSearchParams(); // the filters, as the URL holds them
  for (const { name } of filters.all) for (const v of params.getAll(name)) if (v) view.append(name, v);
  const within = WITHIN.find(([w]) => w === params.get("within"));
  if (within) view.set("within", within[0]);
  const query = apiQuery(view); // the filters, as the API takes them
  const sort = params.get("sort") || "-created_at";
  const listQuery = new URLSearchParams(query);
  if (sort !== "-created_at") listQuery.set("sort", sort);
  if (params.get("cursor")) listQuery.set("cursor", params.get("cursor"));
  const page = await api("/ojs/v1/dead-letter?" + listQuery, { signal });
  const pg = page.pagination;
  const items = page.items || [];
  const filtered = [...query.keys()].length > 0;
  const fresh = newRecordsNotice(view);
  const here = (extra = {}) => {
    const q = new URLSearchParams(view);
    if (sort !== "-created_at") q.set("sort", sort);
    for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
    return `/ui/records${q.toString() ? "?" + q : ""}`;
  };
  const outcome = status();
  outcome.id = "row-status";
  const picked = selection(query, items);
  const queue = query.get("queue");
  render(
    el("h1", {}, "Records"),
    filterBar(filters, params, view, signal),
    fresh,
    el("div", { class: "listbar" },
      el("p", { class: "muted", id: "total" }, `${pg.total.toLocaleString("en")}${pg.total_capped ? "+" : ""}${pg.total_estimated ? " (estimated)" : ""} matching`,
        params.get("cursor") ? ["; ", link(here(), "first page")] : null),
      exportAction(query, filtered, signal),
      bulkPanel(() => bulkFilter(query, keys), { filtered, queue: onlyQueue(query) })),
    picked.bar,
    outcome,
    recordsTable(items, { sort, queue, sortHref: (s) => here({ sort: s }), picked, outcome }),
    pager(pg, here),
  );
  subscribe(eventQuery(query), (ev) => { if (ev.type === "dead_letter.added") fresh.add(); }, signal);
}

// exportAction offers the records the filter matches (every record when
// none is set) as an NDJSON file: a link to the export, fetched with the
// caller's key (a plain link could not carry it) and saved under the name
// the server gives it. Reads only: any key may export.
function exportAction(query, filtered, signal) {
  const saved = status();
  saved.id = "export-status";
  const a = el("a", { href: exportPath(query), id: "export", class: "button secondary",
    title: `Download ${filtered ? "the matching records" : "every record"} as NDJSON, whole (redrive dlq import reads it back)` },
  filtered ? "Export matching" : "Export all");
  a.addEventListener("click", async (e) => {
    e.preventDefault();
    if (a.getAttribute("aria-busy")) return;
    a.setAttribute("aria-busy", "true");
    saved.clear();
    saved.textContent = "Exporting…";
    try {
      const { name, size, count } = await exportRecords(query, signal);
      saved.ok(`Exported ${plural(count, "record")} as ${name}: ${sizeText(size)}.`);
    } catch (err) {
      if (err.name !== "AbortError") saved.fail(`Export: ${err.message}`);
    } finally { a.removeAttribute("aria-busy"); }
  });
  return [a, saved];
}

// apiQuery is the API's query for a view: a time preset becomes since=.
function apiQuery(view) {
  const q = new URLSearchParams(view);
  q.delete("within");
  const within = WITHIN.find(([w]) => w === view.get("within"));
  if (within) {
    q.delete("since");
    q.delete("until");
    q.set("since", new Date(Date.now() - within[2] * 1000).toISOString());
  }
  return q;
}

// onlyQueue is the queue a filter holds when it holds nothing else.
function onlyQueue(query) {
  const keys = [...query.keys()];
  return keys.length === 1 && keys[0] === "queue" ? query.get("queue") : null;
}

// filterBar is the compact filter form: queue, error type, state and time
// in a row, the rest under "More filters" (open when one of them is set).
function filterBar(filters, params, view, signal) {
  const moreSet = filters.more.filter((k) => params.get(k.name)).length;
  const presets = el("select", { name: "within", id: "filter-within" },
    el("option", { value: "" }, "any time"),
    WITHIN.map(([w, label]) => el("option", { value: w, selected: view.get("within") === w }, label)),
    el("option", { value: "custom", selected: !view.get("within") && (params.get("since") || params.get("until")) }, "between… (RFC 3339)"));
  const more = el("details", { class: "morefilters", open: moreSet > 0 },
    el("summary", {}, "More filters", moreSet ? ` (${moreSet} set)` : ""),
    el("div", { class: "moregrid" }, filters.more.map((k) => field(k, params))));
  presets.addEventListener("change", () => {
    if (presets.value === "custom") {
      more.open = true;
      form.elements.since.focus();
    }
  });
  const form = el("form", { class: "filters", "aria-label": "Filters", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const { name } of filters.all) {
      const v = form.elements[name].value.trim();
      if (v) next.set(name, v);
    }
    const w = form.elements.within.value;
    if (w && w !== "custom") {
      next.set("within", w);
      next.delete("since");
      next.delete("until");
    }
    const sort = new URLSearchParams(location.search).get("sort");
    // A sort that needs a queue is dropped with it.
    if (sort && (next.get("queue") || !SORTS[sort.replace(/^-/, "")]?.needsQueue)) next.set("sort", sort);
    go(`/ui/records${next.toString() ? "?" + next : ""}`);
  } },
  el("div", { class: "filterbar" },
    filters.primary.map((k) => field(k, params)),
    el("label", {}, "Stored", presets),
    el("div", { class: "formactions" },
      el("button", { type: "submit" }, "Filter"),
      link("/ui/records", "Clear", { class: "button secondary" }))),
  more);
  pickList(form.elements.queue, "queue-options", signal, async (text) => {
    const q = new URLSearchParams({ limit: String(PICKS), sort: "total" });
    if (text) q.set("q", text);
    const page = await api("/ojs/v1/queues?" + q, { signal });
    return (page.items || []).map((x) => [x.name, plural(x.stats.total, "record")]);
  });
  pickList(form.elements.error_type, "error-type-options", signal, async (text) => {
    const q = new URLSearchParams({ limit: String(PICKS) });
    if (text) q.set("q", text);
    const queue = form.elements.queue.value.trim();
    if (queue) q.set("queue", queue);
    const page = await api("/ojs/v1/dead-letter/error-types?" + q, { signal });
    return (page.items || []).map((x) => [x.error_type, plural(x.count, "record")]);
  });
  return form;
}

// field is a key's form field: a select of its choices, or a text input
// with its example as the hint.
function field(k, params) {
  const opts = choices(k);
  return el("label", { title: k.doc }, k.label,
    opts ? el("select", { name: k.name }, ["", ...opts].map((s) => el("option", { value: s, selected: params.get(k.name) === s }, s || "any")))
      : el("input", { name: k.name, value: params.get(k.name) || "", autocomplete: "off", placeholder: k.example }));
}

// pickList offers what the API knows as the input's suggestions (a
// datalist), asked for when the input is focused or clicked and as the
// user types.
function pickList(input, id, signal, fetch) {
  const list = el("datalist", { id });
  input.setAttribute("list", id);
  input.after(list);
  let timer = null;
  let asked = null;
  const ask = () => {
    const text = input.value.trim();
    if (text === asked) return;
    asked = text;
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        const options = await fetch(text);
        if (!signal.aborted) fill(list, options.map(([value, label]) => el("option", { value, label })));
      } catch { /* no suggestions: the field still takes any text */ }
    }, 150);
  };
  for (const ev of ["focus", "pointerdown", "input"]) input.addEventListener(ev, ask);
}

// selection keeps the rows picked by their checkboxes, with the bar that
// retries or purges them (a bulk call with their ids).
function selection(query, items) {
  const ids = new Set();
  const count = el("span", { id: "picked-n" });
  const panel = bulkPanel(() => ({ ids: [...ids] }), { picked: true, label: "selected", id: "picked" });
  const bar = el("div", { class: "pickbar", id: "pickbar", hidden: true, role: "region", "aria-label": "Selected records" },
    count, panel,
    el("button", { type: "button", class: "secondary", onclick: () => set([], false) }, "Clear selection"));
  const boxes = () => [...document.querySelectorAll("table.records input.pick")];
  const set = (changed, on) => {
    for (const id of changed) if (on) ids.add(id); else ids.delete(id);
    if (changed.length === 0) ids.clear();
    for (const b of boxes()) b.checked = ids.has(b.value);
    const all = document.getElementById("pick-all");
    if (all) {
      all.checked = items.length > 0 && items.every((r) => ids.has(r.id));
      all.indeterminate = ids.size > 0 && !all.checked;
    }
    bar.hidden = ids.size === 0;
    count.textContent = `${plural(ids.size, "record")} selected:`;
    if (ids.size === 0) panel.close();
  };
  return { bar, ids, set, all: () => items.map((r) => r.id) };
}

// pager links to the pages before and after (the API's keyset cursors).
function pager(pg, here) {
  if (!pg.prev_cursor && !pg.next_cursor) return null;
  return el("nav", { class: "pager", "aria-label": "Pages" },
    pg.prev_cursor ? link(here({ cursor: pg.prev_cursor }), "← Previous page", { rel: "prev", id: "page-prev" }) : el("span"),
    pg.next_cursor ? link(here({ cursor: pg.next_cursor }), "Next page →", { rel: "next", id: "page-next" }) : null);
}

// newRecordsNotice counts records added since the page loaded (by the event
// stream, for the same queue) and offers to show them.
function newRecordsNotice(view) {
  let n = 0;
  const text = el("span");
  const box = el("p", { class: "fresh", role: "status", hidden: true }, text, " ",
    el("button", { type: "button", class: "secondary", onclick: () => {
      const q = new URLSearchParams(location.search);
      q.delete("cursor");
      go(`/ui/records${q.toString() ? "?" + q : ""}`, { replace: true });
    } }, "Show"));
  box.add = () => {
    n++;
    text.textContent = `${plural(n, "new failure")} since this page loaded${[...view.keys()].some((k) => k !== "queue") ? " (not all may match the other filters)" : ""}.`;
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
// is at most 1 KiB and its errors the latest one, cut (docs/api.md). With
// opts (the records page) it adds checkboxes, sortable columns, the next
// retry and last failure, and each row's Retry and Delete; the overview's
// newest failures show the short form.
export function recordsTable(items, opts = null) {
  if (items.length === 0) return el("p", { class: "muted empty-list" }, "No records match.");
  if (!opts) {
    return table(["Key", "Queue", "Error type", "Message", "Attempt", "State", "Age"],
      items.map((r) => el("tr", {},
        keyCell(r), el("td", { class: "qname" }, r.queue), el("td", { class: "etype" }, r.error_type),
        messageCell(r), el("td", { class: "num" }, `${r.attempt}/${r.max_attempts}`),
        el("td", { class: `state-${r.state}` }, stateText(r)), el("td", { class: "when" }, ago(r.created_at)))),
      { class: "records" });
  }
  const { sort, queue, sortHref, picked, outcome } = opts;
  const sortable = (field, cls) => {
    const s = SORTS[field];
    const current = sort.replace(/^-/, "") === field;
    const desc = sort.startsWith("-");
    // aria-sort describes the column as shown: ages grow as times shrink.
    const shownDesc = field === "created_at" ? !desc : desc;
    const th = el("th", { scope: "col", class: cls, "aria-sort": current ? (shownDesc ? "descending" : "ascending") : null });
    if (s.needsQueue && !queue) {
      return fill(th, el("span", { title: `Pick a queue to sort by ${s.label.toLowerCase()}` }, s.label));
    }
    const next = current ? (desc ? field : "-" + field) : s.first;
    const words = (order) => (order.startsWith("-") ? s.desc : s.asc);
    return fill(th, link(sortHref(next), [s.label, current ? (desc ? " ▼" : " ▲") : ""],
      { class: "sort", title: `${current ? `Sorted ${words(sort)}; sort ` : "Sort "}${words(next)}` }));
  };
  const all = el("input", { type: "checkbox", id: "pick-all", "aria-label": "Select every record on this page",
    onchange: (e) => picked.set(picked.all(), e.target.checked) });
  const head = el("tr", {},
    el("th", { scope: "col", class: "pick" }, all),
    el("th", { scope: "col" }, "Key"),
    queue ? null : el("th", { scope: "col" }, "Queue"),
    el("th", { scope: "col", class: "etype" }, "Error type"),
    el("th", { scope: "col", class: "msg" }, el("span", { class: "etype-line" }, "Error type, "), "Message"),
    sortable("attempt", "num"),
    el("th", { scope: "col" }, "State"),
    sortable("next_retry_at", `when ${sort.includes("next_retry_at") ? "" : "opt"}`),
    sortable("failed_at", `when ${sort.includes("failed_at") ? "" : "opt"}`),
    sortable("created_at", "when"),
    el("th", { scope: "col" }, el("span", { class: "visually-hidden" }, "Actions")));
  const rows = items.map((r) => {
    const row = el("tr", { "data-id": r.id },
      el("td", { class: "pick" }, el("input", { type: "checkbox", class: "pick", value: r.id,
        "aria-label": `Select ${r.key == null ? r.id : shorten(r.key, KEY_CHARS, r.key_truncated)}`,
        onchange: (e) => picked.set([r.id], e.target.checked) })),
      keyCell(r),
      queue ? null : el("td", { class: "qname" }, r.queue),
      el("td", { class: "etype" }, r.error_type),
      messageCell(r, true),
      el("td", { class: "num" }, `${r.attempt}/${r.max_attempts}`),
      el("td", { class: `state state-${r.state}` }, stateText(r)),
      el("td", { class: `when ${sort.includes("next_retry_at") ? "" : "opt"}` }, ago(r.next_retry_at)),
      el("td", { class: `when ${sort.includes("failed_at") ? "" : "opt"}` }, ago(lastFailed(r))),
      el("td", { class: "when" }, ago(r.created_at)),
      el("td", { class: "cmds" }, el("div", { class: "rowactions" }, rowActions(r, outcome))));
    return row;
  });
  return el("div", { class: "tablewrap" }, el("table", { class: "records" }, el("thead", {}, head), el("tbody", {}, rows)));
}

// lastFailed is when the record's latest failure happened (the list's
// last-failed sort orders by the same): its latest error's time.
function lastFailed(r) {
  const errors = r.errors || [];
  const at = errors[errors.length - 1]?.occurred_at;
  return at && !at.startsWith("0001-") ? at : r.created_at;
}

// rowActions are a row's Retry and Delete, answered in place.
function rowActions(r, outcome) {
  const name = r.key == null ? r.id : shorten(r.key, KEY_CHARS, r.key_truncated);
  const retry = writeButton("Retry", async (e) => {
    e.target.disabled = true;
    try {
      const out = await api(`/ojs/v1/dead-letter/${r.id}/retry`, { method: "POST" });
      const row = e.target.closest("tr");
      const cell = row.querySelector("td.state");
      cell.className = `state state-${out.state}`;
      cell.textContent = stateText(out);
      outcome.ok(`Retried ${name}: it is ${out.state} and goes back to ${out.queue}.`);
    } catch (err) {
      outcome.fail(`${name}: ${err.message}`);
      e.target.disabled = false;
    }
  }, { class: "small secondary", title: r.state === "completed" ? "A completed record has nothing left to retry" : `Retry ${name} now`,
    disabled: r.state === "completed", need: ["retry", r.queue] });
  const del = writeButton("Delete", async (e) => {
    if (!window.confirm(`Delete record ${name}? This cannot be undone.`)) return;
    e.target.disabled = true;
    try {
      await api(`/ojs/v1/dead-letter/${r.id}`, { method: "DELETE" });
      e.target.closest("tr").remove();
      outcome.ok(`Deleted ${name}.`);
    } catch (err) {
      outcome.fail(`${name}: ${err.message}`);
      e.target.disabled = false;
    }
  }, { class: "small danger", title: `Delete ${name}`, need: ["purge", r.queue] });
  return [retry, del];
}

// messageCell is the latest error's message; with etype, the error type
// too, above it, shown where the window is too narrow for its column.
function messageCell(r, etype = false) {
  const errors = r.errors || [];
  const last = errors[errors.length - 1] || {};
  const text = shorten(last.message || "", MESSAGE_CHARS, last.truncated);
  return el("td", { class: "msg" },
    etype ? el("span", { class: "etype-line" }, r.error_type) : null,
    el("span", { class: "text", title: text }, text));
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
