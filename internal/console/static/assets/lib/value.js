// How a record's bytes are shown: JSON as a collapsible tree of the text as
// written (lib/json.js: no number passes through a JavaScript number), text
// as text, anything else as a hex dump.

import { el, fill, plural, sizeText, shortSize } from "./dom.js";
import { parse, keyOf } from "./json.js";

// TREE_DEPTH is the deepest level shown as a tree; what nests deeper is shown
// as its JSON text under a note (a tree of thousands of levels is unreadable,
// and slow to lay out).
export const TREE_DEPTH = 64;

// AUTO_OPEN_DEPTH is how many levels of a tree are open at first.
const AUTO_OPEN_DEPTH = 2;

// A JSON value of FOLD_BYTES or more, or of more than FOLD_NODES values,
// opens folded: its size first, the tree one level at a time as it is
// opened, the whole of it as raw text, a copy or a file.
export const FOLD_BYTES = 64 * 1024;
export const FOLD_NODES = 2000;

// A level of a lazy tree (a large value) is laid out LEVEL_CHUNK entries at
// a time, the rest behind "Show more": an array of 15,000 rows laid out at
// once took 2 s on a quiet two-core machine and 16 s on a busy one.
export const LEVEL_CHUNK = 500;

// From VIEW_ON_DEMAND bytes on, a value is laid out only when asked (a tree
// or text of megabytes is slow to lay out and no use to read in a page).
export const VIEW_ON_DEMAND = 1024 * 1024;

// HEX_LIMIT is how many bytes the hex dump shows.
export const HEX_LIMIT = 4096;

// valueKind says what a record's value is, checking a UTF-8 one as JSON
// (without building anything): { kind: "none" | "binary" | "text" | "json",
// nodes, depth, error } (nodes and depth for JSON only).
export function valueKind(value, encoding) {
  if (value === null || value === undefined) return { kind: "none" };
  if (encoding === "base64") return { kind: "binary" };
  if (value.trim() === "") return { kind: "text" };
  try {
    const { nodes, depth } = parse(value, { build: false });
    return { kind: "json", nodes, depth };
  } catch { return { kind: "text" }; }
}

// valuePanel shows a record's value with its tools: Tree and Raw (JSON),
// Copy (the text as stored, or a binary value's base64) and Download (the
// bytes as stored, through download). A value of VIEW_ON_DEMAND bytes or
// more (but binary: its hex dump is short) is laid out only when asked.
export function valuePanel(r, kind, download, payloadText) {
  if (kind.kind === "none") return el("p", { class: "muted", id: "value-none" }, "No value (a tombstone).");
  if (r.value_schema && payloadText) return decodedPanel(r, download, payloadText);
  const note = decodeNote(r);
  if (note) return [note, valuePanel({ ...r, decode_error: null, decode_pending: false }, kind, download)];
  const size = r.value_size ?? 0;
  const view = el("div", { id: "value-view" });
  const raw = el("pre", { id: "value-raw", class: "raw", hidden: true, "aria-label": "The value as stored" });
  const copied = el("span", { id: "value-copy-status", class: "status", role: "status" });
  const asTree = el("button", { type: "button", id: "value-as-tree", class: "secondary", "aria-pressed": "true" }, "Tree");
  const asRaw = el("button", { type: "button", id: "value-as-raw", class: "secondary", "aria-pressed": "false" }, "Raw");
  const show = (rawShown) => {
    if (rawShown && !raw.firstChild) fill(raw, r.value);
    raw.hidden = !rawShown;
    view.hidden = rawShown;
    asTree.setAttribute("aria-pressed", String(!rawShown));
    asRaw.setAttribute("aria-pressed", String(rawShown));
  };
  asTree.addEventListener("click", () => show(false));
  asRaw.addEventListener("click", () => show(true));
  const copy = async () => {
    copied.className = "status";
    try {
      await copyText(r.value);
      copied.className = "status ok";
      copied.textContent = `Copied ${kind.kind === "binary" ? "the base64 of the value" : "the value"} (${shortSize(kind.kind === "binary" ? r.value.length : size)}).`;
    } catch (e) {
      copied.className = "status error";
      copied.textContent = `Not copied: ${e.message}. Use Download, or select the raw text.`;
    }
  };
  const tools = el("div", { class: "valuebar", role: "toolbar", "aria-label": "Value" },
    kind.kind === "json" ? el("span", { class: "toggle", role: "group", "aria-label": "Show the value as" }, asTree, asRaw) : null,
    el("button", { type: "button", id: "value-copy", class: "secondary", onclick: copy,
      title: kind.kind === "binary" ? "Copy the value's base64 to the clipboard" : "Copy the value as stored to the clipboard" },
    kind.kind === "binary" ? "Copy base64" : "Copy"),
    el("button", { type: "button", id: "download-value", class: "secondary", onclick: download,
      title: `The value as stored, ${sizeText(size)}, as a file` }, "Download"),
    copied);
  const layOut = () => fill(view, valueView(r.value, kind, size));
  if (kind.kind === "binary" || size < VIEW_ON_DEMAND) layOut();
  else {
    fill(view, el("p", { class: "muted" }, "Not laid out here, to keep the page quick: download it to read it. ",
      el("button", { type: "button", id: "value-show", class: "secondary", onclick: layOut }, "Show it here anyway")));
  }
  return [tools, view, raw];
}

// schemaText names the Schema Registry schema a value or key was decoded
// with: its id, type, subject and Protobuf message.
export function schemaText(ref) {
  return [`schema ${ref.registry_id}`, ref.type, ref.subject ? `subject ${ref.subject}` : null, ref.message ? `message ${ref.message}` : null]
    .filter(Boolean).join(" · ");
}

// decodeNote says why a value in the wire format is shown raw (null for
// others): its schema is being fetched, or it could not be decoded.
function decodeNote(r) {
  if (r.decode_pending) return el("p", { class: "muted", id: "value-decode-pending" }, "Schema Registry value: waiting for its schema from the registry; it is shown decoded once fetched.");
  if (r.decode_error) return el("p", { class: "callout", id: "value-decode-error" }, `Not decoded: ${r.decode_error}`);
  return null;
}

// decodedPanel shows a value decoded from the Schema Registry wire format:
// the schema it was decoded with, its JSON as a tree, and the bytes as
// received as hex (Hex), which a plain retry produces.
function decodedPanel(r, download, payloadText) {
  const view = el("div", { id: "value-view" });
  const hex = el("pre", { class: "hex", id: "value-hex", hidden: true, "aria-label": "The value's bytes as hex" });
  const asTree = el("button", { type: "button", id: "value-as-tree", class: "secondary", "aria-pressed": "true" }, "Decoded");
  const asHex = el("button", { type: "button", id: "value-as-hex", class: "secondary", "aria-pressed": "false" }, "Hex");
  const show = (hexShown) => {
    if (hexShown && !hex.firstChild) fill(hex, hexDump(r.value));
    hex.hidden = !hexShown;
    view.hidden = hexShown;
    asTree.setAttribute("aria-pressed", String(!hexShown));
    asHex.setAttribute("aria-pressed", String(hexShown));
  };
  asTree.addEventListener("click", () => show(false));
  asHex.addEventListener("click", () => show(true));
  const size = r.value_size ?? 0;
  const tools = el("div", { class: "valuebar", role: "toolbar", "aria-label": "Value" },
    el("span", { class: "toggle", role: "group", "aria-label": "Show the value as" }, asTree, asHex),
    el("button", { type: "button", id: "download-value", class: "secondary", onclick: download,
      title: `The value's bytes as received, ${sizeText(size)}, as a file` }, "Download"),
    el("span", { class: "schema", id: "value-schema", title: "Decoded from the Schema Registry wire format" }, schemaText(r.value_schema)));
  fill(view, valueView(payloadText, { kind: "json" }, payloadText.length));
  return [tools, view, hex];
}

// valueView lays out a value of the given kind (valueKind).
export function valueView(value, kind, size = value.length) {
  if (kind.kind === "binary") return el("pre", { class: "hex", id: "value-hex", "aria-label": "Value as hex" }, hexDump(value));
  if (kind.kind !== "json") return el("pre", { id: "value-text", class: "raw" }, value);
  const doc = parse(value, { maxDepth: TREE_DEPTH });
  const folded = size >= FOLD_BYTES || doc.nodes > FOLD_NODES;
  return [
    folded ? el("p", { class: "muted", id: "value-folded" },
      `A large value (${shortSize(size)}, ${plural(doc.nodes, "JSON value")}): it opens folded, and each level is laid out as you open it. Raw shows it whole as stored.`) : null,
    doc.depth > TREE_DEPTH ? el("p", { class: "muted", id: "value-deep" },
      `This value nests ${doc.depth.toLocaleString("en")} levels deep: the tree shows ${TREE_DEPTH} levels and what lies deeper as its text. Raw shows it whole.`) : null,
    el("div", { class: "jsontree", id: "value-tree" }, jsonTree(doc, { open: folded ? 0 : AUTO_OPEN_DEPTH, lazy: folded })),
  ];
}

// jsonTree renders a parsed JSON text (lib/json.js parse, with maxDepth
// TREE_DEPTH) with objects and arrays as <details>, open to opts.open
// levels, numbers as written. A lazy tree lays out a level only as it is
// opened (a large value); else the closed levels are laid out too, so the
// browser's find in page finds what they hold. Strings
// and keys are shown as written (strings: "source", for a producer's
// bytes), with what they decode to on hover when they hold escapes, or
// decoded (strings: "decoded", for JSON the API wrote, which escapes <, >
// and &). It works from an explicit list, not by recursion.
export function jsonTree(doc, { open = AUTO_OPEN_DEPTH, strings = "source", lazy = false } = {}) {
  const { src } = doc;
  const work = [];
  const token = (text, cls) => {
    if (text.indexOf("\\") === -1) return el("span", { class: cls }, text);
    const decoded = keyOf(text);
    if (strings === "decoded") return el("span", { class: cls }, JSON.stringify(decoded));
    return el("span", { class: cls, title: `${decoded}` }, text);
  };
  // make lays out a node, after label (its key or index, or nothing): in
  // an object's or array's summary, so what it holds is indented under it.
  const make = (node, depth, label = null) => {
    switch (node.type) {
      case "string": return [label, token(node.text, "json-string")];
      case "number": return [label, el("span", { class: "json-number" }, node.text)];
      case "true": case "false": return [label, el("span", { class: "json-boolean" }, node.text)];
      case "null": return [label, el("span", { class: "json-null" }, "null")];
      case "folded": return [label, el("div", { class: "json-deep" },
        el("p", { class: "muted" }, `Nested deeper than ${TREE_DEPTH} levels: the rest is shown as text.`),
        el("pre", {}, src.slice(node.start, node.end)))];
    }
    const obj = node.type === "object";
    const n = obj ? node.entries.length : node.items.length;
    if (n === 0) return [label, el("span", {}, obj ? "{}" : "[]")];
    const [o, c] = obj ? ["{", "}"] : ["[", "]"];
    const summary = el("summary", {}, label, el("span", { class: "json-count" }, `${o} ${plural(n, obj ? "key" : "item")} ${c}`));
    if (depth === 0 && open === 0) summary.append(el("span", { class: "muted" }, ` ${shortSize(node.end - node.start)}`));
    const details = el("details", {}, summary);
    let filled = false;
    details.addEventListener("toggle", () => {
      if (!details.open || filled) return;
      filled = true;
      work.push([details, node, depth]);
      drain();
    });
    if (depth < open || !lazy) {
      details.open = depth < open;
      filled = true;
      work.push([details, node, depth]);
    }
    return details;
  };
  // entries appends the entries [from, to) of node to ul.
  const entries = (ul, node, depth, from, to) => {
    const obj = node.type === "object";
    const kids = obj ? node.entries : node.items;
    for (let k = from; k < to; k++) {
      const label = el("span", { class: "json-label" }, obj ? token(kids[k][0], "json-key") : el("span", { class: "json-key" }, String(k)), ": ");
      ul.append(el("li", {}, make(obj ? kids[k][1] : kids[k], depth + 1, label)));
    }
  };
  // more lays out the next LEVEL_CHUNK entries of node from from, and a
  // button for the rest while there is a rest.
  const more = (ul, node, depth, from) => {
    const n = node.type === "object" ? node.entries.length : node.items.length;
    const to = Math.min(n, from + LEVEL_CHUNK);
    entries(ul, node, depth, from, to);
    if (to === n) return;
    const button = el("button", { type: "button", class: "link json-more" },
      `Show ${Math.min(LEVEL_CHUNK, n - to).toLocaleString("en")} more (${to.toLocaleString("en")} of ${n.toLocaleString("en")} shown)`);
    const li = el("li", {}, button);
    button.addEventListener("click", () => {
      li.remove();
      more(ul, node, depth, to);
      drain();
    });
    ul.append(li);
  };
  const drain = () => {
    while (work.length) {
      const [details, node, depth] = work.pop();
      const ul = el("ul", {});
      if (lazy) more(ul, node, depth, 0);
      else entries(ul, node, depth, 0, node.type === "object" ? node.entries.length : node.items.length);
      details.append(ul);
    }
  };
  const top = make(doc.root, 0);
  drain();
  return top;
}

// copyText puts text on the clipboard: with the Clipboard API where the
// page may use it (HTTPS or localhost), else through a selected textarea.
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = el("textarea", { class: "copybuf", readonly: true, "aria-hidden": "true" }, text);
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("the browser refused");
}

// hexDump shows base64 bytes as offset, hex and printable ASCII, 16 a line,
// decoding only the bytes it shows.
export function hexDump(b64) {
  let bin;
  try { bin = atob(b64.slice(0, Math.ceil(HEX_LIMIT / 3) * 4)); } catch { return b64; }
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  const total = Math.floor(b64.length * 3 / 4) - pad;
  const lines = [];
  for (let off = 0; off < Math.min(bin.length, HEX_LIMIT); off += 16) {
    const chunk = [...bin.slice(off, off + 16)].map((c) => c.charCodeAt(0));
    const hex = chunk.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = chunk.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (total > HEX_LIMIT) lines.push(`… ${(total - HEX_LIMIT).toLocaleString("en")} more bytes`);
  return lines.join("\n");
}

// smallJSON is a tree of JSON the API wrote (an error's details, a
// record's meta), its numbers as written.
export function smallJSON(doc, attrs = {}) {
  return el("div", { class: "jsontree", ...attrs }, jsonTree(doc, { strings: "decoded" }));
}
