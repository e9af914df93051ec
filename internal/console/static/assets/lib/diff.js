// A line diff (longest common subsequence) for the retry-with-edit review.
// Values are small; past MAX_LINES a side is shown whole instead.

import { el } from "./dom.js";

const MAX_LINES = 800;

// lineDiff returns [op, line] pairs: op is " " (kept), "-" (removed) or "+" (added).
export function lineDiff(before, after) {
  const a = before.split("\n"), b = after.split("\n");
  if (a.length > MAX_LINES || b.length > MAX_LINES) {
    return [...a.map((l) => ["-", l]), ...b.map((l) => ["+", l])];
  }
  const n = a.length, m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

export function diffView(before, after) {
  return el("pre", { class: "diff", "aria-label": "Changes to the value" },
    lineDiff(before, after).map(([op, line]) => el("span", { class: op === "+" ? "add" : op === "-" ? "del" : "" }, `${op} ${line}\n`)));
}
