// One incident: its error type, signature and frames, its records by state
// and queue, when it was first and last seen, its failures over time per
// queue, and the way to its records (to retry or purge them).

import { el, link, facts, ago, plural, status } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";
import { activityChart } from "../lib/activity.js";
import { writeButton } from "../lib/write.js";

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
    quietSection(i),
    chart.node,
    el("h2", {}, "Sample"),
    el("p", {}, "The failure that opened it: ", link(`/ui/records/${i.sample.id}`, i.sample.id), el("span", { class: "muted" }, " (it may since have been deleted)")),
    el("pre", { class: "sample" }, i.sample.message),
  );
}

// quietSection is the incident's "resolved, redrive when quiet" request:
// where it stands (with a way to withdraw it while it waits), or a form to
// make one.
function quietSection(i) {
  const box = el("section", { id: "quiet", class: "quiet" });
  const outcome = status();
  const draw = (q) => {
    box.replaceChildren(el("h2", {}, "Resolved, redrive when quiet"));
    if (q && q.state === "waiting") {
      box.append(el("p", { id: "quiet-state" }, `Waiting: no failure of it may arrive for ${q.quiet}, as ${q.requested_by} asked. `,
        "Its canary retry starts ", ago(q.quiet_until), ` — a sample of ${q.canary.sample_size || q.canary.sample} watched ${q.canary.watch}, `,
        `aborting at ${Math.round(q.canary.abort_if_refail * 100)}% failing again the same way. A new failure starts the wait over.`),
      el("div", { class: "actions" }, writeButton("Withdraw", async () => {
        try {
          await api(`/ojs/v1/incidents/${encodeURIComponent(i.id)}/redrive-when-quiet`, { method: "DELETE" });
          outcome.ok("Withdrawn."); draw(null);
        } catch (e) { outcome.fail(e.message); }
      }, { id: "quiet-withdraw" })), outcome);
      return;
    }
    if (q && q.state === "started") {
      box.append(el("p", { id: "quiet-state" }, `Quiet for ${q.quiet}: its canary retry started `, ago(q.started_at), " as ",
        link(`/ui/tasks/${q.task_id}`, `task ${q.task_id.slice(0, 8)}`), `, asked by ${q.requested_by}.`));
    }
    const quiet = el("select", { id: "quiet-for", "aria-label": "Quiet for" },
      [["PT5M", "5 minutes"], ["PT15M", "15 minutes"], ["PT30M", "30 minutes"], ["PT1H", "1 hour"], ["PT6H", "6 hours"]]
        .map(([v, label]) => el("option", { value: v, selected: v === "PT15M" }, label)));
    const sample = el("input", { id: "quiet-sample", type: "text", value: "100", size: "6", "aria-label": "Sample" });
    const watch = el("select", { id: "quiet-watch", "aria-label": "Watch" },
      [["PT5M", "5 minutes"], ["PT10M", "10 minutes"], ["PT30M", "30 minutes"], ["PT1H", "1 hour"]]
        .map(([v, label]) => el("option", { value: v, selected: v === "PT10M" }, label)));
    const abort = el("input", { id: "quiet-abort", type: "number", min: "0", max: "1", step: "0.05", value: "0.1", "aria-label": "Abort if refail" });
    box.append(
      el("p", { class: "muted" }, "Fixed? Once no failure of this incident has arrived for the time you choose, Redrive retries its records with a canary, in your name: a sample first, watched, and the rest only if the sample does not fail again the same way."),
      el("div", { class: "quietform" },
        el("label", {}, "Quiet for ", quiet), el("label", {}, "Sample ", sample, el("span", { class: "muted" }, " records or %")),
        el("label", {}, "Watch ", watch), el("label", {}, "Abort at ", abort, el("span", { class: "muted" }, " of the sample failing the same way"))),
      el("div", { class: "actions" }, writeButton("Resolved: redrive when quiet", async () => {
        const n = sample.value.trim();
        const canary = { sample: /^[0-9]+$/.test(n) ? Number(n) : n, watch: watch.value, abort_if_refail: Number(abort.value) };
        try {
          const q2 = await api(`/ojs/v1/incidents/${encodeURIComponent(i.id)}/redrive-when-quiet`,
            { method: "POST", body: { quiet: quiet.value, canary } });
          draw(q2); outcome.ok("Marked resolved: its canary retry starts once it is quiet.");
        } catch (e) { outcome.fail(e.message); }
      }, { id: "quiet-mark" })), outcome);
  };
  draw(i.redrive_when_quiet);
  return box;
}
