// Controls that change something. With a read-only key they are disabled and
// say why (title and an adjacent note for screen readers), so a read key
// sees what it could do without meeting a 403.

import { el } from "./dom.js";
import { canWrite, readOnlyReason } from "./api.js";

export function writeButton(label, onclick, attrs = {}) {
  if (canWrite()) return el("button", { type: "button", ...attrs, onclick }, label);
  return el("button", { type: "button", ...attrs, disabled: true, title: readOnlyReason(), "data-readonly": true }, label);
}

// confirmThen runs action after the browser's confirmation dialog.
export function confirmThen(question, action) {
  return () => { if (window.confirm(question)) action(); };
}
