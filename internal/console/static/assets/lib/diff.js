// A line diff (longest common subsequence) for the retry-with-edit review,
// of the texts as they are: the value as stored against the value as it
// will be sent. Lines both sides start and end with are kept out of the
// subsequence table, so a one-field edit of a long value costs little; past
// MAX_LINES changed lines a side the middle is shown whole instead. Within
// a changed line, the part that changed is marked, and long unchanged runs
// (of lines, or of a line's characters) are folded to their length.

import { el, plural } from "./dom.js";

const MAX_LINES = 800;

// CONTEXT is how many unchanged lines are shown around a change, and
// CONTEXT_CHARS how many unchanged characters around a change in a line.
const CONTEXT = 3;
const CONTEXT_CHARS = 60;

// lineDiff returns [op, line] pairs: op is " " (kept), "-" (removed) or "+" (added).
export function lineDiff(before, after) {
  const a = before.split("\n"), b = after.split("\n");
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const am = a.slice(head, a.length - tail), bm = b.slice(head, b.length - tail);
  const out = a.slice(0, head).map((l) => [" ", l]);
  if (am.length > MAX_LINES || bm.length > MAX_LINES) {
    out.push(...am.map((l) => ["-", l]), ...bm.map((l) => ["+", l]));
  } else {
    const n = am.length, m = bm.length;
    const lcs = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = am[i] === bm[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (am[i] === bm[j]) { out.push([" ", am[i]]); i++; j++; }
      else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", am[i++]]);
      else out.push(["+", bm[j++]]);
    }
    while (i < n) out.push(["-", am[i++]]);
    while (j < m) out.push(["+", bm[j++]]);
  }
  out.push(...a.slice(a.length - tail).map((l) => [" ", l]));
  return out;
}

// diffView shows the diff of before and after: changes with CONTEXT lines
// around them, and within a line removed and added in place of each other,
// the characters that differ marked.
export function diffView(before, after) {
  const ops = lineDiff(before, after);
  const lines = [];
  const near = ops.map(() => false);
  ops.forEach(([op], k) => {
    if (op === " ") return;
    for (let c = Math.max(0, k - CONTEXT); c <= Math.min(ops.length - 1, k + CONTEXT); c++) near[c] = true;
  });
  for (let k = 0; k < ops.length;) {
    if (!near[k]) {
      let e = k;
      while (e < ops.length && !near[e]) e++;
      lines.push(el("span", { class: "fold" }, `… ${plural(e - k, "unchanged line")}\n`));
      k = e;
      continue;
    }
    // A run of removed lines then as many added: each pair is one line changed.
    let d = k;
    while (d < ops.length && ops[d][0] === "-") d++;
    let p = d;
    while (p < ops.length && ops[p][0] === "+") p++;
    if (d > k && p - d === d - k) {
      const pairs = [];
      for (let q = 0; q < d - k; q++) pairs.push(changed(ops[k + q][1], ops[d + q][1]));
      lines.push(...pairs.map(([del]) => del), ...pairs.map(([, add]) => add));
      k = p;
      continue;
    }
    const [op, line] = ops[k++];
    lines.push(el("span", { class: op === "+" ? "add" : op === "-" ? "del" : "" }, `${op} ${line}\n`));
  }
  return el("pre", { class: "diff", "aria-label": "Changes to the value" }, lines);
}

// changed shows line a replaced by line b, their common start and end
// folded past CONTEXT_CHARS and the characters between them marked.
function changed(a, b) {
  let s = 0;
  while (s < a.length && s < b.length && a[s] === b[s]) s++;
  let e = 0;
  while (e < a.length - s && e < b.length - s && a[a.length - 1 - e] === b[b.length - 1 - e]) e++;
  // (Built for each side: an element lives in one place.)
  const start = () => (s > CONTEXT_CHARS ? [el("span", { class: "fold" }, `…${plural(s - CONTEXT_CHARS, "unchanged character")}… `), a.slice(s - CONTEXT_CHARS, s)] : [a.slice(0, s)]);
  const end = () => (e > CONTEXT_CHARS ? [a.slice(a.length - e, a.length - e + CONTEXT_CHARS), el("span", { class: "fold" }, ` …${plural(e - CONTEXT_CHARS, "unchanged character")}…`)] : [a.slice(a.length - e)]);
  const side = (op, x) => el("span", { class: op === "+" ? "add" : "del" }, `${op} `, start(),
    el("mark", {}, x.slice(s, x.length - e)), end(), "\n");
  return [side("-", a), side("+", b)];
}
