// One incident: its error type, signature and frames, its records by state
// and queue, when it was first and last seen, its failures over time per
// queue, and the way to its records (to retry or purge them).

import { el, link, facts, ago, plural } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";
import { activityChart } from "../lib/activity.js";

export async function incident(signal, id) {
  const chart = activityChart(signal, { path: `/ojs/v1/incidents/${encodeURIComponent(id)}/activity` });
  const [i] = await Promise.all([api(`/ojs/v1/incidents/${encodeURIComponent(id)}`, { signal }), chart.load()]);
  const states = Object.entries(i.states || {}).sort(([a], [b]) => a.localeCompare(b));
  render(
    el("p", { class: "crumbs" }, link("/ui/incidents", "Incidents"), " / ", el("code", {}, i.id)),
    el("h1", {}, i.error_type || "(no error type)"),
    el("pre", { class: "signature", "aria-label": "Signature" }, i.signature),
    (i.frames || []).length
      ? el("div", { class: "frames" }, el("h2", {}, "Top frames"),
        el("p", { class: "muted" }, "As the fingerprint reads them, without line numbers: incidents of one message from other code differ here."),
        el("ol", {}, i.frames.map((f) => el("li", {}, el("code", {}, f)))))
      : null,
    facts([
      ["Records", i.count
        ? [link(`/ui/records?incident=${i.id}`, plural(i.count, "record")),
          el("span", { class: "muted" }, ` (${states.map(([s, n]) => `${n} ${s}`).join(", ")})`)]
        : el("span", { class: "muted" }, "none left (retried, completed, purged or pruned)")],
      ["Queues", i.queues.length ? i.queues.map((q, k) => [k ? ", " : "", link(`/ui/queues/${encodeURIComponent(q)}`, q)]) : "—"],
      ["First seen", ago(i.first_seen)],
      ["Last seen", ago(i.last_seen)],
    ]),
    i.count ? el("div", { class: "actions" },
      link(`/ui/records?incident=${i.id}`, `Open its ${plural(i.count, "record")} to retry or purge them`, { class: "button" })) : null,
    chart.node,
    el("h2", {}, "Sample"),
    el("p", {}, "The failure that opened it: ", link(`/ui/records/${i.sample.id}`, i.sample.id), el("span", { class: "muted" }, " (it may since have been deleted)")),
    el("pre", { class: "sample" }, i.sample.message),
  );
}
