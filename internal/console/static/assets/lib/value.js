// How a record's bytes are shown: JSON as a collapsible tree, text as text,
// anything else as a hex dump.

import { el } from "./dom.js";
import { depthOf, stringify } from "./json.js";

// valueView shows a record value (or its redelivery's) by its encoding.
export function valueView(value, encoding, payload) {
  if (value === null || value === undefined) return el("p", { class: "muted" }, "No value (a tombstone).");
  if (payload !== undefined) {
    if (depthOf(payload, TREE_DEPTH) <= TREE_DEPTH) return el("div", { class: "jsontree", id: "value-tree" }, jsonTree(payload));
    return [
      el("p", { class: "muted", id: "value-deep" }, `This value nests more than ${TREE_DEPTH} levels deep: the tree shows ${TREE_DEPTH} levels and what lies deeper as text, and the whole value is below it as text.`),
      el("div", { class: "jsontree", id: "value-tree" }, jsonTree(payload)),
      el("details", { class: "json-whole" }, el("summary", {}, "The whole value as text"), el("pre", { id: "value-text" }, stringify(payload))),
    ];
  }
  if (encoding === "base64") return el("pre", { class: "hex", "aria-label": "Value as hex" }, hexDump(value));
  return el("pre", { id: "value-text" }, value);
}

const AUTO_OPEN_DEPTH = 2;

// TREE_DEPTH is the deepest level shown as a tree; what nests deeper is shown
// as JSON text under a note (a tree of thousands of levels is unreadable,
// and slow to lay out).
export const TREE_DEPTH = 64;

// jsonTree renders a JSON value with objects and arrays as nested <details>,
// open to AUTO_OPEN_DEPTH levels, and as text past TREE_DEPTH. It works
// from an explicit stack, not by recursion: a value may nest 10,000 deep.
export function jsonTree(v) {
  const top = el("div", {});
  const work = [[top, v, 0]];
  while (work.length) {
    const [into, x, depth] = work.pop();
    if (x === null || typeof x !== "object") {
      into.append(el("span", { class: `json-${x === null ? "null" : typeof x}` }, JSON.stringify(x)));
      continue;
    }
    const isArray = Array.isArray(x);
    const keys = isArray ? null : Object.keys(x);
    const n = isArray ? x.length : keys.length;
    const [open, close] = isArray ? ["[", "]"] : ["{", "}"];
    if (n === 0) {
      into.append(el("span", {}, open + close));
      continue;
    }
    if (depth >= TREE_DEPTH) {
      into.append(el("div", { class: "json-deep" },
        el("p", { class: "muted" }, `Nested deeper than ${TREE_DEPTH} levels: the rest is shown as text.`),
        el("pre", {}, stringify(x))));
      continue;
    }
    const ul = el("ul", {});
    for (let i = 0; i < n; i++) {
      const k = isArray ? i : keys[i];
      const li = el("li", {}, el("span", { class: "json-key" }, isArray ? `${k}: ` : `${JSON.stringify(k)}: `));
      ul.append(li);
      work.push([li, x[k], depth + 1]);
    }
    into.append(el("details", { open: depth < AUTO_OPEN_DEPTH },
      el("summary", {}, `${open} ${n} ${isArray ? "item" : "key"}${n === 1 ? "" : "s"} ${close}`), ul));
  }
  return top.firstChild;
}

const HEX_LIMIT = 4096;

// hexDump shows base64 bytes as offset, hex and printable ASCII, 16 a line.
export function hexDump(b64) {
  let bin;
  try { bin = atob(b64); } catch { return b64; }
  const lines = [];
  for (let off = 0; off < Math.min(bin.length, HEX_LIMIT); off += 16) {
    const chunk = [...bin.slice(off, off + 16)].map((c) => c.charCodeAt(0));
    const hex = chunk.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = chunk.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bin.length > HEX_LIMIT) lines.push(`… ${bin.length - HEX_LIMIT} more bytes`);
  return lines.join("\n");
}
