// A small bar chart in SVG, with no dependency: failures per step of time,
// stacked by queue. The bars are an SVG stretched to the width (so they
// fill any window); the labels are HTML around it (so text never scales).
// Each bar says its time and counts on hover (an SVG <title>), and carries
// them as data attributes.

import { el, plural } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

// Colours for the stacked queues, then "other"; readable on white and told
// apart by people with the common colour blindnesses (Okabe–Ito).
const COLOURS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#8a8f98"];

function svg(tag, attrs = {}, ...children) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  for (const c of children) n.append(c);
  return n;
}

// bars builds the chart of an activity series (GET …/activity): one bar per
// point, its height the point's added, stacked by the series' queues (the
// rest as "other"). label says what is counted, for screen readers.
export function bars(series, { label = "Failures" } = {}) {
  const points = series.points || [];
  const queues = series.queues || [];
  const n = points.length;
  const top = Math.max(1, ...points.map((p) => p.added));
  const stepMs = durationMs(series.step);
  const total = points.reduce((s, p) => s + p.added, 0);
  const peak = points.reduce((best, p) => (p.added > best.added ? p : best), { added: 0 });

  const plot = svg("svg", { viewBox: `0 0 ${n} ${top}`, preserveAspectRatio: "none", class: "chart-bars",
    role: "img", "aria-label": `${label}: ${plural(total, "failure")}${peak.added ? `, at most ${peak.added} per ${stepWords(series.step)}` : ""}` });
  // A faint line at each quarter of the height.
  for (const f of [0.25, 0.5, 0.75, 1]) {
    plot.append(svg("line", { x1: 0, x2: n, y1: top * (1 - f), y2: top * (1 - f), class: "chart-grid", "vector-effect": "non-scaling-stroke" }));
  }
  points.forEach((p, i) => {
    if (!p.added) return;
    const parts = queues.map((q, k) => [q.name, q.points[i] || 0, COLOURS[k % (COLOURS.length - 1)]]).filter(([, v]) => v > 0);
    const other = p.added - parts.reduce((s, [, v]) => s + v, 0);
    if (other > 0) parts.push([queues.length ? "other" : "", other, queues.length ? COLOURS[COLOURS.length - 1] : COLOURS[0]]);
    const g = svg("g", { class: "chart-bar", "data-at": p.at, "data-added": String(p.added) },
      svg("title", {}, barTitle(p, stepMs, parts)));
    let y = top;
    for (const [name, v, colour] of parts) {
      y -= v;
      g.append(svg("rect", { x: i + 0.12, width: 0.76, y, height: v, fill: colour, "data-queue": name, "data-value": String(v) }));
    }
    plot.append(g);
  });

  const ticks = tickIndexes(points, stepMs);
  return el("div", { class: "chart" },
    el("div", { class: "chart-plot" },
      el("div", { class: "chart-y", "aria-hidden": "true" }, el("span", {}, String(top)), el("span", {}, "0")),
      el("div", { class: "chart-area" }, plot,
        el("div", { class: "chart-x", "aria-hidden": "true" }, ticks.map((i) =>
          styled(el("span", {}, tickLabel(points[i].at, stepMs)), "left", `${((i + 0.5) / n) * 100}%`))))),
    queues.length ? el("ul", { class: "chart-legend" }, legend(queues, points)) : null);
}

function legend(queues, points) {
  const shown = queues.reduce((s, q) => s + q.added, 0);
  const all = points.reduce((s, p) => s + p.added, 0);
  const items = queues.map((q, k) => el("li", {}, swatch(COLOURS[k % (COLOURS.length - 1)]), `${q.name} `,
    el("span", { class: "muted" }, q.added.toLocaleString("en"))));
  if (all > shown) {
    items.push(el("li", {}, swatch(COLOURS[COLOURS.length - 1]), "other ",
      el("span", { class: "muted" }, (all - shown).toLocaleString("en"))));
  }
  return items;
}

// styled sets one style property through the CSSOM: the Content-Security-
// Policy forbids style attributes, not this.
function styled(node, prop, value) {
  node.style.setProperty(prop, value);
  return node;
}

const swatch = (colour) => styled(el("i", {}), "background", colour);

function barTitle(p, stepMs, parts) {
  const from = new Date(Date.parse(p.at));
  const to = new Date(from.getTime() + stepMs);
  const head = `${timeText(from, stepMs)}–${timeText(to, stepMs)} UTC: ${plural(p.added, "failure")}`;
  const named = parts.filter(([name]) => name);
  return named.length ? `${head} (${named.map(([name, v]) => `${name} ${v}`).join(", ")})` : head;
}

// TICKS are the intervals a label may mark, the shortest first.
const TICKS = [1, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720, 1440, 2880, 10080].map((m) => m * 60e3);

// tickIndexes picks the points to label: those at a round time (every 15
// minutes, 4 hours, a day…), at most seven.
function tickIndexes(points, stepMs) {
  const n = points.length;
  if (n === 0) return [];
  const interval = TICKS.find((t) => t >= stepMs && t % stepMs === 0 && (n * stepMs) / t <= 7) || n * stepMs;
  const out = [];
  points.forEach((p, i) => { if (Date.parse(p.at) % interval === 0) out.push(i); });
  return out;
}

function tickLabel(iso, stepMs) { return timeText(new Date(Date.parse(iso)), stepMs); }

// timeText says a time in UTC: hh:mm within a day's steps, else the date too.
function timeText(d, stepMs) {
  const hm = d.toISOString().slice(11, 16);
  return stepMs >= 6 * 3600e3 ? `${d.toISOString().slice(5, 10)} ${hm}` : hm;
}

const DURATION = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;

// durationMs reads an ISO 8601 duration of days, hours, minutes, seconds.
export function durationMs(iso) {
  const m = DURATION.exec(iso || "");
  if (!m) return 60e3;
  return (((Number(m[1] || 0) * 24 + Number(m[2] || 0)) * 60 + Number(m[3] || 0)) * 60 + Number(m[4] || 0)) * 1e3;
}

function stepWords(iso) {
  const ms = durationMs(iso);
  if (ms === 60e3) return "minute";
  if (ms === 3600e3) return "hour";
  if (ms === 86400e3) return "day";
  return `${ms / 60e3} minutes`;
}
