// The overview: queues with their depth, age, last hour and delivery state;
// incidents; the newest failures. It refreshes itself from the event stream.

import { el, fill, link, table, ago, plural } from "../lib/dom.js";
import { api, subscribe } from "../lib/api.js";
import { render, throttled } from "../lib/page.js";
import { recordsTable } from "./records.js";

export async function overview(signal) {
  const body = el("div", {}, await overviewSections(signal));
  const live = liveIndicator();
  render(el("div", { class: "title" }, el("h1", {}, "Overview"), live), body);
  const refresh = throttled(1000, signal, async () => {
    try { fill(body, await overviewSections(signal)); } catch { /* the next event retries */ }
  });
  // A reconnected stream may have missed events: refresh on each but the first.
  let connects = 0;
  subscribe("", refresh, signal, (state) => {
    live.set(state);
    if (state === "live" && connects++ > 0) refresh();
  });
}

export async function queues(signal) {
  const page = await api("/ojs/v1/queues", { signal });
  render(el("h1", {}, "Queues"), queuesTable(page.items || []));
}

async function overviewSections(signal) {
  const [queues, incidents, newest] = await Promise.all([
    api("/ojs/v1/queues", { signal }), api("/ojs/v1/incidents?limit=10", { signal }), api("/ojs/v1/dead-letter?limit=10", { signal }),
  ]);
  const qs = queues.items || [];
  return [
    el("h2", {}, "Queues"),
    qs.length === 0 ? empty() : queuesTable(qs),
    el("h2", {}, "Incidents ", link("/ui/incidents", "all", { class: "small" })),
    incidentsTable(incidents.items || []),
    el("h2", {}, "Newest failures ", link("/ui/records", "all", { class: "small" })),
    recordsTable(newest.items || []),
  ];
}

export function liveIndicator() {
  const span = el("span", { class: "live", role: "status", "aria-live": "polite" }, "connecting…");
  span.set = (state) => {
    span.textContent = { live: "● live", paused: "paused while hidden" }[state] || "reconnecting…";
    span.className = `live ${state}`;
  };
  return span;
}

function queuesTable(qs) {
  return table(
    ["Queue", "State", "Delivery", "Waiting", "Dead letters", "Discarded", "Total", "Oldest", "Added (1 h)", "Retried (1 h)"],
    qs.map((q) => el("tr", {},
      el("td", {}, link(`/ui/queues/${encodeURIComponent(q.name)}`, q.name)),
      el("td", { class: `qstate-${q.state}` }, q.state),
      el("td", { class: q.delivery.state === "blocked" ? "blocked" : "" },
        q.delivery.state === "blocked" ? `blocked: ${plural(q.delivery.blocked_records, "record")} (${q.delivery.reason})` : "ok"),
      el("td", { class: "num" }, link(`/ui/records?queue=${encodeURIComponent(q.name)}&state=retryable`, String(q.stats.depth))),
      el("td", { class: "num" }, link(`/ui/records?queue=${encodeURIComponent(q.name)}&exhaustion=dead_letter`, String(q.stats.dead_letter))),
      el("td", { class: "num" }, String(q.stats.discarded)),
      el("td", { class: "num" }, link(`/ui/records?queue=${encodeURIComponent(q.name)}`, String(q.stats.total))),
      el("td", {}, ago(q.oldest_at)),
      el("td", { class: "num" }, q.last_hour ? String(q.last_hour.added) : "—"),
      el("td", { class: "num" }, q.last_hour ? String(q.last_hour.retried) : "—"))),
    { class: "queues" });
}

export function incidentsTable(items) {
  if (items.length === 0) return el("p", { class: "muted" }, "No incidents: no stored failures.");
  return table(["Records", "Error type", "Signature", "Queues", "First seen", "Last seen"],
    items.map((i) => el("tr", {},
      el("td", { class: "num" }, link(`/ui/records?incident=${i.id}`, String(i.count))),
      el("td", {}, i.error_type), el("td", { class: "msg" }, i.signature),
      el("td", {}, i.queues.join(", ")), el("td", {}, ago(i.first_seen)), el("td", {}, ago(i.last_seen)))));
}

function empty() {
  return el("div", { class: "empty" },
    el("p", {}, "The DLQ is empty. Dead-letter a record to see it here, for example as the README's tour does:"),
    el("pre", {}, `echo '{"order_id":17}' | kcat -P -b 127.0.0.1:9092 -t dead_letter_queue -k order-17 \\
  -H redrive.source.topic=orders -H redrive.error.type=db.connection_refused \\
  -H 'redrive.error.message=dial tcp 10.0.0.5:5432: connection refused'`));
}
