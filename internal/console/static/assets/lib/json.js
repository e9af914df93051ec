// JSON text from parsed values, without recursion: a record's value may nest
// as deep as the API lets it (10,000 levels), and the browser's own
// JSON.stringify recurses, running out of stack far sooner.

// PRETTY_DEPTH is the deepest value shown indented; deeper ones are shown
// compact (an indented line per level would hold thousands of spaces).
export const PRETTY_DEPTH = 64;

// depthOf returns how deeply v nests (a scalar is 0, [1] is 1), counting no
// further than limit + 1.
export function depthOf(v, limit = Infinity) {
  let max = 0;
  const stack = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop();
    if (x === null || typeof x !== "object") continue;
    if (d + 1 > max) max = d + 1;
    if (max > limit) return max;
    for (const c of Array.isArray(x) ? x : Object.values(x)) {
      if (c !== null && typeof c === "object") stack.push([c, d + 1]);
    }
  }
  return max;
}

// stringify is JSON.stringify(v, null, indent) without recursion.
export function stringify(v, indent = 0) {
  const out = [];
  const stack = [];
  const pad = (depth) => (indent ? "\n" + " ".repeat(indent * depth) : "");
  const write = (x, depth) => {
    if (x === null || typeof x !== "object") {
      out.push(JSON.stringify(x) ?? "null");
      return;
    }
    const isArray = Array.isArray(x);
    const keys = isArray ? null : Object.keys(x);
    const n = isArray ? x.length : keys.length;
    if (n === 0) {
      out.push(isArray ? "[]" : "{}");
      return;
    }
    out.push(isArray ? "[" : "{");
    stack.push({ x, keys, n, i: 0, depth: depth + 1 });
  };
  write(v, 0);
  while (stack.length) {
    const f = stack[stack.length - 1];
    if (f.i === f.n) {
      stack.pop();
      out.push(pad(f.depth - 1) + (f.keys ? "}" : "]"));
      continue;
    }
    out.push((f.i > 0 ? "," : "") + pad(f.depth));
    let child;
    if (f.keys) {
      const k = f.keys[f.i];
      out.push(JSON.stringify(k) + (indent ? ": " : ":"));
      child = f.x[k];
    } else {
      child = f.x[f.i];
    }
    f.i++;
    write(child, f.depth);
  }
  return out.join("");
}

// pretty shows v indented by two spaces, or compact past PRETTY_DEPTH.
export function pretty(v) {
  return depthOf(v, PRETTY_DEPTH) > PRETTY_DEPTH ? stringify(v) : stringify(v, 2);
}
