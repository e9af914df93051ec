// The failures-over-time section of the overview and the incident page: a
// bar chart of GET …/activity over a range the operator picks (kept in the
// URL as ?range=), stacked by queue.

import { el, fill, plural } from "./dom.js";
import { api } from "./api.js";
import { bars, durationMs } from "./chart.js";

// RANGES are the ranges offered: the API's last and step. Minutes are kept
// two hours, hours seven days.
const RANGES = [
  ["1h", "1 h", "PT1H", "PT1M"],
  ["24h", "24 h", "PT24H", "PT1H"],
  ["7d", "7 d", "P7D", "PT6H"],
];

// activityChart returns { node, load, reload } for the activity at path
// (an …/activity route); load and reload fetch the series and draw it.
export function activityChart(signal, { path, title = "Failures over time", label = "Failures" }) {
  const params = new URLSearchParams(location.search);
  let range = RANGES.find(([k]) => k === params.get("range")) || RANGES[0];
  const id = "activity-" + Math.random().toString(36).slice(2, 8);
  const summary = el("span", { class: "muted chart-summary", role: "status" });
  const body = el("div", { class: "chart-body" });
  const buttons = RANGES.map((r) => el("button", { type: "button", class: "secondary", "data-range": r[0],
    "aria-pressed": String(r === range), onclick: () => pick(r) }, r[1]));
  const node = el("section", { class: "activity", "aria-labelledby": id },
    el("div", { class: "chart-head" }, el("h2", { id }, title), summary,
      el("div", { class: "chart-ranges", role: "group", "aria-label": "Range" }, buttons)),
    body);

  const load = async () => {
    const q = new URLSearchParams({ last: range[2], step: range[3] });
    const series = await api(`${path}${path.includes("?") ? "&" : "?"}${q}`, { signal });
    const total = series.points.reduce((s, p) => s + p.added, 0);
    const peak = series.points.reduce((best, p) => (p.added > best.added ? p : best), { added: 0 });
    summary.textContent = total
      ? `${plural(total, "failure")} in the last ${range[1]}; at most ${peak.added} per ${stepText(series.step)}, at ${new Date(Date.parse(peak.at)).toISOString().slice(11, 16)} UTC`
      : `No failures in the last ${range[1]}.`;
    fill(body, bars(series, { label: `${label}, last ${range[1]}` }));
    node.dataset.range = range[0];
  };
  const pick = async (r) => {
    range = r;
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.range === r[0]));
    const p = new URLSearchParams(location.search);
    if (r === RANGES[0]) p.delete("range"); else p.set("range", r[0]);
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
    try { await load(); } catch (e) { if (e.name !== "AbortError") summary.textContent = e.message; }
  };
  return { node, load, reload: load };
}

function stepText(iso) {
  const ms = durationMs(iso);
  return ms === 60e3 ? "minute" : ms === 3600e3 ? "hour" : ms % 3600e3 === 0 ? `${ms / 3600e3} hours` : `${ms / 60e3} minutes`;
}
