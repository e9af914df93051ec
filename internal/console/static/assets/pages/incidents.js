// Incidents: failures grouped by fingerprint, most records first. A row
// shows its signature cut at CLIP characters (the whole on demand) and,
// under it, the backtrace frame that tells it from the other incidents of
// its error type and message.

import { el, link, table, ago, plural } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";

const CLIP = 200;

export async function incidents(signal) {
  const params = new URLSearchParams(location.search);
  const q = new URLSearchParams({ limit: "200" });
  if (params.get("queue")) q.set("queue", params.get("queue"));
  const page = await api("/ojs/v1/incidents?" + q, { signal });
  render(
    el("h1", {}, "Incidents"),
    el("p", { class: "muted" }, "A group of failures with one fingerprint: the error type, the message with its variable parts replaced, and the top backtrace frames. Open one to see its failures over time, and its records to retry or purge them."),
    incidentsTable(page.items || []),
  );
}

// incidentsTable lists incidents (the overview shows the top ones).
export function incidentsTable(items) {
  if (items.length === 0) return el("p", { class: "muted" }, "No incidents: no stored failures.");
  const frameOf = distinguishingFrames(items);
  return table(["Records", "Incident", "Queues", "First seen", "Last seen"],
    items.map((i) => el("tr", { "data-incident": i.id },
      el("td", { class: "num" }, link(`/ui/records?incident=${i.id}`, String(i.count), { title: `The ${plural(i.count, "record")} of this incident` })),
      el("td", { class: "msg incident" },
        link(`/ui/incidents/${i.id}`, i.error_type || "(no error type)", { class: "etype" }), " ",
        clipped(i.signature, CLIP),
        frameOf(i) ? el("div", { class: "frame" }, el("span", { class: "muted" }, "at "), el("code", {}, frameOf(i))) : null),
      el("td", {}, i.queues.join(", ")), el("td", {}, ago(i.first_seen)), el("td", {}, ago(i.last_seen)))),
    { class: "incidents" });
}

// clipped shows text cut at n characters, with a button that shows it
// whole (and cuts it again).
export function clipped(text, n) {
  const chars = [...(text || "")];
  if (chars.length <= n) return el("span", { class: "sig" }, text);
  const short = chars.slice(0, n).join("") + "…";
  const span = el("span", { class: "sig", "data-clipped": "true" }, short);
  const button = el("button", { type: "button", class: "more", "aria-expanded": "false",
    onclick: () => {
      const open = button.getAttribute("aria-expanded") !== "true";
      span.textContent = open ? text : short;
      span.dataset.clipped = String(!open);
      button.setAttribute("aria-expanded", String(open));
      button.textContent = open ? "Show less" : `Show all ${chars.length.toLocaleString("en")} characters`;
    } }, `Show all ${chars.length.toLocaleString("en")} characters`);
  return el("span", { class: "clipped" }, span, " ", button);
}

// distinguishingFrames returns, per incident, the frame to show on its row:
// where other listed incidents share its error type and signature, its
// first frame that differs from theirs; else its top frame (none without a
// backtrace).
function distinguishingFrames(items) {
  const key = (i) => `${i.error_type}\n${i.signature}`;
  const groups = new Map();
  for (const i of items) groups.set(key(i), [...(groups.get(key(i)) || []), i]);
  return (i) => {
    const frames = i.frames || [];
    if (frames.length === 0) return null;
    const others = groups.get(key(i)).filter((o) => o !== i);
    if (others.length === 0) return frames[0];
    const at = frames.findIndex((f, k) => others.some((o) => (o.frames || [])[k] !== f));
    return frames[at < 0 ? 0 : at];
  };
}
