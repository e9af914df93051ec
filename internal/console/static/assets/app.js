// Redrive console: a small application over the JSON API. Every page is a
// function that renders into <main> from the API; the URL (path and query)
// is the state, so views can be shared. The API key, when the server wants
// one, stays in sessionStorage and goes in the Authorization header: no
// cookies.

const KEY = "redrive.key";
const main = document.getElementById("main");
let authOn = true;

// ---- tiny DOM helpers ----------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else if (v === true) n.setAttribute(k, "");
    else n.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

function link(href, text) {
  return el("a", { href, onclick: (e) => { e.preventDefault(); go(href); } }, text);
}

function render(...nodes) {
  main.replaceChildren(...nodes);
  main.focus();
}

// Times: relative, with the UTC time on hover.
function ago(iso) {
  if (!iso) return el("span", { class: "muted" }, "—");
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  const abs = Math.abs(s);
  const [n, unit] = abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.round(abs / 60), "min"] : abs < 86400 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  return el("time", { datetime: iso, title: iso }, s >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`);
}

// ---- the API ---------------------------------------------------------------

class APIError extends Error {}

async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  const key = sessionStorage.getItem(KEY);
  if (authOn && key) headers["Authorization"] = "Bearer " + key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (resp.status === 401 && authOn) {
    sessionStorage.removeItem(KEY);
    askKey("That key was refused; enter another.");
    throw new APIError("unauthorized");
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!resp.ok) {
    const e = new APIError((data && data.error && data.error.message) || `${resp.status} ${resp.statusText}`);
    e.status = resp.status;
    throw e;
  }
  return data;
}

function failed(err) {
  if (err.message === "unauthorized") return;
  render(el("p", { class: "error", role: "alert" }, err.message));
}

// ---- the key prompt --------------------------------------------------------

function askKey(note) {
  const input = el("input", { id: "key", type: "password", autocomplete: "off", required: true });
  render(
    el("h1", {}, "API key"),
    note ? el("p", { class: "error" }, note) : null,
    el("form", {
      onsubmit: (e) => {
        e.preventDefault();
        sessionStorage.setItem(KEY, input.value.trim());
        route();
      },
    },
      el("label", { for: "key" }, "Key (kept in this tab only)"), " ", input, " ",
      el("button", { type: "submit" }, "Continue")),
  );
  input.focus();
}

// ---- pages -------------------------------------------------------------------

async function overview() {
  const [queues, incidents, newest] = await Promise.all([
    api("/ojs/v1/queues"), api("/ojs/v1/incidents?limit=20"), api("/ojs/v1/dead-letter?limit=10"),
  ]);
  const qs = queues.items || [];
  render(
    el("h1", {}, "Overview"),
    el("h2", {}, "Queues"),
    qs.length === 0 ? empty() : el("table", {},
      el("thead", {}, el("tr", {}, ["Queue", "State", "Delivery", "Retryable", "Available", "Dead letters", "Discarded", "Total"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, qs.map((q) => el("tr", {},
        el("td", {}, link(`/ui/records?queue=${encodeURIComponent(q.name)}`, q.name)),
        el("td", {}, q.state),
        el("td", { class: q.delivery.state === "blocked" ? "blocked" : "" },
          q.delivery.state === "blocked" ? `blocked: ${q.delivery.blocked_records} (${q.delivery.reason})` : "ok"),
        el("td", {}, q.stats.retryable), el("td", {}, q.stats.available),
        el("td", {}, q.stats.dead_letter), el("td", {}, q.stats.discarded), el("td", {}, q.stats.total))))),
    el("h2", {}, "Incidents"),
    (incidents.items || []).length === 0 ? el("p", { class: "muted" }, "No incidents: no stored failures.") : el("table", {},
      el("thead", {}, el("tr", {}, ["Records", "Error type", "Signature", "Queues", "Last seen"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, incidents.items.map((i) => el("tr", {},
        el("td", {}, link(`/ui/records?incident=${i.id}`, String(i.count))),
        el("td", {}, i.error_type), el("td", { class: "msg" }, i.signature),
        el("td", {}, i.queues.join(", ")), el("td", {}, ago(i.last_seen)))))),
    el("h2", {}, "Newest failures"),
    recordsTable(newest.items || []),
  );
}

function empty() {
  return el("div", { class: "empty" },
    el("p", {}, "The DLQ is empty. Dead-letter a record to see it here, for example with the README's tour:"),
    el("pre", {}, `echo '{"order_id":17}' | kcat -P -b 127.0.0.1:9092 -t dead_letter_queue -k order-17 \\
  -H redrive.source.topic=orders -H redrive.error.type=db.connection_refused \\
  -H 'redrive.error.message=dial tcp 10.0.0.5:5432: connection refused'`));
}

function recordsTable(items) {
  if (items.length === 0) return el("p", { class: "muted" }, "No records match.");
  return el("table", {},
    el("thead", {}, el("tr", {}, ["Key", "Queue", "Error type", "Message", "Attempt", "State", "Age"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, items.map((r) => {
      const last = (r.errors || [])[r.errors.length - 1] || {};
      return el("tr", {},
        el("td", {}, link(`/ui/records/${r.id}`, r.key ?? "(no key)")),
        el("td", {}, r.queue), el("td", {}, r.error_type), el("td", { class: "msg" }, last.message || ""),
        el("td", {}, `${r.attempt}/${r.max_attempts}`),
        el("td", { class: `state-${r.state}` }, r.exhaustion ? `${r.state}/${r.exhaustion}` : r.state),
        el("td", {}, ago(r.created_at)));
    })));
}

const FILTERS = ["queue", "type", "error_type", "state", "exhaustion", "since", "until", "key", "q", "path", "value", "header", "incident"];

async function records() {
  const params = new URLSearchParams(location.search);
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const f of FILTERS) {
      const v = form.elements[f].value.trim();
      if (v) next.set(f, v);
    }
    go(`/ui/records${next.toString() ? "?" + next : ""}`);
  } },
    FILTERS.map((f) => el("label", {}, f.replace("_", " "),
      f === "state" ? el("select", { name: f }, ["", "retryable", "available", "completed", "discarded"].map((s) => el("option", { value: s, selected: params.get(f) === s }, s || "any")))
        : f === "exhaustion" ? el("select", { name: f }, ["", "dead_letter", "discard"].map((s) => el("option", { value: s, selected: params.get(f) === s }, s || "any")))
        : el("input", { name: f, value: params.get(f) || "" }))),
    el("div", {}, el("button", { type: "submit" }, "Filter")));
  const query = new URLSearchParams();
  for (const f of FILTERS) if (params.get(f)) query.set(f, params.get(f));
  if (params.get("cursor")) query.set("cursor", params.get("cursor"));
  const page = await api("/ojs/v1/dead-letter?" + query);
  const pg = page.pagination;
  const next = new URLSearchParams(params);
  next.set("cursor", pg.next_cursor || "");
  render(
    el("h1", {}, "Records"), form,
    el("p", { class: "muted" }, `${pg.total}${pg.total_capped ? "+" : ""}${pg.total_estimated ? " (estimated)" : ""} matching`),
    recordsTable(page.items || []),
    pg.has_more ? el("p", {}, link(`/ui/records?${next}`, "Next page →")) : null,
  );
}

async function record(id) {
  const r = await api(`/ojs/v1/dead-letter/${encodeURIComponent(id)}`);
  const value = r.payload !== undefined ? JSON.stringify(r.payload, null, 2) : r.value_encoding === "base64" ? `(base64) ${r.value}` : r.value;
  const status = el("p", { role: "status" });
  const act = async (what, fn) => {
    try {
      await fn();
      status.textContent = `${what}: done`;
      setTimeout(() => route(), 400);
    } catch (err) { status.textContent = `${what}: ${err.message}`; status.className = "error"; }
  };
  render(
    el("h1", {}, `Record ${r.key ?? r.id}`),
    el("dl", { class: "facts" },
      el("dt", {}, "Queue"), el("dd", {}, link(`/ui/records?queue=${encodeURIComponent(r.queue)}`, r.queue)),
      el("dt", {}, "State"), el("dd", { class: `state-${r.state}` }, r.exhaustion ? `${r.state}/${r.exhaustion}` : r.state),
      el("dt", {}, "Attempt"), el("dd", {}, `${r.attempt} of ${r.max_attempts}`),
      el("dt", {}, "Next retry"), el("dd", {}, ago(r.next_retry_at)),
      el("dt", {}, "Created"), el("dd", {}, ago(r.created_at)),
      el("dt", {}, "Incident"), el("dd", {}, r.incident ? link(`/ui/records?incident=${r.incident}`, r.incident) : "—"),
      el("dt", {}, "Redelivery"), el("dd", { class: r.redelivery_failure ? "blocked" : "" },
        r.redelivery_failure ? `failing: ${r.redelivery_failure.reason}, ${r.redelivery_failure.message}` : r.redelivered_at ? ago(r.redelivered_at) : "—"),
      el("dt", {}, "Archive"), el("dd", {}, r.archive ? `${r.archive.state}${r.archive.reason ? " (" + r.archive.reason + ")" : ""}` : "—")),
    el("div", { class: "actions" },
      el("button", { type: "button", onclick: () => act("Retry", () => api(`/ojs/v1/dead-letter/${r.id}/retry`, { method: "POST", body: {} })) }, "Retry now"),
      el("button", { type: "button", class: "danger", onclick: () => {
        if (confirm(`Delete record ${r.id}? This cannot be undone.`)) act("Delete", () => api(`/ojs/v1/dead-letter/${r.id}`, { method: "DELETE" }));
      } }, "Delete")),
    status,
    el("h2", {}, "Value"),
    el("details", { open: true }, el("summary", {}, r.payload !== undefined ? "JSON" : "Text"), el("pre", {}, value ?? "")),
    el("h2", {}, "Headers"),
    (r.headers || []).length === 0 ? el("p", { class: "muted" }, "None.") : el("table", {},
      el("tbody", {}, r.headers.map((h) => el("tr", {}, el("th", { scope: "row" }, h.key), el("td", { class: "msg" }, h.encoding === "base64" ? `(base64) ${h.value}` : h.value))))),
    el("h2", {}, "Errors"),
    el("ol", { class: "timeline" }, (r.errors || []).map((e) => el("li", {},
      el("strong", {}, `attempt ${e.attempt}: ${e.type}`), " ", el("span", { class: "muted" }, e.code), " ", ago(e.occurred_at),
      el("div", { class: "msg" }, e.message),
      (e.backtrace || []).length ? el("details", {}, el("summary", {}, "Backtrace"), el("pre", {}, e.backtrace.join("\n"))) : null))),
  );
}

async function tasks() {
  const page = await api("/ojs/v1/tasks");
  const items = page.items || [];
  render(
    el("h1", {}, "Tasks"),
    items.length === 0 ? el("p", { class: "muted" }, "No bulk tasks yet: bulk retries and purges run as tasks.") : el("table", {},
      el("thead", {}, el("tr", {}, ["Task", "Kind", "State", "Progress", "By", "Created"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, items.map((t) => el("tr", {},
        el("td", {}, t.id), el("td", {}, t.kind), el("td", {}, t.state),
        el("td", {}, el("progress", { max: String(Math.max(t.total, 1)), value: String(t.processed) }), ` ${t.processed}/${t.total}`),
        el("td", {}, t.created_by), el("td", {}, ago(t.created_at)))))),
  );
}

// ---- routing -------------------------------------------------------------------

function go(href) {
  history.pushState(null, "", href);
  route();
}

function route() {
  if (authOn && !sessionStorage.getItem(KEY)) return askKey();
  const p = location.pathname.replace(/\/+$/, "");
  let page;
  if (p === "/ui") page = overview();
  else if (p === "/ui/records") page = records();
  else if (p.startsWith("/ui/records/")) page = record(decodeURIComponent(p.slice("/ui/records/".length)));
  else if (p === "/ui/tasks") page = tasks();
  else return render(el("p", {}, "No such page. "), link("/ui/", "Overview"));
  page.catch(failed);
}

async function boot() {
  const conf = await (await fetch("/ui/config.json")).json();
  authOn = conf.auth;
  const banner = document.getElementById("banner");
  if (!authOn) {
    banner.textContent = "AUTH DISABLED: the API is served without API keys; never expose it.";
    banner.hidden = false;
  } else {
    const out = document.getElementById("signout");
    out.hidden = false;
    out.addEventListener("click", () => { sessionStorage.removeItem(KEY); askKey(); });
  }
  window.addEventListener("popstate", route);
  route();
}

boot().catch(failed);
