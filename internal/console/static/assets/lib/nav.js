// Navigation: the URL is the state. go changes it and asks the router to
// render; the router is installed once by app.js (this module has no
// dependencies, so every page can import it).

let router = () => {};

export function setRouter(fn) { router = fn; }

export function go(href, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  router();
}

// reload renders the current URL again.
export function reload() { router(); }
