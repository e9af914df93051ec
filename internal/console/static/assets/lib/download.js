// Downloads of a record's key or value, byte for byte: GET
// /ojs/v1/dead-letter/{id}/raw with the caller's key (as every call of the
// console sends it), saved under the name the server's Content-Disposition
// gives it.

import { el } from "./dom.js";
import { apiBytes } from "./api.js";

// downloadPart fetches part ("value" or "key") of record id and has the
// browser save it; it resolves to the file's name and size.
export async function downloadPart(id, part, signal) {
  const { blob, filename } = await apiBytes(`/ojs/v1/dead-letter/${encodeURIComponent(id)}/raw?part=${part}`, { signal });
  const name = filename || `${id}.${part}`;
  save(blob, name);
  return { name, size: blob.size };
}

// save has the browser save blob as a file called name. The object URL
// lives a minute: long enough for the browser to read it, not for the page.
function save(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// exportPath is the export of the records a list's filter (query, as the
// API takes it) selects.
export const exportPath = (query) => `/ojs/v1/dead-letter/export${query.toString() ? "?" + query : ""}`;

// exportRecords fetches the export of query with the caller's key and has
// the browser save it; it resolves to the file's name, size and the
// trailer's count. An export without its trailer, or whose trailer says it
// is incomplete, is refused (nothing is saved): it was cut short.
export async function exportRecords(query, signal) {
  const { blob, filename } = await apiBytes(exportPath(query), { signal });
  const tail = await blob.slice(Math.max(0, blob.size - 65536)).text();
  const last = tail.trimEnd().split("\n").pop();
  let trailer = null;
  // The trailer is Redrive's own summary (complete, count, error), never a
  // record's value: JSON.parse is exact for it (a count is far below 2^53).
  // The records themselves are saved as the bytes the server sent.
  try { trailer = JSON.parse(last).export; } catch { /* no trailer */ }
  if (!trailer) throw new Error("the export was cut short (it has no trailer line); export again");
  if (!trailer.complete) throw new Error(`the export stopped after ${trailer.count} records (${trailer.error || "no reason given"}); export again`);
  const name = filename || "redrive-export.ndjson";
  save(blob, name);
  return { name, size: blob.size, count: trailer.count };
}
