// JSON read exactly as written. A record's value is the producer's bytes:
// JSON.parse would turn 9007199254740993 into 9007199254740992, 10.10 into
// 10.1 and 1e400 into Infinity, and keep only the last of two equal keys.
// parse keeps every number and string token as its source text, every key
// of an object in order (duplicates too), and where each value starts and
// ends in the text, so a part of it can be shown or sent byte for byte.
//
// It works from an explicit stack, not by recursion: a value may nest
// thousands of levels deep, and the browser's own recursion gives out far
// sooner.

// A node is one JSON value:
//   { type: "object", start, end, entries: [[keyToken, node], …] }
//   { type: "array",  start, end, items: [node, …] }
//   { type: "string" | "number" | "true" | "false" | "null", start, end, text }
//   { type: "folded", start, end, open: "{" | "[" }  an object or array at
//     maxDepth or deeper, checked but not built: src.slice(start, end) is it.
// start and end are offsets in the parsed text (end exclusive); text is the
// token as written (a string's with its quotes and escapes).

// JSONTextError is a syntax error with where it is.
export class JSONTextError extends SyntaxError {
  constructor(reason, src, pos) {
    const { line, column } = lineColumn(src, pos);
    super(`${reason} at line ${line}, column ${column}`);
    this.reason = reason;
    this.pos = pos;
    this.line = line;
    this.column = column;
  }
}

function lineColumn(src, pos) {
  let line = 1, from = 0;
  for (let i = src.indexOf("\n"); i !== -1 && i < pos; i = src.indexOf("\n", i + 1)) {
    line++;
    from = i + 1;
  }
  return { line, column: pos - from + 1 };
}

const isWS = (c) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c) => c >= 0x30 && c <= 0x39;
const isHex = (c) => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

// describe names the character at pos for an error message.
function describe(src, pos) {
  if (pos >= src.length) return "the end of the text";
  const ch = String.fromCodePoint(src.codePointAt(pos));
  return ch.charCodeAt(0) < 0x20 ? `character U+${ch.charCodeAt(0).toString(16).padStart(4, "0").toUpperCase()}` : JSON.stringify(ch);
}

// parse reads src as one JSON value (whitespace around it allowed) and
// returns { src, root, nodes, depth }: nodes counts every value, depth is
// how many objects and arrays nest at the deepest point (a scalar is 0,
// [1] is 1). Objects and arrays nested maxDepth deep or deeper are folded
// (checked and counted, not built); build: false builds nothing, to check
// a text. It throws a JSONTextError for text that is not JSON.
export function parse(src, { maxDepth = Infinity, build = true } = {}) {
  const n = src.length;
  let i = 0;
  let nodes = 0, depth = 0;
  let root = null;
  // One frame per open object or array: its node (null when not built),
  // its closing character, and the key waiting for its value.
  const stack = [];
  const fail = (why, at = i) => { throw new JSONTextError(why, src, at); };
  const ws = () => { while (i < n && isWS(src.charCodeAt(i))) i++; };

  // string reads the string token at i (a quote) and returns its end.
  const string = () => {
    const start = i;
    i++;
    for (;;) {
      if (i >= n) fail("unterminated string", start);
      const c = src.charCodeAt(i);
      if (c === 0x22) return ++i;
      if (c === 0x5c) {
        const e = src.charCodeAt(i + 1);
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) if (!isHex(src.charCodeAt(i + k))) fail("bad \\u escape: four hex digits expected", i);
          i += 6;
        } else if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
          i += 2;
        } else fail(`bad escape \\${i + 1 < n ? src[i + 1] : ""}`, i);
      } else if (c < 0x20) {
        fail(`${describe(src, i)} in a string (control characters must be escaped)`);
      } else i++;
    }
  };

  // number reads the number token at i and returns its end.
  const number = () => {
    const start = i;
    if (src.charCodeAt(i) === 0x2d) i++;
    const c = src.charCodeAt(i);
    if (c === 0x30) i++;
    else if (isDigit(c)) while (isDigit(src.charCodeAt(i))) i++;
    else fail(`unexpected ${describe(src, start)}`, start);
    if (src.charCodeAt(i) === 0x2e) {
      i++;
      if (!isDigit(src.charCodeAt(i))) fail("a digit expected after the decimal point");
      while (isDigit(src.charCodeAt(i))) i++;
    }
    const e = src.charCodeAt(i);
    if (e === 0x65 || e === 0x45) {
      i++;
      const s = src.charCodeAt(i);
      if (s === 0x2b || s === 0x2d) i++;
      if (!isDigit(src.charCodeAt(i))) fail("a digit expected in the exponent");
      while (isDigit(src.charCodeAt(i))) i++;
    }
    return i;
  };

  // attach adds a finished value to the open container, or makes it the root.
  const attach = (node) => {
    const top = stack[stack.length - 1];
    if (!top) { root = node; return; }
    if (!top.node) return;
    if (top.close === 0x7d) top.node.entries.push([top.key, node]);
    else top.node.items.push(node);
  };

  // key reads an object's key and its colon, leaving i at the value.
  const key = (top) => {
    if (src.charCodeAt(i) !== 0x22) fail(`a key (a string in double quotes) expected, not ${describe(src, i)}`);
    const start = i;
    string();
    if (top.node) top.key = src.slice(start, i);
    ws();
    if (src.charCodeAt(i) !== 0x3a) fail(`":" expected after the key, not ${describe(src, i)}`);
    i++;
    ws();
  };

  ws();
  for (;;) {
    // A value starts at i.
    if (i >= n) fail(stack.length ? "the text ends inside a value" : "no value: the text is empty");
    const c = src.charCodeAt(i);
    const start = i;
    nodes++;
    if (c === 0x7b || c === 0x5b) {
      const d = stack.length + 1;
      if (d > depth) depth = d;
      const parentBuilt = stack.length === 0 || !!stack[stack.length - 1].node;
      let node = null;
      if (build && parentBuilt) {
        node = stack.length >= maxDepth ? { type: "folded", start, end: -1, open: src[i] }
          : c === 0x7b ? { type: "object", start, end: -1, entries: [] } : { type: "array", start, end: -1, items: [] };
      }
      const frame = { node: node && node.type !== "folded" ? node : null, folded: node && node.type === "folded" ? node : null, close: c === 0x7b ? 0x7d : 0x5d, key: null, count: 0 };
      stack.push(frame);
      i++;
      ws();
      if (src.charCodeAt(i) === frame.close) {
        // {} or []: closed below.
      } else {
        if (frame.close === 0x7d) key(frame);
        continue;
      }
    } else {
      let end;
      let type;
      if (c === 0x22) { end = string(); type = "string"; }
      else if (c === 0x2d || isDigit(c)) { end = number(); type = "number"; }
      else if (src.startsWith("true", i)) { end = i += 4; type = "true"; }
      else if (src.startsWith("false", i)) { end = i += 5; type = "false"; }
      else if (src.startsWith("null", i)) { end = i += 4; type = "null"; }
      else fail(`unexpected ${describe(src, i)}: a value expected`);
      if (build && (stack.length === 0 || stack[stack.length - 1].node)) attach({ type, start, end, text: src.slice(start, end) });
    }
    // A value ended before i: a comma, a closing bracket or the end follows.
    for (;;) {
      ws();
      const top = stack[stack.length - 1];
      if (!top) {
        if (i < n) fail(`unexpected ${describe(src, i)} after the value`);
        return { src, root, nodes, depth };
      }
      const d = src.charCodeAt(i);
      if (d === top.close && (top.count > 0 || src.charCodeAt(i) === top.close)) {
        i++;
        stack.pop();
        const node = top.node || top.folded;
        if (node) { node.end = i; attach(node); }
        continue;
      }
      if (d === 0x2c) {
        i++;
        ws();
        top.count++;
        if (top.close === 0x7d) key(top);
        break;
      }
      fail(i >= n ? `the text ends inside ${top.close === 0x7d ? "an object" : "an array"}`
        : `"," or "${String.fromCharCode(top.close)}" expected, not ${describe(src, i)}`);
    }
  }
}

// check says whether src is JSON: null when it is, else the error.
export function check(src) {
  try { parse(src, { build: false }); return null; } catch (e) {
    if (e instanceof JSONTextError) return e;
    throw e;
  }
}

// keyOf decodes a key token ("caf\u00e9" is café). A string holds no
// number, so JSON.parse loses nothing here.
export const keyOf = (token) => (token.indexOf("\\") === -1 ? token.slice(1, -1) : JSON.parse(token));

// member is the value of key in an object node (the last, if the key
// repeats, as JSON.parse would take it), or undefined.
export function member(node, key) {
  if (!node || node.type !== "object") return undefined;
  for (let k = node.entries.length - 1; k >= 0; k--) {
    if (keyOf(node.entries[k][0]) === key) return node.entries[k][1];
  }
  return undefined;
}

// scalarText shows a scalar node: a string decoded, a number as written.
export function scalarText(node) {
  if (!node) return "";
  if (node.type === "string") return keyOf(node.text);
  return node.text ?? "";
}

// isEmpty says a node is {} or [] (or missing, or null).
export function isEmpty(node) {
  return !node || node.type === "null" || (node.type === "object" && node.entries.length === 0) || (node.type === "array" && node.items.length === 0);
}

// PRETTY_DEPTH is the deepest value indented by pretty; deeper ones are
// shown compact (an indented line per level would hold thousands of spaces).
export const PRETTY_DEPTH = 64;

// pretty indents a parsed JSON text by two spaces, every token as written
// (numbers, strings and keys keep their source text), without recursion. A
// text nested deeper than PRETTY_DEPTH, and what is folded, is kept as written.
export function pretty(doc) {
  const { src, root } = doc;
  if (!root || doc.depth > PRETTY_DEPTH) return src.trim();
  const out = [];
  const pad = (d) => "\n" + "  ".repeat(d);
  // work holds [node, depth] to write, and strings to write as they are.
  const work = [[root, 0]];
  while (work.length) {
    const w = work.pop();
    if (typeof w === "string") { out.push(w); continue; }
    const [node, d] = w;
    if (node.type === "object" || node.type === "array") {
      const obj = node.type === "object";
      const kids = obj ? node.entries : node.items;
      if (kids.length === 0) { out.push(obj ? "{}" : "[]"); continue; }
      out.push(obj ? "{" : "[");
      work.push(pad(d) + (obj ? "}" : "]"));
      for (let k = kids.length - 1; k >= 0; k--) {
        const [prefix, child] = obj ? [kids[k][0] + ": ", kids[k][1]] : ["", kids[k]];
        work.push([child, d + 1]);
        work.push((k > 0 ? "," : "") + pad(d + 1) + prefix);
      }
      continue;
    }
    out.push(node.type === "folded" ? src.slice(node.start, node.end) : node.text);
  }
  return out.join("");
}
