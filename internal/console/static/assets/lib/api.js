// The JSON API and the event stream, with the caller's key. The key lives in
// sessionStorage (this tab only) and travels in the Authorization header.
// A person signed in with single sign-on has instead an HttpOnly session
// cookie (SameSite=Lax) that the browser sends with every same-origin call;
// writes still need Content-Type: application/json and a same-origin page,
// which another site cannot give them.

const KEY = "redrive.key";

// session is what the console knows about the caller: whether the server
// wants keys, whether it offers a single sign-on login, and from
// /ojs/v1/whoami the key's name and scope, or the person's kind, name,
// email, roles and grants (actions on queue globs).
export const session = { auth: true, loginOffered: false, key: null, scope: "read", kind: null, name: null, email: null,
  roles: [], grants: [], login: false };

// onUnauthorized is called when the server refuses the key (set by app.js).
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export const storedKey = () => sessionStorage.getItem(KEY);
export const storeKey = (k) => sessionStorage.setItem(KEY, k);
export const forgetKey = () => sessionStorage.removeItem(KEY);
export const canWrite = () => session.scope === "write";

// globMatch reads a queue glob as the server does: '*' any run of
// characters, '?' one, everything else itself.
function globMatch(glob, s) {
  const re = glob.replace(/[.+^${}()|[\]\\-]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${re}$`).test(s);
}

// can says whether the caller's grants allow action on queue (any queue
// when queue is undefined): what the console offers; the server decides.
export function can(action, queue) {
  if (!session.auth) return true;
  return (session.grants || []).some((g) => (g.actions.includes(action) || g.actions.includes("admin")) &&
    (queue === undefined || g.queues.some((q) => globMatch(q, queue))));
}

export class APIError extends Error {
  constructor(message, status, details) {
    super(message);
    this.status = status;
    this.details = details || {};
  }
}

function headers(extra = {}) {
  const h = { ...extra };
  const key = storedKey();
  if (session.auth && key) h.Authorization = "Bearer " + key;
  return h;
}

// api calls the API and returns its JSON; a non-2xx answer throws an APIError
// carrying the API's message and details. Every write says
// Content-Type: application/json, with a body or without one: the API
// refuses writes without it (an HTML form on another site cannot send it).
export async function api(path, options = {}) {
  return (await apiExact(path, options)).data;
}

// apiExact is api returning { data, text }: the answer's JSON and its text,
// from which a page reads a producer's JSON with lib/json.js, digits kept.
// json is a body already written as JSON text (for one that carries a
// value as the operator typed it: JSON.stringify would round its numbers).
export async function apiExact(path, { method = "GET", body, json, signal } = {}) {
  const write = method !== "GET" && method !== "HEAD";
  const resp = await fetch(path, {
    method, signal,
    headers: headers(write ? { "Content-Type": "application/json" } : {}),
    body: json ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  refused(resp, data);
  return { data, text };
}

// withRaw writes obj as JSON text with one more member, key, whose value is
// the JSON text raw as it is (a payload as typed, its numbers as written).
export function withRaw(obj, key, raw) {
  const rest = JSON.stringify(obj);
  return `{${JSON.stringify(key)}:${raw}${rest === "{}" ? "}" : "," + rest.slice(1)}`;
}

// apiText GETs path as api does, and returns the answer's text with its
// JSON: { data, text }. A page showing a producer's JSON (an error's
// details, a record's meta) reads it from the text with lib/json.js, as
// JSON.parse loses the digits of numbers past 2^53 and of long decimals.
export async function apiText(path, { signal } = {}) {
  const resp = await fetch(path, { signal, headers: headers() });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  refused(resp, data);
  return { data, text };
}

// apiBytes GETs bytes from the API (a record's raw key or value), with the
// key as every call sends it (a plain link could not carry it), and returns
// them as a Blob with the file name the answer's Content-Disposition gives
// (null without one). Errors are thrown as api throws them.
export async function apiBytes(path, { signal } = {}) {
  const resp = await fetch(path, { signal, headers: headers() });
  if (!resp.ok) {
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    refused(resp, data);
  }
  return { blob: await resp.blob(), filename: filenameOf(resp.headers.get("Content-Disposition")) };
}

// refused throws for a non-2xx answer: a refused key goes back to the
// prompt; any other error carries the API's message and details.
function refused(resp, data) {
  if (resp.status === 401 && session.auth) {
    forgetKey();
    onUnauthorized(session.login ? "Your session has ended; log in again." : "That key was refused; enter another.");
    throw new APIError("unauthorized", 401);
  }
  if (!resp.ok) {
    const err = (data && data.error) || {};
    throw new APIError(err.message || `${resp.status} ${resp.statusText}`, resp.status, err.details);
  }
}

// filenameOf reads the file name of a Content-Disposition header (RFC 6266):
// filename* (RFC 8187, UTF-8 percent-encoded) before filename (quoted or a
// token), and never a directory part. null without a name.
export function filenameOf(header) {
  if (!header) return null;
  let name = null;
  const ext = /(?:^|;)\s*filename\*\s*=\s*([^;]*)/i.exec(header);
  if (ext) {
    const m = /^\s*utf-8'[^']*'(.*?)\s*$/i.exec(ext[1]);
    if (m) try { name = decodeURIComponent(m[1]); } catch { /* malformed: try filename */ }
  }
  if (name === null) {
    const m = /(?:^|;)\s*filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/i.exec(header);
    if (m) name = m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2];
  }
  name = name && name.split(/[\\/]/).pop().trim();
  return name || null;
}

// subscribe reads the event stream (Server-Sent Events) with fetch, so the
// key can go in a header (EventSource cannot send one), and calls onEvent
// with each parsed event. It reconnects after a pause until signal aborts.
//
// A hidden tab closes its stream and opens it again when shown: a browser
// keeps at most six connections to one HTTP/1.1 server, and a few background
// tabs holding streams would leave none for the pages' requests.
// onState reports "live" (connected, also after a reconnect: events may have
// been missed), "reconnecting" or "paused" (hidden).
export function subscribe(query, onEvent, signal, onState = () => {}) {
  const url = "/ojs/v1/events" + (query ? "?" + query : "");
  const run = async () => {
    while (!signal.aborted) {
      if (document.hidden) {
        onState("paused");
        await shown(signal);
        continue;
      }
      const conn = new AbortController();
      const close = () => conn.abort();
      const hide = () => { if (document.hidden) close(); };
      signal.addEventListener("abort", close);
      document.addEventListener("visibilitychange", hide);
      try {
        const resp = await fetch(url, { headers: headers(), signal: conn.signal });
        if (resp.status === 401) { forgetKey(); onUnauthorized(session.login ? "Your session has ended; log in again." : "That key was refused; enter another."); return; }
        if (!resp.ok || !resp.body) throw new Error(`event stream: ${resp.status}`);
        onState("live");
        await readEvents(resp.body, onEvent);
      } catch { /* closed, hidden or failed: the loop decides */ } finally {
        signal.removeEventListener("abort", close);
        document.removeEventListener("visibilitychange", hide);
      }
      if (signal.aborted || document.hidden) continue;
      onState("reconnecting");
      await new Promise((r) => setTimeout(r, 3000));
    }
  };
  run();
}

// shown resolves when the tab is visible again, or signal aborts.
function shown(signal) {
  return new Promise((resolve) => {
    const done = () => {
      if (document.hidden && !signal.aborted) return;
      document.removeEventListener("visibilitychange", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    document.addEventListener("visibilitychange", done);
    signal.addEventListener("abort", done);
  });
}

async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (!data) continue; // a comment: connected or heartbeat
      try { onEvent(JSON.parse(data)); } catch { /* not an event */ }
    }
  }
}

// readOnlyReason explains a disabled write control: for a person, which
// action their roles do not allow (on which queue).
export const readOnlyReason = (action, queue) => session.kind === "oidc"
  ? `Your roles${session.roles.length ? ` (${session.roles.join(", ")})` : ""} do not allow ${action || "changes"}${queue ? ` on ${queue}` : ""}.`
  : `Read-only key${session.key ? ` "${session.key}"` : ""}: changes need a key with the write scope.`;
