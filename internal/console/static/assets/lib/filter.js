// The record filter's keys, as GET /ojs/v1/dead-letter/filter-keys serves
// them: the server's one key table (internal/filter), from which the record
// list builds its filter form and the bulk panel its JSON filter. Asked for
// once per page load.

import { api } from "./api.js";

let keys = null;

// filterKeys resolves to the key table: [{name, kind, repeatable, enum,
// sources, label, doc, example, …}], in the order a stored filter lists them.
export function filterKeys() {
  keys ||= api("/ojs/v1/dead-letter/filter-keys").then((r) => r.items, (e) => { keys = null; throw e; });
  return keys;
}

// choices are the values a key's form field offers, or null for free text:
// an enum's values, true and false for a boolean.
export function choices(k) {
  if (k.kind === "enum") return k.enum;
  if (k.kind === "bool") return ["true", "false"];
  return null;
}
