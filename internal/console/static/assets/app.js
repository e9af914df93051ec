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
  if (session.auth && !storedKey() && !session.login) return askKey();
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

// askKey shows the key prompt, and the single sign-on login when the
// server offers one; a good key or a login leads back to the page asked for.
function askKey(note) {
  current.abort();
  session.login = false;
  // Nothing to forget or log out of until a key or login works.
  document.getElementById("signout").hidden = true;
  const input = el("input", { id: "key", type: "password", autocomplete: "off", required: true });
  const back = encodeURIComponent(location.pathname + location.search);
  render(
    el("h1", {}, session.loginOffered ? "Log in" : "API key"),
    note ? el("p", { class: "error", role: "alert" }, note) : null,
    session.loginOffered ? el("p", {}, el("a", { id: "sso-login", class: "button", href: `/auth/login?return=${back}` }, "Log in with single sign-on")) : null,
    el("p", {}, session.loginOffered ? "Or use an API key: it is kept in this browser tab only and sent with each request."
      : "This server wants an API key. It is kept in this browser tab only and sent with each request."),
    el("form", { id: "key-form", class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      storeKey(input.value.trim());
      if (await whoami()) route();
    } },
    el("label", { for: "key" }, "Key"), input, el("button", { type: "submit" }, "Continue")),
  );
  input.focus();
}

// whoami learns who the caller is (a key's name and scope, a person's
// roles and grants); false when the key or session was refused.
async function whoami() {
  try {
    Object.assign(session, await api("/ojs/v1/whoami"));
  } catch (e) {
    if (e.status !== 401) failed(e);
    return false;
  }
  const banner = document.getElementById("readonly");
  const who = document.getElementById("who");
  const out = document.getElementById("signout");
  out.hidden = !session.auth;
  // The audit log is for admins of every queue (API keys: any scope).
  document.querySelector('header nav a[href="/ui/audit"]').hidden = session.kind === "oidc" &&
    !session.grants.some((g) => g.actions.includes("admin") && g.queues.includes("*"));
  if (session.kind === "oidc") {
    const roles = session.roles.length ? session.roles.join(", ") : "no role";
    who.textContent = `${session.email || session.name} (${roles})`;
    const queues = [...new Set(session.grants.flatMap((g) => g.queues))];
    banner.hidden = queues.includes("*");
    banner.textContent = session.grants.length
      ? `Your roles (${roles}) reach the queues ${queues.join(", ")}: you see only their records, and act only as each role allows.`
      : "You are signed in but in no role: ask an administrator for one.";
    out.textContent = session.login ? "Log out" : "Forget token";
  } else {
    banner.hidden = session.scope === "write";
    banner.textContent = readOnlyReason();
    who.textContent = session.auth ? `key: ${session.key} (${session.scope})` : "";
    out.textContent = "Forget key";
  }
  return true;
}

// signOut ends a single sign-on session (the cookie is HttpOnly: the
// server clears it) or forgets the key.
async function signOut() {
  if (session.login) {
    await fetch("/auth/logout", { method: "POST", headers: { "Content-Type": "application/json" } }).catch(() => {});
    session.login = false;
  }
  forgetKey();
  askKey();
}

async function boot() {
  // The server says in the page whether its API wants a key.
  session.auth = document.documentElement.dataset.auth === "on";
  session.loginOffered = document.documentElement.dataset.login === "on";
  if (!session.auth) {
    session.scope = "write";
    const banner = document.getElementById("banner");
    banner.textContent = "AUTH DISABLED: the API is served without API keys, so anyone who can reach it can change or delete records. Never expose it.";
    banner.hidden = false;
  } else {
    const out = document.getElementById("signout");
    out.hidden = false;
    out.addEventListener("click", () => { signOut(); });
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
  // A session cookie of a single sign-on login (the callback lands here):
  // whoami answers without a key.
  if (session.auth && !storedKey() && session.loginOffered) {
    const probe = await fetch("/ojs/v1/whoami");
    if (!probe.ok) {
      const body = await probe.json().catch(() => null);
      const expired = /session has expired/.test(body?.error?.message || "");
      return askKey(expired ? "Your session has ended; log in again." : undefined);
    }
    if (!(await whoami())) return;
  }
  route();
}

boot().catch((e) => { main.replaceChildren(el("p", { class: "error", role: "alert" }, e.message)); });
