// Redrive console: a small application over the JSON API. Every page is a
// function that renders into <main> from the API; the URL (path and query)
// is the state, so views can be shared. Pages get an AbortSignal that ends
// their requests, timers and event streams when the user navigates away.

import { el, link } from "./lib/dom.js";
import { setRouter, go } from "./lib/nav.js";
import { api, session, storedKey, storeKey, forgetKey, setUnauthorizedHandler, readOnlyReason } from "./lib/api.js";
import { main, render, failed } from "./lib/page.js";
import { overview, queues } from "./pages/overview.js";
import { records } from "./pages/records.js";
import { record } from "./pages/record.js";
import { tasks, task } from "./pages/tasks.js";
import { queuePage } from "./pages/queue.js";
import { incidents } from "./pages/incidents.js";
import { incident } from "./pages/incident.js";
import { audit } from "./pages/audit.js";
import { eventsPage } from "./pages/events.js";

// Routes: a path pattern and its page. A (...) group is passed to the page.
const ROUTES = [
  [/^\/ui$/, overview],
  [/^\/ui\/queues$/, queues],
  [/^\/ui\/queues\/(.+)$/, queuePage],
  [/^\/ui\/records$/, records],
  [/^\/ui\/records\/(.+)$/, record],
  [/^\/ui\/incidents$/, incidents],
  [/^\/ui\/incidents\/([0-9a-f]+)$/, incident],
  [/^\/ui\/tasks$/, tasks],
  [/^\/ui\/tasks\/(.+)$/, task],
  [/^\/ui\/audit$/, audit],
  [/^\/ui\/events$/, eventsPage],
];

let current = new AbortController();

function route() {
  current.abort();
  current = new AbortController();
  if (session.auth && !storedKey()) return askKey();
  markNav();
  const path = location.pathname.replace(/\/+$/, "");
  for (const [pattern, page] of ROUTES) {
    const m = pattern.exec(path);
    if (!m) continue;
    const signal = current.signal;
    // The mark times a page's first render (the bench reads it).
    performance.clearMarks("redrive:rendered");
    page(signal, ...m.slice(1).map(decodeURIComponent))
      .then(() => { if (!signal.aborted) performance.mark("redrive:rendered"); })
      .catch((e) => { if (!signal.aborted) failed(e); });
    return;
  }
  render(el("h1", {}, "No such page"), el("p", {}, link("/ui/", "Go to the overview")));
}

function markNav() {
  for (const a of document.querySelectorAll("header nav a")) {
    const here = a.getAttribute("href") === "/ui/" ? location.pathname.replace(/\/+$/, "") === "/ui" : location.pathname.startsWith(a.getAttribute("href"));
    if (here) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
}

// askKey shows the key prompt; a good key leads back to the page asked for.
function askKey(note) {
  current.abort();
  const input = el("input", { id: "key", type: "password", autocomplete: "off", required: true });
  render(
    el("h1", {}, "API key"),
    el("p", {}, "This server wants an API key. It is kept in this browser tab only and sent with each request."),
    note ? el("p", { class: "error", role: "alert" }, note) : null,
    el("form", { id: "key-form", class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      storeKey(input.value.trim());
      if (await whoami()) route();
    } },
    el("label", { for: "key" }, "Key"), input, el("button", { type: "submit" }, "Continue")),
  );
  input.focus();
}

// whoami learns the key's name and scope; false when the key was refused.
async function whoami() {
  try {
    Object.assign(session, await api("/ojs/v1/whoami"));
  } catch (e) {
    if (e.status !== 401) failed(e);
    return false;
  }
  const banner = document.getElementById("readonly");
  banner.hidden = session.scope === "write";
  banner.textContent = readOnlyReason();
  const who = document.getElementById("who");
  who.textContent = session.auth ? `key: ${session.key} (${session.scope})` : "";
  return true;
}

async function boot() {
  // The server says in the page whether its API wants a key.
  session.auth = document.documentElement.dataset.auth === "on";
  if (!session.auth) {
    session.scope = "write";
    const banner = document.getElementById("banner");
    banner.textContent = "AUTH DISABLED: the API is served without API keys, so anyone who can reach it can change or delete records. Never expose it.";
    banner.hidden = false;
  } else {
    const out = document.getElementById("signout");
    out.hidden = false;
    out.addEventListener("click", () => { forgetKey(); askKey(); });
  }
  setUnauthorizedHandler(askKey);
  // The header's links route in place, as every link of the pages does.
  document.querySelector("header").addEventListener("click", (e) => {
    const a = e.target.closest("a[href^='/ui/']");
    if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    go(a.getAttribute("href"));
  });
  setRouter(route);
  window.addEventListener("popstate", route);
  // Leaving the page, or its going into the back/forward cache, ends its
  // requests and event stream (each holds one of the browser's few
  // connections to this server); coming back from that cache renders afresh.
  window.addEventListener("pagehide", () => current.abort());
  window.addEventListener("pageshow", (e) => { if (e.persisted) route(); });
  if (session.auth && storedKey() && !(await whoami())) return;
  route();
}

boot().catch((e) => { main.replaceChildren(el("p", { class: "error", role: "alert" }, e.message)); });
