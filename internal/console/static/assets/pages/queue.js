// One queue (a source topic): its state with pause, resume and drain; its
// stats; the effective policy, where it was declared and its schedule; the
// API config editor; the replay rules that select its records.
//
// The name _default is the policy's default layer, as in policy files: the
// API shows the layer's config for it, and refuses to pause, resume or drain
// it. A Kafka topic of that name follows the layer; its records are records
// like any others (?queue=_default). The page says so rather than show the
// layer as a topic.

import { el, fill, link, table, ago, facts, status, duration, plural } from "../lib/dom.js";
import { api, can, readOnlyReason } from "../lib/api.js";
import { render } from "../lib/page.js";
import { reload } from "../lib/nav.js";
import { writeButton, confirmThen } from "../lib/write.js";
import { scheduleView } from "../lib/schedule.js";
import { replayRules } from "./replay.js";
import { STATE_COLUMNS, stateCells } from "./overview.js";

const ACTIONS = [["pause", "Pause", "paused"], ["resume", "Resume", "active"], ["drain", "Drain", "draining"]];

// DEFAULT is the name of the default layer.
const DEFAULT = "_default";

export async function queuePage(signal, name) {
  const path = `/ojs/v1/queues/${encodeURIComponent(name)}`;
  const [q, rules] = await Promise.all([api(path, { signal }), api("/ojs/v1/dead-letter/replay-rules", { signal })]);
  if (name === DEFAULT) return defaultLayer(signal, q, path, rules);
  const outcome = status();
  const setState = (action) => async () => {
    try {
      await api(`${path}/${action}`, { method: "POST" });
      reload();
    } catch (e) { outcome.fail(e.message); }
  };
  render(
    el("h1", {}, `Queue ${q.name}`),
    facts([
      ["State", el("span", { id: "queue-state", class: `qstate-${q.state}` }, q.state)],
      ["Delivery", q.delivery.state === "blocked"
        ? el("span", { class: "blocked" }, `blocked: ${plural(q.delivery.blocked_records, "record")} wait on a failure backoff (${q.delivery.reason}: ${q.delivery.message}), since `, ago(q.delivery.since))
        : "ok"],
      ["Records", link(`/ui/records?queue=${encodeURIComponent(q.name)}`, plural(q.stats.total, "record"))],
      ["Oldest", ago(q.oldest_at)],
      ["Last hour", q.last_hour ? `${q.last_hour.added} failures added, ${q.last_hour.retried} redelivered` : "—"],
    ]),
    el("div", { class: "actions", role: "group", "aria-label": "Queue state" },
      ACTIONS.map(([action, label, state]) => writeButton(label, setState(action),
        { id: `queue-${action}`, class: action === "resume" ? "" : "secondary", disabled: q.state === state, need: ["configure", q.name] }))),
    el("p", { class: "muted" }, "Paused: failures are still stored, nothing is redelivered. Draining: scheduled retries go out, replay rules start nothing new."),
    outcome,
    el("h2", {}, "Stats"),
    table([...STATE_COLUMNS.map(([label]) => label), "Total"], [el("tr", {}, stateCells(q))], { class: "stats" }),
    ...policySections(q, path, "the defaults"),
    replayRules(q.name, rules.items || []),
  );
}

// policySections show a queue's effective policy, its retry schedule and
// its API config editor, up to the replay rules' heading.
function policySections(q, path, undeclared) {
  return [
    el("h2", {}, "Effective policy"),
    facts([
      ["Declared in", el("span", { id: "declared-in" }, declaredIn(q, undeclared))],
      ["Merged", (q.layers || []).join(" ← ") || "—"],
    ]),
    policyTable(q.config),
    el("h3", {}, "Retry schedule"),
    scheduleView(q.schedule),
    el("h2", {}, "API config"),
    configEditor(q, path),
    el("h2", {}, "Replay rules"),
  ];
}

// declaredIn says where a queue's policy comes from, as the API says it
// now: a policy file, the API layer (over the files and defaults), or no
// layer of its own (the defaults it follows).
function declaredIn(q, undeclared) {
  const others = (q.layers || []).filter((l) => l !== "api");
  if (q.declared_in) return `${q.declared_in} (read-only here)`;
  if (q.source === "api") return `the API (below)${others.length ? `, over ${others.join(" ← ")}` : ""}`;
  return `no policy file or API config of its own: ${undeclared}${others.length ? ` (${others.join(" ← ")})` : ""}`;
}

// defaultLayer shows _default: the layer every topic inherits, with its
// policy and config editor, and the records of a topic that bears its name.
async function defaultLayer(signal, q, path, rules) {
  const own = await api(`/ojs/v1/dead-letter?queue=${DEFAULT}&limit=1`, { signal });
  const n = own.pagination.total;
  render(
    el("h1", {}, `Default layer ${DEFAULT}`),
    el("div", { id: "default-layer", class: "callout" },
      el("p", {}, el("code", {}, DEFAULT), " is the default layer that every topic inherits: what its config sets applies to every topic that does not set it itself, as under ", el("code", {}, DEFAULT), " in a policy file."),
      el("p", {}, "A Kafka topic named ", el("code", {}, DEFAULT), " follows it, and cannot be given a config, a pause or a drain of its own (rename the topic for that).")),
    facts([
      ["State", el("span", { id: "queue-state", class: `qstate-${q.state}` }, `${q.state} (for every topic that sets no state)`)],
      ["Records", el("span", { id: "default-records" }, n === 0
        ? `none: no Kafka topic named ${DEFAULT} has records here`
        : link(`/ui/records?queue=${DEFAULT}`, `${plural(n, "record")} of a Kafka topic named ${DEFAULT}`))],
    ]),
    ...policySections(q, path, "the built-in defaults"),
    el("p", { class: "muted" }, `These select the records of a Kafka topic named ${DEFAULT}.`),
    replayRules(q.name, rules.items || []),
  );
}

// policyTable flattens the effective config into dotted fields; durations
// show their words.
function policyTable(config) {
  const rows = [];
  const walk = (prefix, v) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      for (const [k, x] of Object.entries(v)) if (k !== "replay_rules" && k !== "name" && k !== "layers") walk(prefix ? `${prefix}.${k}` : k, x);
      return;
    }
    const shown = typeof v === "string" && /^P/.test(v) ? duration(v) : Array.isArray(v) ? (v.length ? v.join(", ") : "none") : v === "" ? "—" : String(v);
    rows.push(el("tr", {}, el("th", { scope: "row" }, prefix), el("td", {}, shown)));
  };
  walk("", config);
  return el("table", { class: "policy", id: "policy" }, el("tbody", {}, rows));
}

function configEditor(q, path) {
  if (q.source === "file") return el("p", { class: "muted" }, `Declared in the policy file ${q.declared_in}: change it there (the API refuses changes to file topics).`);
  const text = el("textarea", { id: "config", rows: "10", spellcheck: "false", "aria-describedby": "config-help" },
    JSON.stringify(q.api_config || {}, null, 2));
  const errors = el("div", { id: "config-errors", role: "alert" });
  // The API's message lists the field errors it also gives one by one:
  // each is shown once, in the list.
  const refused = (e) => {
    const fields = e.details.fields || [];
    fill(errors, fields.length
      ? [el("p", { class: "error" }, fields.length === 1 ? "The API refused this config:" : `The API refused this config (${fields.length} problems):`),
        el("ul", { class: "field-errors" }, fields.map((f) => el("li", {}, el("code", {}, f.field), `: ${f.message}`)))]
      : el("p", { class: "error" }, e.message));
  };
  const save = async () => {
    fill(errors);
    let body;
    try { body = JSON.parse(text.value); } catch (e) { fill(errors, el("p", { class: "error" }, `Not valid JSON: ${e.message}`)); return; }
    try {
      await api(`${path}/config`, { method: "PUT", body });
      reload();
    } catch (e) { refused(e); }
  };
  // Removing the API layer (DELETE) hands the topic back to its files and
  // the defaults; an empty config saved does the same.
  const remove = async () => {
    fill(errors);
    try {
      await api(path, { method: "DELETE" });
      reload();
    } catch (e) { refused(e); }
  };
  const mayConfigure = can("configure", q.name);
  if (!mayConfigure) text.setAttribute("readonly", "");
  return el("div", { class: "field" },
    el("label", { for: "config" }, "The API layer, in policy-file shape (JSON)"), text,
    el("small", { id: "config-help", class: "muted" }, q.name === DEFAULT
      ? "The default layer: every topic inherits what it sets, e.g. {\"dead_letter\": {\"retention\": {\"max_age\": \"P90D\"}}}."
      : "Layered over the policy files' defaults for this topic, e.g. {\"retry\": {\"max_attempts\": 10, \"initial_interval\": \"PT30S\"}}."),
    errors,
    el("div", { class: "actions" }, writeButton("Save config", save, { id: "config-save", need: ["configure", q.name] }),
      q.source === "api" && q.name !== DEFAULT
        ? writeButton("Remove API config", confirmThen(`Remove the API config of ${q.name}? It then follows its policy files and the defaults.`, remove),
          { id: "config-remove", class: "secondary", need: ["configure", q.name] }) : null),
    mayConfigure ? null : el("p", { class: "muted" }, readOnlyReason("configure", q.name)));
}
