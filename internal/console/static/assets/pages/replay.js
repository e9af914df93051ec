// Replay rules that select a queue's records (OJS dead-letter spec §7):
// listed with their source; rules made over the API can be created, edited,
// enabled or disabled and deleted here. Rules from policy files are read-only.

import { el, fill, table, duration, status } from "../lib/dom.js";
import { api, canWrite } from "../lib/api.js";
import { reload } from "../lib/nav.js";
import { writeButton, confirmThen } from "../lib/write.js";

const BASE = "/ojs/v1/dead-letter/replay-rules";

// applies says whether rule r selects records of queue: a policy file's rule
// lists its queues; an API rule filters by queue, or takes every queue.
const applies = (r, queue) => r.source === "policy" ? (r.queues || []).includes(queue) : !r.filter.queue || r.filter.queue === queue;

export function replayRules(queue, all) {
  const rules = all.filter((r) => applies(r, queue));
  const outcome = status();
  const form = ruleForm(queue);
  const put = (r, change) => async () => {
    try {
      await api(`${BASE}/${encodeURIComponent(r.name)}`, { method: "PUT", body: { ...bodyOf(r), ...change } });
      reload();
    } catch (e) { outcome.fail(e.message); }
  };
  const remove = (r) => async () => {
    try { await api(`${BASE}/${encodeURIComponent(r.name)}`, { method: "DELETE" }); reload(); } catch (e) { outcome.fail(e.message); }
  };
  return el("div", { id: "replay-rules" },
    rules.length === 0 ? el("p", { class: "muted" }, "No replay rule selects this queue's records: exhausted records stay until an operator retries them.")
      : table(["Rule", "Filter", "Delay", "Max replays", "Rate limit", "State", "Source", ""], rules.map((r) => el("tr", { "data-rule": r.name },
        el("td", {}, r.name), el("td", {}, el("code", {}, JSON.stringify(r.filter))), el("td", {}, duration(r.delay)),
        el("td", { class: "num" }, String(r.max_replays)), el("td", {}, r.rate_limit ? `${r.rate_limit}/s` : "unlimited"),
        el("td", { class: "rule-state" }, r.enabled ? "enabled" : "disabled"),
        el("td", {}, r.source),
        el("td", { class: "rowactions" }, r.source !== "api" ? el("span", { class: "muted" }, "from a policy file") : [
          writeButton(r.enabled ? "Disable" : "Enable", put(r, { enabled: !r.enabled }), { class: "secondary" }),
          writeButton("Edit", () => form.edit(r), { class: "secondary" }),
          writeButton("Delete", confirmThen(`Delete replay rule ${r.name}?`, remove(r)), { class: "danger" }),
        ])))),
    outcome,
    canWrite() ? form : null);
}

function bodyOf(r) {
  const b = { name: r.name, filter: r.filter, delay: r.delay, max_replays: r.max_replays, enabled: r.enabled, rate_limit: r.rate_limit };
  if (r.window) b.window = r.window;
  return b;
}

// ruleForm creates a rule for the queue, or edits one (form.edit).
function ruleForm(queue) {
  let editing = null;
  const input = (name, attrs = {}) => el("input", { id: `rule-${name}`, name, autocomplete: "off", ...attrs });
  const f = {
    name: input("name", { required: true }), error_type: input("error_type", { placeholder: "any" }),
    delay: input("delay", { required: true, placeholder: "PT1H" }), max_replays: input("max_replays", { type: "number", min: "1", value: "3", required: true }),
    rate_limit: input("rate_limit", { type: "number", min: "0", step: "any", placeholder: "unlimited" }),
    enabled: input("enabled", { type: "checkbox", checked: true }),
  };
  const title = el("h3", {}, "New replay rule");
  const submit = el("button", { type: "submit", id: "rule-submit" }, "Create rule");
  const problems = el("div", { role: "alert" });
  const labelled = (k, text) => el("label", { for: `rule-${k}` }, text, f[k]);
  const form = el("form", { class: "ruleform", id: "rule-form", onsubmit: async (e) => {
    e.preventDefault();
    fill(problems);
    for (const x of Object.values(f)) x.removeAttribute("aria-invalid");
    const filter = editing ? { ...editing.filter } : { queue };
    if (f.error_type.value.trim()) filter.error_type = f.error_type.value.trim(); else delete filter.error_type;
    const body = { filter, delay: f.delay.value.trim(), max_replays: Number(f.max_replays.value), enabled: f.enabled.checked };
    if (f.rate_limit.value !== "") body.rate_limit = Number(f.rate_limit.value);
    try {
      if (editing) await api(`${BASE}/${encodeURIComponent(editing.name)}`, { method: "PUT", body: { ...body, name: editing.name, window: editing.window || undefined } });
      else await api(BASE, { method: "POST", body: { ...body, name: f.name.value.trim() } });
      reload();
    } catch (err) {
      const field = err.details.parameter && f[err.details.parameter];
      if (field) field.setAttribute("aria-invalid", "true");
      fill(problems, el("p", { class: "error" }, err.message));
      (field || f.name).focus();
    }
  } },
  title,
  el("div", { class: "grid" }, labelled("name", "Name"), labelled("error_type", "Error type (filter)"), labelled("delay", "Delay after discard (ISO 8601)"),
    labelled("max_replays", "Max replays per record"), labelled("rate_limit", "Rate limit (replays/s)"), el("label", { for: "rule-enabled", class: "check" }, f.enabled, "Enabled")),
  el("p", { class: "muted" }, `Selects discarded records of ${queue} and sends each back once the delay has passed, up to max replays.`),
  problems, el("div", { class: "actions" }, submit));
  form.edit = (r) => {
    editing = r;
    title.textContent = `Edit replay rule ${r.name}`;
    submit.textContent = "Save rule";
    f.name.value = r.name; f.name.disabled = true;
    f.error_type.value = r.filter.error_type || "";
    f.delay.value = r.delay; f.max_replays.value = String(r.max_replays);
    f.rate_limit.value = r.rate_limit ? String(r.rate_limit) : ""; f.enabled.checked = r.enabled;
    f.delay.focus();
  };
  return form;
}
