#!/usr/bin/env bash
# sfb-compare --table-only on two repeats of one run whose steady seconds per clock (0.1 and 0.2)
# and times to target (2 and 4 s) are made up: the table's median is the mean of the two middle
# values, 0.15 s and 3 s, not the lower one, and the median repeat it takes the other columns
# from is the one nearest that median.
#   compare_median_test.sh <source dir>
set -euo pipefail
root=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# One repeat: evaluations at clocks 0, 10, 20, 30 at `spc` seconds a clock, objective falling to 0.5
# at clock 20; samples/s tells the repeats apart.
repeat() {  # <dir> <seconds per clock> <samples/s>
  mkdir -p "$1"
  awk -v s="$2" 'BEGIN { for (c = 0; c <= 30; c += 10) print c * s, c, 1 - c / 40 }' > "$1/curve.dat"
  : > "$1/drift.dat"
  jq -n --argjson spc "$2" --argjson sps "$3" '{final_objective: 0.25, final_clock: 30, seconds: (30 * $spc),
    J: 10, D: 20, settings: {"optimizer.minibatch": 4}, bytes_per_clock: 1000, theory_bytes_per_clock: 1000,
    compute_s_mean: 1, wait_s_mean: 1, update_s_mean: 0.5, samples_per_s: $sps, cpu_stolen_share: 0.01}' > "$1/summary.json"
}
repeat "$dir/out/sfb-s0-r1" 0.1 111
repeat "$dir/out/sfb-s0-r2" 0.2 222
SFB_NO_BUILD=1 SFBD=/bin/true "$root/scripts/sfb-compare.sh" --config "$root/configs/test_fashion_small.toml" \
  --schemes sfb --repeats 2 --no-predict --table-only --target 0.5 --out "$dir/out" > "$dir/log" 2>&1 ||
  { cat "$dir/log"; fail "sfb-compare --table-only"; }
row=$(grep '^| sfb-s0 ' "$dir/out/table.md") || { cat "$dir/out/table.md"; fail "no sfb-s0 row"; }
echo "$row"
col() { awk -F'|' -v c="$1" '{ gsub(/^ +| +$/, "", $c); print $c }' <<< "$row"; }
[ "$(col 4)" = "3 (2-4)" ] || fail "time to target: '$(col 4)', expected '3 (2-4)' (the mean of 2 and 4)"
[ "$(col 16)" = "0.15 (0.1-0.2)" ] || fail "s/clock: '$(col 16)', expected '0.15 (0.1-0.2)'"
# Both repeats are as near 0.15: the faster one's columns.
[ "$(col 7)" = 111 ] || fail "samples/s '$(col 7)': not the median repeat's (111)"
grep -q "sfb-s0 $dir/out/sfb-s0-r1\$" "$dir/out/median_runs.txt" || fail "median_runs.txt: $(cat "$dir/out/median_runs.txt")"
echo "compare median test passed"
