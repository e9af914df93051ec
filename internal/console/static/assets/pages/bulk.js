// Bulk retry and purge, of everything a filter matches or of the records an
// operator picked: a dry run first (the count, and the records a retry would
// skip), then on confirmation a task whose progress the task page shows. A
// purge of everything, or of a whole queue, is only sent once the operator
// has typed the count or the queue's name.

import { el, fill, plural, link, table } from "../lib/dom.js";
import { api, apiExact, withRaw } from "../lib/api.js";
import { writeButton } from "../lib/write.js";
import { go } from "../lib/nav.js";
import { parse, check, member, pretty, scalarText } from "../lib/json.js";
import { diffView } from "../lib/diff.js";
import { fieldErrors } from "./payload_edit.js";

// bulkFilter turns the list's query into the bulk API's JSON filter, key by
// key as the key table (lib/filter.js) says: a repeatable key (header) is a
// list there, a boolean (unacknowledged) true or false, and the rest text
// (value too: the API matches the text 17 as 17 and as "17").
export function bulkFilter(query, keys) {
  const byName = new Map(keys.map((k) => [k.name, k]));
  const f = {};
  for (const [name, v] of query) {
    const k = byName.get(name);
    if (k?.repeatable) (f[name] ||= []).push(v);
    else if (k?.kind === "bool") f[name] = v === "true";
    else f[name] = v;
  }
  return f;
}

// bulkPanel is the Retry and Purge buttons with the panel of their dry run.
// filterOf gives the filter when a button is pressed; scope says what it
// is: filtered (false: no filter at all), queue (the filter is only this
// queue), picked (the records picked on the page, by id). id prefixes the
// ids of the controls.
export function bulkPanel(filterOf, { filtered = true, queue = null, picked = false, id = "bulk" } = {}) {
  const panel = el("div", { class: "bulk", id, hidden: true, role: "region", "aria-label": picked ? "Action on the selected records" : "Bulk action" });
  const close = () => { panel.hidden = true; fill(panel); };
  const start = (kind) => async () => {
    panel.hidden = false;
    fill(panel, el("p", {}, "Counting…"));
    try {
      fill(panel, await dryRun(kind, filterOf(), { filtered, queue, picked, id }, close));
      panel.querySelector("input, button")?.focus();
    } catch (e) {
      fill(panel, el("p", { class: "error", role: "alert" }, e.message));
    }
  };
  const node = el("div", { class: "bulkbar" },
    writeButton(picked ? "Retry selected…" : "Retry all matching…", start("retry"), { id: `${id}-retry`, need: ["retry"] }),
    writeButton(picked ? "Purge selected…" : "Purge all matching…", start("purge"), { id: `${id}-purge`, class: "danger", need: ["purge"] }),
    writeButton(picked ? "Repair selected with a patch…" : "Repair with a patch…", () => {
      panel.hidden = false;
      fill(panel, patchPanel(filterOf, { filtered, picked, id }, close));
      panel.querySelector("textarea").focus();
    }, { id: `${id}-patch`, class: "secondary", need: ["edit"] }),
    panel);
  node.close = close;
  return node;
}

async function dryRun(kind, filter, scope, close) {
  const call = (body) => kind === "retry"
    ? api("/ojs/v1/dead-letter/retry", { method: "POST", body })
    : api("/ojs/v1/dead-letter", { method: "DELETE", body });
  const dry = await call({ filter, confirm: false });
  const verb = kind === "retry" ? "retried" : "deleted";
  const { id } = scope;
  const rate = el("input", { id: `${id}-rate`, type: "number", min: "0", step: "any", placeholder: "unlimited", inputmode: "decimal" });
  const outcome = el("p", { role: "status" });
  const lines = [
    el("p", { id: `${id}-count` }, el("strong", {}, plural(dry.would_affect, "record")), ` would be ${verb}.`,
      dry.skipped ? ` ${plural(dry.skipped, "record")} would be skipped: their topic is one of Redrive's own (retry each with a target topic).` : "",
      scope.picked && dry.would_affect + (dry.skipped || 0) < filter.ids.length
        ? ` ${plural(filter.ids.length - dry.would_affect - (dry.skipped || 0), "picked record")} would be left alone: ${kind === "retry" ? "not retryable now, or gone" : "gone already"}.` : ""),
    !scope.filtered ? el("p", { class: "error" }, `No filter: this ${kind === "retry" ? "retries" : "deletes"} every record that matches, in every queue.`) : null,
  ];
  if (dry.would_affect === 0) return [...lines, el("button", { type: "button", class: "secondary", onclick: close }, "Close")];
  // A purge of every record, or of a whole queue, waits for the operator
  // to type what it deletes.
  const typed = kind === "purge" && !scope.picked
    ? (!scope.filtered ? { want: String(dry.would_affect), what: `the number of records, ${dry.would_affect}` }
      : scope.queue ? { want: scope.queue, what: `the queue's name, ${scope.queue}` } : null)
    : null;
  const confirm = el("button", { type: "button", id: `${id}-confirm`, class: kind === "purge" ? "danger" : "", disabled: !!typed, onclick: async (e) => {
    e.target.disabled = true;
    const body = { filter, confirm: true };
    if (rate.value !== "") body.rate_limit = Number(rate.value);
    try {
      const out = await call(body);
      go(`/ui/tasks/${out.task.id}`);
    } catch (err) {
      outcome.className = "error";
      outcome.textContent = err.message;
      e.target.disabled = false;
    }
  } }, kind === "retry" ? `Retry ${plural(dry.would_affect, "record")}` : `Delete ${plural(dry.would_affect, "record")}`);
  const check = typed ? el("div", { class: "inline" },
    el("label", { for: `${id}-typed` }, `To delete them, type ${typed.what}:`),
    el("input", { id: `${id}-typed`, autocomplete: "off", spellcheck: "false", oninput: (e) => {
      confirm.disabled = e.target.value.trim().replaceAll(",", "") !== typed.want;
    } })) : null;
  return [
    ...lines,
    check,
    el("div", { class: "inline" },
      el("label", { for: `${id}-rate` }, "Rate limit (records/s)"), rate,
      confirm,
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    outcome,
  ];
}

// PATCH_EXAMPLE is the patch editor's placeholder.
const PATCH_EXAMPLE = '[{"op": "test", "path": "/currency", "value": "usd"},\n {"op": "replace", "path": "/currency", "value": "USD"}]';

// patchPanel repairs the records a view matches with an RFC 6902 JSON
// Patch on their decoded payloads (JSON, and values decoded from the Schema
// Registry wire format): the operator writes the patch, a dry run says how
// many records it applies to and how many it fails on (with the first
// errors) and shows sample diffs, and a confirmation starts a retry task
// that patches, validates and encodes each record as it reaches it,
// skipping (and listing) those that fail. The patch is sent as typed and
// the samples read as the API wrote them (lib/json.js): no number goes
// through a JavaScript number.
function patchPanel(filterOf, scope, close) {
  const { id } = scope;
  const text = el("textarea", { id: `${id}-patch-text`, rows: "6", spellcheck: "false", placeholder: PATCH_EXAMPLE, "aria-describedby": `${id}-patch-check` });
  const syntax = el("p", { id: `${id}-patch-check`, class: "check", "aria-live": "polite" });
  const result = el("div", { id: `${id}-patch-result`, "aria-live": "polite" });
  // patchText is the patch as typed when it is a JSON array, else null (and
  // says why).
  const patchText = () => {
    const src = text.value.trim();
    const err = src ? check(src) : { message: "write a JSON array of operations" };
    if (!err && parse(src, { maxDepth: 1 }).root.type === "array") {
      syntax.className = "check";
      syntax.textContent = "";
      return src;
    }
    syntax.className = "check error";
    syntax.textContent = err ? `Not a patch: ${err.message}.` : "Not a patch: a JSON Patch is an array of operations, [{\"op\": …, \"path\": …}, …].";
    return null;
  };
  text.addEventListener("input", () => { fill(result); if (text.value.trim()) patchText(); else { syntax.className = "check"; syntax.textContent = ""; } });
  const dry = async (e) => {
    const patch = patchText();
    if (patch === null) return;
    const filter = filterOf();
    e.target.disabled = true;
    fill(result, el("p", {}, "Trying the patch on every matching record…"));
    try {
      const { data, text: answer } = await apiExact("/ojs/v1/dead-letter/retry", { method: "POST", json: withRaw({ filter, confirm: false }, "patch", patch) });
      fill(result, dryRunOfPatch(data, answer, filter, patch, scope, close));
    } catch (err) {
      fill(result, el("p", { class: "error", role: "alert" }, err.message), el("ul", { class: "field-errors" }, fieldErrors(err)));
    } finally { e.target.disabled = false; }
  };
  return [
    el("h3", {}, scope.picked ? "Repair the selected records with a JSON Patch" : "Repair every matching record with a JSON Patch"),
    el("p", { class: "muted" }, "An RFC 6902 JSON Patch (add, remove, replace, move, copy, test), applied to each record's decoded payload, checked against its schema and encoded with it. Records it fails on are skipped and listed on the task, never produced half-right."),
    !scope.filtered ? el("p", { class: "error" }, "No filter: this patches and retries every record, in every queue.") : null,
    el("div", { class: "field" }, el("label", { for: `${id}-patch-text` }, "Patch"), text, syntax),
    el("div", { class: "actions" },
      el("button", { type: "button", id: `${id}-patch-dry`, onclick: dry }, "Dry run"),
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    result,
  ];
}

// dryRunOfPatch shows a patch's dry run: how many records it applies to
// and fails on, the first errors, the sample diffs, and the confirmation.
function dryRunOfPatch(dry, answer, filter, patch, scope, close) {
  const { id } = scope;
  const p = dry.patch;
  if (!p) return el("p", { class: "error", id: `${id}-patch-summary` }, "This server does not apply patches: its dry run says nothing of the patch. Nothing was changed.");
  const rate = el("input", { id: `${id}-patch-rate`, type: "number", min: "0", step: "any", placeholder: "unlimited", inputmode: "decimal" });
  const outcome = el("p", { role: "status" });
  const confirm = el("button", { type: "button", id: `${id}-patch-confirm`, disabled: p.applies === 0, onclick: async (e) => {
    e.target.disabled = true;
    const body = { filter, confirm: true };
    if (rate.value !== "") body.rate_limit = Number(rate.value);
    try {
      const out = await api("/ojs/v1/dead-letter/retry", { method: "POST", json: withRaw(body, "patch", patch) });
      go(`/ui/tasks/${out.task.id}`);
    } catch (err) {
      outcome.className = "error";
      outcome.textContent = err.message;
      e.target.disabled = false;
    }
  } }, `Patch and retry ${plural(p.applies, "record")}`);
  return [
    el("p", { id: `${id}-patch-summary` },
      el("strong", {}, `${plural(p.applies, "record")} would be patched and retried`), "; ",
      el("span", { class: p.fails ? "blocked" : "" }, `${plural(p.fails, "record")} would be skipped`),
      p.fails ? " (the patch fails on them, or their result does not match their schema)." : ".",
      dry.skipped ? ` ${plural(dry.skipped, "more record")} would be left alone: their topic is one of Redrive's own.` : ""),
    (p.errors || []).length ? [el("h4", {}, p.fails > p.errors.length ? `The first ${p.errors.length} of ${plural(p.fails, "failure")}` : "Failures"),
      table(["Record", "Field", "Message"], p.errors.map((x) => el("tr", {},
        el("td", {}, link(`/ui/records/${encodeURIComponent(x.id)}`, x.id.slice(0, 8), { title: x.id })),
        el("td", {}, el("code", {}, x.field || "")), el("td", { class: "msg" }, x.message || ""))), { id: `${id}-patch-errors` })] : null,
    (p.samples || []).length ? [el("h4", {}, `Sample ${p.samples.length === 1 ? "change" : "changes"} (- before, + after)`),
      el("div", { id: `${id}-patch-samples` }, samplesOf(answer).map(([sid, before, after]) => el("div", { class: "sample" },
        el("p", {}, "Record ", link(`/ui/records/${encodeURIComponent(sid)}`, sid, { class: "id" })),
        diffView(before, after))))] : null,
    el("div", { class: "inline" },
      el("label", { for: `${id}-patch-rate` }, "Rate limit (records/s)"), rate,
      confirm,
      el("button", { type: "button", class: "secondary", onclick: close }, "Cancel")),
    outcome,
  ];
}

// samplesOf reads the dry run's samples from its text, numbers as written:
// [id, before, after], the payloads laid out by pretty.
function samplesOf(answer) {
  const jsonOf = (doc, node) => (node ? pretty(parse(doc.slice(node.start, node.end))) : "");
  try {
    const samples = member(member(parse(answer).root, "patch"), "samples");
    return (samples?.items || []).map((s) => [scalarText(member(s, "id")), jsonOf(answer, member(s, "before")), jsonOf(answer, member(s, "after"))]);
  } catch { return []; }
}
