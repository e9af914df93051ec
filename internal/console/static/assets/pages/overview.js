// The overview: the top queues (by a sort the operator picks, searched on the
// server) with their depth, age, last hour and delivery state; incidents; the
// newest failures. It refreshes itself from the event stream.
//
// However many queues there are, the page holds a page of them: the API
// sorts, searches and pages (GET /ojs/v1/queues), and "more" asks for the
// next page. A live refresh asks again for as many as are shown, no more.

import { el, fill, link, table, ago, plural } from "../lib/dom.js";
import { api, subscribe } from "../lib/api.js";
import { render, throttled } from "../lib/page.js";
import { recordsTable } from "./records.js";
import { activityChart } from "../lib/activity.js";
import { incidentsTable } from "./incidents.js";

// SORTS are the orders the queue list offers (the API's sort values).
const SORTS = [["depth", "Open (waiting + available)"], ["dead_letter", "Dead letters"], ["total", "Total"], ["oldest", "Oldest record"], ["name", "Name"]];
const TOP = 20;
const MAX_LIMIT = 1000; // the API's largest page
const SEARCH_DELAY = 250; // ms of no typing before a search is sent

export async function overview(signal) {
  const queues = queueList(signal, { pageSize: TOP, defaultSort: "depth" });
  const chart = activityChart(signal, { path: "/ojs/v1/activity" });
  const rest = el("div", {});
  const [, sections] = await Promise.all([queues.load(), otherSections(signal), chart.load()]);
  fill(rest, sections);
  const live = liveIndicator();
  render(el("div", { class: "title" }, el("h1", {}, "Overview"), live), queues.node, chart.node, rest);
  const refresh = throttled(1000, signal, async () => {
    try {
      const [, sections] = await Promise.all([queues.reload(), otherSections(signal), chart.reload()]);
      fill(rest, sections);
    } catch { /* the next event retries */ }
  });
  // A reconnected stream may have missed events: refresh on each but the first.
  let connects = 0;
  subscribe("", refresh, signal, (state) => {
    live.set(state);
    if (state === "live" && connects++ > 0) refresh();
  });
}

export async function queues(signal) {
  const list = queueList(signal, { pageSize: 50, defaultSort: "name" });
  await list.load();
  render(el("h1", {}, "Queues"), list.node);
}

async function otherSections(signal) {
  const [incidents, newest] = await Promise.all([
    api("/ojs/v1/incidents?limit=10", { signal }), api("/ojs/v1/dead-letter?limit=10", { signal }),
  ]);
  return [
    el("h2", {}, "Incidents ", link("/ui/incidents", "all", { class: "small" })),
    incidentsTable(incidents.items || []),
    el("h2", {}, "Newest failures ", link("/ui/records", "all", { class: "small" })),
    recordsTable(newest.items || []),
  ];
}

// queueList is a page of queues with a search box, a sort and "more". The
// sort and search are kept in the URL (?sort=…&q=…) so a view can be shared.
// load shows the first page; reload asks again for as many as are shown.
function queueList(signal, { pageSize, defaultSort }) {
  const params = new URLSearchParams(location.search);
  let sort = SORTS.some(([s]) => s === params.get("sort")) ? params.get("sort") : defaultSort;
  let q = (params.get("q") || "").trim();
  let items = [], next = "", total = 0, generation = 0, timer = null;

  const search = el("input", { id: "queue-search", type: "search", value: q, maxlength: "249", autocomplete: "off",
    spellcheck: "false", placeholder: "part of a name" });
  const sortBy = el("select", { id: "queue-sort" }, SORTS.map(([v, label]) => el("option", { value: v, selected: v === sort }, label)));
  const count = el("span", { id: "queue-count", class: "muted", role: "status", "aria-live": "polite" });
  const controls = el("form", { class: "queuebar", role: "search", "aria-label": "Queues", onsubmit: (e) => { e.preventDefault(); searchNow(); } },
    el("label", { for: "queue-search" }, "Search queues"), search,
    el("label", { for: "queue-sort" }, "Sort by"), sortBy, count);
  const list = el("div", { id: "queue-list" });
  const more = el("button", { type: "button", id: "queue-more", class: "secondary", hidden: true, onclick: () => showMore() }, `Show ${pageSize} more`);
  const node = el("section", { "aria-labelledby": "queues-title" }, el("h2", { id: "queues-title" }, "Queues"), controls, list, more);

  const fetchPage = (limit, cursor) => {
    const p = new URLSearchParams({ limit: String(limit), sort });
    if (q) p.set("q", q);
    if (cursor) p.set("cursor", cursor);
    return api("/ojs/v1/queues?" + p, { signal });
  };
  const take = (page) => {
    next = page.pagination.has_more ? page.pagination.next_cursor || "" : "";
    total = page.pagination.total;
  };
  const show = () => {
    const none = total === 0 && !q;
    controls.hidden = none;
    more.hidden = !next;
    if (none) { fill(list, empty()); return; }
    count.textContent = q
      ? `${plural(total, "queue")} ${total === 1 ? "matches" : "match"} “${q}”${items.length < total ? `; showing ${items.length}` : ""}`
      : `${items.length < total ? `Showing ${items.length} of ` : ""}${plural(total, "queue")}`;
    fill(list, items.length ? queuesTable(items) : el("p", { class: "muted empty-list" }, `No queue name contains “${q}”.`));
  };
  // load replaces the list by its first limit queues; a newer load (or
  // "more") wins over one still on its way.
  const load = async (limit = pageSize) => {
    const g = ++generation;
    const page = await fetchPage(Math.min(limit, MAX_LIMIT));
    if (g !== generation) return;
    items = page.items || [];
    take(page);
    show();
  };
  const showMore = async () => {
    const g = ++generation;
    more.disabled = true;
    try {
      const page = await fetchPage(pageSize, next);
      if (g !== generation) return;
      items = items.concat(page.items || []);
      take(page);
      show();
    } catch (e) {
      if (e.name !== "AbortError") count.textContent = e.message;
    } finally { more.disabled = false; }
  };
  const keepInURL = () => {
    const p = new URLSearchParams(location.search);
    if (sort === defaultSort) p.delete("sort"); else p.set("sort", sort);
    if (q) p.set("q", q); else p.delete("q");
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
  };
  const changed = async () => {
    keepInURL();
    try { await load(); } catch (e) { if (e.name !== "AbortError") count.textContent = e.message; }
  };
  const searchNow = () => {
    clearTimeout(timer);
    if (search.value.trim() === q) return;
    q = search.value.trim();
    changed();
  };
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(searchNow, SEARCH_DELAY); });
  sortBy.addEventListener("change", () => { sort = sortBy.value; changed(); });
  signal.addEventListener("abort", () => clearTimeout(timer));
  return { node, load: () => load(pageSize), reload: () => load(Math.max(items.length, pageSize)) };
}

export function liveIndicator() {
  const span = el("span", { class: "live", role: "status", "aria-live": "polite" }, "connecting…");
  span.set = (state) => {
    span.textContent = { live: "● live", paused: "paused while hidden" }[state] || "reconnecting…";
    span.className = `live ${state}`;
  };
  return span;
}

// STATE_COLUMNS split a queue's records into columns that add up to its
// total, each linking to the records it counts: [label, title, count, filter].
export const STATE_COLUMNS = [
  ["Waiting", "retryable: waiting for their next automatic retry",
    (s) => s.retryable, "state=retryable"],
  ["Available", "queued for redelivery, being produced, or waiting for the consumer's acknowledgement (completion: ack)",
    (s) => s.available - s.unacknowledged, "state=available&unacknowledged=false"],
  ["Unacked", "unacknowledged: redelivered under completion: ack, and not acknowledged within ack_timeout; retry them",
    (s) => s.unacknowledged, "state=available&unacknowledged=true"],
  ["Completed", "redelivered and done: produced with no failure back, or acknowledged",
    (s) => s.completed, "state=completed"],
  ["Dead letters", "discarded and kept as dead letters", (s) => s.dead_letter, "exhaustion=dead_letter"],
  ["Discards", "discarded and kept as discards (retention.discarded)", (s) => s.discard, "exhaustion=discard"],
];

// stateCells are a queue's STATE_COLUMNS cells and its total, each a link
// to the records it counts.
export function stateCells(q) {
  const records = (filter) => `/ui/records?queue=${encodeURIComponent(q.name)}${filter ? "&" + filter : ""}`;
  return [
    ...STATE_COLUMNS.map(([label, , count, filter]) => {
      const n = count(q.stats);
      return el("td", { class: "num" + (label === "Unacked" && n > 0 ? " unacked" : "") }, link(records(filter), String(n)));
    }),
    el("td", { class: "num" }, link(records(""), String(q.stats.total))),
  ];
}

function queuesTable(qs) {
  const wrap = table(
    ["Queue", "State", "Delivery", ...STATE_COLUMNS.map(([label]) => label), "Total", "Oldest", "Added (1 h)", "Retried (1 h)"],
    qs.map((q) => el("tr", {},
      el("td", { class: "qname" }, link(`/ui/queues/${encodeURIComponent(q.name)}`, q.name,
        q.name === "_default" ? { title: "A topic named _default: it follows the default layer, which its page shows" } : {})),
      el("td", { class: `qstate-${q.state}` }, q.state),
      el("td", { class: q.delivery.state === "blocked" ? "blocked" : "" },
        q.delivery.state === "blocked" ? `blocked: ${plural(q.delivery.blocked_records, "record")} (${q.delivery.reason})` : "ok"),
      ...stateCells(q),
      el("td", {}, ago(q.oldest_at)),
      el("td", { class: "num" }, q.last_hour ? String(q.last_hour.added) : "—"),
      el("td", { class: "num" }, q.last_hour ? String(q.last_hour.retried) : "—"))),
    { class: "queues" });
  titleColumns(wrap);
  return wrap;
}

// titleColumns explains each state column in its header's title.
function titleColumns(t) {
  const titles = Object.fromEntries(STATE_COLUMNS.map(([label, title]) => [label, title]));
  for (const th of t.querySelectorAll("thead th")) {
    if (titles[th.textContent]) th.title = titles[th.textContent];
  }
}

export { incidentsTable }; // the incidents list's, shown here too

// empty is the overview of an empty DLQ: how to dead-letter a record with
// kcat, to the brokers the server is configured with (the page says which).
function empty() {
  const brokers = document.documentElement.dataset.kafkaBrokers || "127.0.0.1:9092";
  return el("div", { class: "empty" },
    el("p", {}, "The DLQ is empty. Dead-letter a record to see it here, for example as the README's tour does:"),
    el("pre", { id: "empty-hint" }, `echo '{"order_id":17}' | kcat -P -b ${brokers} -t dead_letter_queue -k order-17 \\
  -H redrive.source.topic=orders -H redrive.error.type=db.connection_refused \\
  -H 'redrive.error.message=dial tcp 10.0.0.5:5432: connection refused'`));
}
