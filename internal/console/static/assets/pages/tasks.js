// Bulk tasks: the list, and one task with its progress, rate and cancel.

import { el, fill, link, table, ago, facts, status, plural } from "../lib/dom.js";
import { api, apiText } from "../lib/api.js";
import { parse, member, pretty } from "../lib/json.js";
import { render, every } from "../lib/page.js";
import { writeButton } from "../lib/write.js";

const open = (t) => t.state === "pending" || t.state === "running";

export async function tasks(signal) {
  let items = await drawTasks(signal);
  every(2000, signal, async () => {
    if (items.some(open)) items = await drawTasks(signal).catch(() => items);
  });
}

async function drawTasks(signal) {
  const page = await api("/ojs/v1/tasks?limit=100", { signal });
  const items = page.items || [];
  render(
    el("h1", {}, "Tasks"),
    items.length === 0 ? el("p", { class: "empty" }, "No bulk tasks yet. Retry or purge all the records of a filtered view on the Records page, and the task shows here.")
      : table(["Task", "Kind", "State", "Progress", "By", "Created"], items.map((t) => el("tr", {},
        el("td", {}, link(`/ui/tasks/${t.id}`, t.id.slice(0, 8))), el("td", {}, t.kind, t.patch ? " (patch)" : "", t.canary ? ` (canary: ${t.canary.phase})` : ""), el("td", {}, t.state),
        el("td", {}, progressBar(t), ` ${t.processed}/${t.total}`, skippedCount(t) ? `, ${skippedCount(t)} skipped` : ""),
        el("td", {}, t.created_by), el("td", {}, ago(t.created_at))))),
  );
  return items;
}

// skippedCount is how many records a task left as they were, whatever the
// reason.
function skippedCount(t) {
  return (t.skipped && t.skipped.count) || 0;
}

// done is how many records a task has dealt with: processed, and skipped
// (the API's progress counts both). With what remains it is the total.
function done(t) {
  return t.processed + skippedCount(t);
}

function progressBar(t) {
  return el("progress", { max: String(Math.max(t.total, 1)), value: String(done(t)), "aria-label": `${done(t)} of ${t.total}` });
}

export async function task(signal, id) {
  // The patch is read from the answer's text, its numbers as written.
  const load = async () => {
    const { data, text } = await apiText(`/ojs/v1/tasks/${encodeURIComponent(id)}`, { signal });
    return { ...data, patchText: patchOf(text) };
  };
  let t = await load();
  const body = el("div");
  const outcome = status();
  const samples = [[Date.now(), t.processed]];
  const draw = () => fill(body, 
    el("p", { class: "progressline" }, progressBar(t), " ",
      el("span", { id: "task-progress" }, `${t.processed.toLocaleString("en")} of ${plural(t.total, "record")}` +
        (skippedCount(t) ? `, ${skippedCount(t).toLocaleString("en")} skipped` : "") +
        (!open(t) && t.remaining > 0 ? `, ${t.remaining.toLocaleString("en")} not reached` : "") + ` (${Math.round(t.progress * 100)}%)`)),
    facts([
      ["State", el("span", { id: "task-state", class: `task-${t.state}` }, t.state + (t.cancel_requested && open(t) ? " (cancelling)" : ""))],
      ["Kind", t.kind],
      ["Rate", el("span", { id: "task-rate" }, rateText(t, samples))],
      ["Rate limit", t.rate_limit ? `${t.rate_limit} records/s` : "unlimited"],
      ["Filter", el("code", {}, JSON.stringify(t.filter))],
      t.patchText ? ["Patch", el("pre", { class: "raw", id: "task-patch" }, t.patchText)] : null,
      t.skipped && typeof t.skipped === "object" ? ["Skipped", skippedView(t.skipped)] : null,
      !open(t) && t.remaining > 0 ? ["Not reached", el("span", { id: "task-remaining" },
        `${plural(t.remaining, "record")} left as ${t.remaining === 1 ? "it was" : "they were"}: the task was ${t.state} before it got to them`)] : null,
      t.canary ? ["Canary", canaryView(t)] : null,
      ["Created", [ago(t.created_at), ` by ${t.created_by}`]],
      ["Started", ago(t.started_at)],
      ["Finished", ago(t.finished_at)],
      ["Errors", (t.errors || []).length === 0 ? "none" : el("ul", {}, t.errors.map((e) => el("li", {}, ago(e.at), " ", e.message)))],
    ]),
    open(t) ? el("div", { class: "actions" }, writeButton("Cancel task", async () => {
      try { await api(`/ojs/v1/tasks/${t.id}/cancel`, { method: "POST" }); outcome.ok("Cancel requested: the task stops after its current batch."); } catch (e) { outcome.fail(e.message); }
    }, { id: "task-cancel", class: "danger" })) : null);
  render(el("h1", {}, `Task ${t.id}`), body, outcome, el("p", {}, link("/ui/tasks", "All tasks")));
  draw();
  every(1000, signal, async () => {
    if (!open(t)) return;
    try {
      t = await load();
      samples.push([Date.now(), t.processed]);
      if (samples.length > 6) samples.shift();
      draw();
    } catch { /* the next tick retries */ }
  });
}

// rateText is the records per second over the last few polls while the task
// runs, and the average over its run once it is done.
function rateText(t, samples) {
  if (!t.started_at) return "—";
  if (!open(t) && t.finished_at) {
    const secs = (Date.parse(t.finished_at) - Date.parse(t.started_at)) / 1000;
    return secs > 0 ? `${Math.round(t.processed / secs).toLocaleString("en")} records/s (average)` : "—";
  }
  const [t0, n0] = samples[0];
  const [t1, n1] = samples[samples.length - 1];
  return t1 > t0 ? `${Math.round(((n1 - n0) * 1000) / (t1 - t0)).toLocaleString("en")} records/s` : "measuring…";
}

// patchOf is a task's patch laid out as JSON text, every token as written
// (null without one).
function patchOf(text) {
  try {
    const node = member(parse(text, { maxDepth: 1 }).root, "patch");
    if (!node || node.type === "null") return null;
    // One operation a line, each as the API wrote it.
    const src = text.slice(node.start, node.end);
    const ops = parse(src).root;
    if (ops.type !== "array" || ops.items.length === 0) return pretty(parse(src));
    return `[${ops.items.map((op) => src.slice(op.start, op.end)).join(",\n ")}]`;
  } catch { return null; }
}

// skipReasons says why a task left records as they were (the API's
// skipped.reasons), in the order they are listed.
const skipReasons = [
  ["no_longer_matches", "no longer matched the filter when the task got to them: retried, changed or deleted since it was created"],
  ["in_flight", "were being redelivered when the task got to them"],
  ["patch", "the patch failed on them, or its result did not match their schema"],
];

// skippedView says how many records a task skipped and why, and lists those
// its patch skipped (the first 100).
function skippedView(sk) {
  const records = sk.records || [];
  if (!sk.count) return el("span", { id: "task-skipped" }, "none");
  const reasons = sk.reasons || {};
  const known = skipReasons.map(([k]) => k);
  const why = [...skipReasons, ...Object.keys(reasons).filter((k) => !known.includes(k)).sort().map((k) => [k, k])]
    .filter(([k]) => reasons[k] > 0)
    .map(([k, text]) => el("li", { "data-reason": k }, `${reasons[k].toLocaleString("en")} ${text}`));
  return el("div", { id: "task-skipped" },
    el("p", {}, `${plural(sk.count, "record")} skipped: not produced, left as ${sk.count === 1 ? "it was" : "they were"}.`),
    why.length ? el("ul", { id: "task-skipped-reasons" }, why) : null,
    records.length ? el("p", {}, `Skipped by the patch${records.length < (reasons.patch || sk.count) ? ` (the first ${records.length} listed)` : ""}:`) : null,
    records.length ? table(["Record", "Why"], records.map((x) => el("tr", {},
      el("td", {}, link(`/ui/records/${encodeURIComponent(x.id)}`, x.id, { class: "id" })),
      el("td", { class: "msg" }, x.message || ""))), { id: "task-skipped-records" }) : null);
}

// canaryView is a canary task's sample: what was asked, where it stands
// (retrying the sample, waiting for its redelivery, watching it, the
// verdict), and what became of its records.
function canaryView(t) {
  const c = t.canary;
  const r = c.report || {};
  const phase = {
    sample: c.sampled < c.sample_size && !c.sampled_at ? `retrying the sample (${c.sampled} of ${c.sample_size})`
      : `waiting for the sample's redelivery (${r.delivered} of ${r.sample} redelivered)`,
    watch: "watching the sample",
    passed: "passed: the rest was retried after it",
    aborted: "aborted: the rest was left as it was",
  }[c.phase] || c.phase;
  const pct = (n) => (r.sample ? ` (${Math.round((n * 100) / r.sample)}%)` : "");
  return el("div", { id: "task-canary", class: `canary canary-${c.phase}` },
    el("p", {}, el("strong", { id: "task-canary-phase" }, phase),
      c.phase === "watch" && c.watch_until ? [" until ", ago(c.watch_until)] : null),
    el("p", { class: "muted" }, `Sample of ${plural(c.sample_size, "record")} (asked: ${JSON.stringify(c.sample)}), watched ${c.watch} once redelivered; ` +
      `aborts when ${Math.round(c.abort_if_refail * 100)}% of it fails again the same way.`),
    table(["Outcome", "Records"], [
      ["Completed", r.completed], ["Failed again the same way", r.failed_same], ["Failed differently", r.failed_different],
      ["Pending", r.pending], ["Deleted", r.deleted],
    ].map(([k, n]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, `${(n || 0).toLocaleString("en")}${pct(n || 0)}`))),
    { id: "task-canary-report" }));
}
