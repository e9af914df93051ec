// How a record's bytes are shown: JSON as a collapsible tree, text as text,
// anything else as a hex dump.

import { el } from "./dom.js";

// valueView shows a record value (or its redelivery's) by its encoding.
export function valueView(value, encoding, payload) {
  if (value === null || value === undefined) return el("p", { class: "muted" }, "No value (a tombstone).");
  if (payload !== undefined) return el("div", { class: "jsontree", id: "value-tree" }, jsonTree(payload, 0));
  if (encoding === "base64") return el("pre", { class: "hex", "aria-label": "Value as hex" }, hexDump(value));
  return el("pre", { id: "value-text" }, value);
}

const AUTO_OPEN_DEPTH = 2;

// jsonTree renders a JSON value with objects and arrays as nested <details>,
// open to AUTO_OPEN_DEPTH levels.
export function jsonTree(v, depth) {
  if (v === null || typeof v !== "object") return el("span", { class: `json-${v === null ? "null" : typeof v}` }, JSON.stringify(v));
  const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
  const [open, close] = Array.isArray(v) ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) return el("span", {}, open + close);
  return el("details", { open: depth < AUTO_OPEN_DEPTH },
    el("summary", {}, `${open} ${entries.length} ${Array.isArray(v) ? "item" : "key"}${entries.length === 1 ? "" : "s"} ${close}`),
    el("ul", {}, entries.map(([k, x]) => el("li", {},
      el("span", { class: "json-key" }, Array.isArray(v) ? `${k}: ` : `${JSON.stringify(k)}: `), jsonTree(x, depth + 1)))));
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
