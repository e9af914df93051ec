// The retry schedule as `redrive policy explain` prints it: attempt n fails,
// the delay before attempt n+1 (before jitter) and the time since the first
// failure.

import { el, table, duration } from "./dom.js";

export function scheduleView(schedule) {
  if (!schedule) return el("p", { class: "muted" }, "No schedule from the server.");
  return el("div", { class: "schedule" },
    el("p", { class: "muted" }, `${schedule.strategy} backoff, before jitter`),
    (schedule.rows || []).length === 0 ? null : table(["Attempt fails", "Next attempt", "Delay", "Since the first failure", "Note"],
      schedule.rows.map((r) => el("tr", {},
        el("td", { class: "num" }, String(r.attempt)), el("td", { class: "num" }, String(r.next_attempt)),
        el("td", {}, duration(r.delay)), el("td", {}, duration(r.cumulative)), el("td", {}, r.note || ""))),
      { class: "schedule-table" }),
    (schedule.notes || []).map((n) => el("p", {}, n)));
}
