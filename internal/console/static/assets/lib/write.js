// Controls that change something. With a read-only key they are disabled and
// say why (title and an adjacent note for screen readers), so a read key
// sees what it could do without meeting a 403.

import { el } from "./dom.js";
import { can, canWrite, readOnlyReason } from "./api.js";

// writeButton is a control that changes something. attrs.need, when given,
// is [action, queue]: the button is offered only when the caller's grants
// allow that action on that queue (a person's roles); otherwise the key's
// scope decides.
export function writeButton(label, onclick, { need, ...attrs } = {}) {
  const allowed = need ? can(need[0], need[1]) : canWrite();
  if (allowed) return el("button", { type: "button", ...attrs, onclick }, label);
  return el("button", { type: "button", ...attrs, disabled: true, title: need ? readOnlyReason(need[0], need[1]) : readOnlyReason(), "data-readonly": true }, label);
}

// confirmThen runs action after the browser's confirmation dialog.
export function confirmThen(question, action) {
  return () => { if (window.confirm(question)) action(); };
}
