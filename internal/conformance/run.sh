#!/usr/bin/env bash
# Runs the official OJS conformance suite against Redrive (make conformance
# OJS_SUITE=dir; docs/conformance.md):
#
#   internal/conformance/run.sh SUITE_DIR [LIST]
#
# SUITE_DIR holds the suite's run.sh, its target.txt and ojs-conformance/
# (openjobspec/ojs-conformance) beside ojs-proto/; LIST (default: the
# suite's target.txt) the cases to run, relative to ojs-conformance/suites.
#
# 1. builds ./cmd/redrive, and copies the suite with the defective cases of
#    internal/conformance/corrections.json corrected (failing at once when a
#    correction no longer applies: the case changed upstream);
# 2. runs the suite as published: it passes only if the failing cases are
#    exactly the documented defects (a newly failing case fails, and so does
#    a documented one that passes);
# 3. runs the corrected copies of the defective cases: all must pass.
#
# Ports: OJS_HTTP (48080), OJS_KAFKA (49092), OJS_HOOK (48090) for the
# restarted `redrive dev` and the suite's reset hook; not make run's 8080
# and 9092. Needs go and python3 (the suite's reset hook).
set -euo pipefail
[ $# -ge 1 ] && [ -f "$1/run.sh" ] || {
  echo "usage: $0 SUITE_DIR [LIST]  (SUITE_DIR: the directory holding the OJS suite's run.sh)" >&2
  exit 2
}
suite=$(cd "$1" && pwd)
list=$suite/target.txt
[ $# -ge 2 ] && list=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
cd "$(dirname "$0")/../.."
export OJS_HTTP=${OJS_HTTP:-48080} OJS_KAFKA=${OJS_KAFKA:-49092} OJS_HOOK=${OJS_HOOK:-48090}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/redrive" ./cmd/redrive
go build -o "$work/correct" ./internal/conformance/cmd/correct
"$work/correct" apply -suite "$suite" -out "$work/corrected" -list "$list"

# The suite's run.sh restarts `redrive dev` before every case, from this
# directory (dev reads policies/ here). It exits 1 when any case fails: the
# verdict is correct check's.
echo "== OJS conformance suite as published: $(grep -c . "$list" || true) cases ($list)"
bash "$suite/run.sh" "$work/redrive" "$list" | tee "$work/official.txt" || true
echo "== the documented defective cases, corrected: $(grep -c . "$work/corrected/corrected.txt" || true) cases"
if [ -s "$work/corrected/corrected.txt" ]; then
  bash "$work/corrected/run.sh" "$work/redrive" "$work/corrected/corrected.txt" | tee "$work/corrected.txt" || true
else
  echo "ojs-conformance: 0/0 cases pass" | tee "$work/corrected.txt"
fi
echo "== verdict"
"$work/correct" check -suite "$suite" -list "$list" -official "$work/official.txt" -corrected "$work/corrected.txt"
