#!/usr/bin/env bash
# The layer check must be able to fail: on a copy of src/sfb with one forbidden include added (the
# pure planner layer including the runtime) and on one with an unused arrow, it must exit 1 and
# name the file and the layers.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/a/src" "$T/b/src"
cp -r "$ROOT/src/sfb" "$T/a/src/" && cp -r "$ROOT/src/sfb" "$T/b/src/"
sed -i '1a #include "sfb/runtime/worker.h"' "$T/a/src/sfb/mgwfbp/planner.cc"
sed -i 's/^mgwfbp: core$/mgwfbp: core io/' "$T/b/src/sfb/layers.txt"
check() {  # <tree> <expected text>
  local out rc=0
  out=$("$ROOT/tests/lint/check_layers.sh" "$1" 2>&1) || rc=$?
  [ $rc = 1 ] || { echo "FAIL: exit $rc on $1, expected 1: $out"; exit 1; }
  grep -qF -- "$2" <<<"$out" || { echo "FAIL: no '$2' in: $out"; exit 1; }
  echo "refused as expected: $(grep -F -- "$2" <<<"$out")"
}
check "$T/a" "src/sfb/mgwfbp/planner.cc:2: layer 'mgwfbp' includes layer 'runtime'"
check "$T/b" "layer 'mgwfbp' may include 'io' but no file of it does"
echo PASS
