// A live tail of lifecycle events, newest first.

import { el, link, ago } from "../lib/dom.js";
import { subscribe } from "../lib/api.js";
import { render } from "../lib/page.js";
import { go } from "../lib/nav.js";
import { liveIndicator } from "./overview.js";

const KEEP = 200;

export async function eventsPage(signal) {
  const params = new URLSearchParams(location.search);
  const list = el("ol", { id: "events", class: "events", reversed: true });
  const live = liveIndicator();
  const form = el("form", { class: "inline", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const f of ["type", "topic"]) if (form.elements[f].value.trim()) next.set(f, form.elements[f].value.trim());
    go(`/ui/events${next.toString() ? "?" + next : ""}`);
  } },
  el("label", {}, "Types ", el("input", { name: "type", value: params.get("type") || "", placeholder: "dead_letter.added,queue.paused" })),
  el("label", {}, "Topic ", el("input", { name: "topic", value: params.get("topic") || "" })),
  el("button", { type: "submit" }, "Watch"));
  const waiting = el("p", { class: "muted" }, "Waiting for events: they appear here as failures arrive, records are retried or deleted, queues change.");
  render(el("div", { class: "title" }, el("h1", {}, "Events"), live), form, waiting, list);
  const q = new URLSearchParams();
  for (const f of ["type", "topic"]) if (params.get(f)) q.set(f, params.get(f));
  subscribe(q.toString(), (ev) => {
    waiting.hidden = true;
    const d = ev.data || {};
    const subject = d.id && ev.type.startsWith("dead_letter.") ? recordName(d) : ev.subject || d.id;
    list.prepend(el("li", {},
      ago(typeof ev.time === "number" ? new Date(ev.time).toISOString() : ev.time), " ", el("strong", {}, ev.type), " ",
      d.id && ev.type !== "dead_letter.deleted" && ev.type.startsWith("dead_letter.") ? link(`/ui/records/${d.id}`, subject, { title: `record ${d.id}` })
        : subject ? el("span", { class: "subject", title: d.id ? `record ${d.id}` : null }, subject) : null,
      d.key_encoding === "base64" ? [" ", el("span", { class: "tag" }, "base64")] : null,
      d.queue ? el("span", { class: "muted" }, ` in ${d.queue}`) : null,
      d.error_type ? el("span", { class: "muted" }, ` · ${d.error_type}`) : null,
      d.count ? el("span", { class: "muted" }, ` · ${d.count} records (${d.reason})`) : null));
    while (list.children.length > KEEP) list.lastChild.remove();
  }, signal, live.set);
}

// recordName is how an event names its record: by its key (the start the
// event carries, with an ellipsis when cut), or by id for a null key.
function recordName(d) {
  if (d.key == null) return d.id;
  const chars = Array.from(d.key);
  const shown = chars.length > KEY_CHARS ? chars.slice(0, KEY_CHARS).join("") + "…" : d.key + (d.key_truncated ? "…" : "");
  return `key ${shown}`;
}

const KEY_CHARS = 60;
