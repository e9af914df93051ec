// Incidents: failures grouped by fingerprint, most records first.

import { el } from "../lib/dom.js";
import { api } from "../lib/api.js";
import { render } from "../lib/page.js";
import { incidentsTable } from "./overview.js";

export async function incidents(signal) {
  const params = new URLSearchParams(location.search);
  const q = new URLSearchParams({ limit: "200" });
  if (params.get("queue")) q.set("queue", params.get("queue"));
  const page = await api("/ojs/v1/incidents?" + q, { signal });
  render(
    el("h1", {}, "Incidents"),
    el("p", { class: "muted" }, "A group of failures with one fingerprint: the error type, the message with its variable parts replaced, and the top backtrace frames. Open one to see, retry or purge its records."),
    incidentsTable(page.items || []),
  );
}
