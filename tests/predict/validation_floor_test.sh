#!/usr/bin/env bash
# scripts/validation-floor.sh on three small validation tables whose answers are worked out by
# hand: each row against the median of the same row in the other runs, the predictor's error
# column on the same rows, a row of one run only left out, and bad input exits 2 naming it.
set -euo pipefail
root=$1
tool=$root/scripts/validation-floor.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head='| link | hosts | config (shape) | scheme | measured s/clock: median (min-max) | predicted | error | in place | error | measured winner | predicted winner | auto chose | steal |
|---|---|---|---|---|---|---|---|---|---|---|---|---|'
row() { echo "| 1gbit | 4 | job | $1 | $2 (0.1-9) | 1 | $3 | - | - | x | x | x | 0 / 0 |"; }
mkdir -p "$dir/r1"
{ echo "$head"; row sfb 1.0 +9%; row halton 2.0 -4%; echo; echo "held-out predictions: 2 rows"; } > "$dir/r1/validation.md"
{ echo "$head"; row sfb 1.1 +2%; row halton 1.9 -; } > "$dir/r2.md"
{ echo "$head"; row sfb 0.9 -20%; row halton 2.2 +1%; row allreduce 3.0 +0.0%; } > "$dir/r3.md"
out=$("$tool" "$dir/r1" "$dir/r2.md" "$dir/r3.md")
echo "$out"
# Floor: sfb 0%, 13.6%, 16.7%; halton 2.5%, 10.5%, 11.4%: median (10.53 + 11.36) / 2 = 10.9%.
grep -q "against itself .*median 10.9%, max 16.7%, 2 of 6 within 10%, 2 within 5%" <<< "$out"
# Predictor: 9, 4, 2, 20, 1 (run 2's halton has none).
grep -q "the predictor on the same rows .*median 4%, max 20%, 4 of 5 within 10%, 3 within 5%" <<< "$out"
grep -q "in only one run, left out: 1" <<< "$out"
grep -q "runs 1 and 2 .* measured apart: median 7.18%, max 9.09%" <<< "$out"
grep -q "runs 1 and 3 .* measured apart: median 10.1%, max 11.1%" <<< "$out"
# Bad input, first or last: one run, a missing table, a measured value or an error that is not a
# number, a row twice in one table.
expect2() {
  local rc=0 err
  err=$("$tool" "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 2 ] || { echo "expected exit 2 from $*, got $rc" >&2; exit 1; }
  echo "$err"
}
expect2 "$dir/r1" | grep -q "at least two"
expect2 "$dir/r1" "$dir/none" | grep -q "no validation table at $dir/none"
{ echo "$head"; row sfb abc +1%; } > "$dir/bad.md"
expect2 "$dir/r1" "$dir/bad.md" | grep -q "bad.md line 3: measured s/clock \"abc (0.1-9)\" is not a positive number"
expect2 "$dir/bad.md" "$dir/r1" "$dir/r2.md" | grep -q "bad.md line 3"
[ "$(expect2 "$dir/bad.md" "$dir/r1" | wc -l)" = 1 ]  # the row's error only, no "no table rows" after it
{ echo "$head"; row sfb 1.0 n/a; } > "$dir/bad_error.md"
expect2 "$dir/r1" "$dir/bad_error.md" | grep -q "bad_error.md line 3: error \"n/a\" is not a percentage or -"
{ echo "$head"; row sfb 1.0 +1%; row halton 2.0 +1%; row sfb 1.2 +3%; } > "$dir/twice.md"
expect2 "$dir/twice.md" "$dir/r1" | grep -q "twice.md line 5: a second row for 1gbit|4|job|sfb (line 3)"
echo "validation-floor: ok"
