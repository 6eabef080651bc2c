#!/usr/bin/env bash
# What the validation's own testbed allows: several runs of scripts/predict-validate.sh (the same
# rows measured at different times) checked against each other. Each row of each run is
# "predicted" by the median of the same row's measured seconds per clock in the other runs, as a
# predictor that were exact for the machine of those runs would be; its |error| is the floor that
# the testbed's repeatability puts under any predictor's. Beside it, the predictor's held-out error
# on the same rows (each table's error column: re-table the runs with --table-only first to score
# one build), and every pair of runs' measured medians apart. With two runs the "floor" is one
# run against the other, both runs' noise in it: more runs make it a closer bound.
#
#   scripts/validation-floor.sh DIR_OR_TABLE DIR_OR_TABLE [...]
#     each argument a predict-validate --out directory (its validation.md) or a validation.md
#
# Rows are matched by link, hosts, config (shape) and scheme; a row measured in fewer than two of
# the runs is left out (said so). Prints the two summaries and the pairs; exit 2 on a missing or
# malformed table.
set -euo pipefail
source "$(dirname "$0")/common.sh"
bad() { echo "validation-floor: $*" >&2; exit 2; }
[ $# -ge 2 ] || bad "needs at least two validation runs (directories of scripts/predict-validate.sh --out, or their validation.md)"
tables=()
for a in "$@"; do
  t=$a
  [ -d "$a" ] && t=$a/validation.md
  [ -f "$t" ] || bad "no validation table at $t"
  tables+=("$t")
done

# One line per measured row, tab-separated: file index, key, measured s/clock, held-out error (a
# number of % or -). A malformed value or a row twice in one table: exit 2 naming it.
rows() {
  local i=0 t
  for t in "${tables[@]}"; do
    i=$((i + 1))
    awk -F'|' -v i="$i" -v t="$t" '
      function trim(s) { gsub(/^ +| +$/, "", s); return s }
      function fail(msg) { printf "validation-floor: %s line %d: %s\n", t, NR, msg > "/dev/stderr"; bad = 1; exit 2 }
      NF >= 14 && trim($3) ~ /^[0-9]+$/ {
        key = trim($2) "|" trim($3) "|" trim($4) "|" trim($5)
        if (key in seen) fail("a second row for " key " (line " seen[key] ")")
        seen[key] = NR
        split(trim($6), m, " ")
        if (m[1] !~ /^[0-9.]+(e[-+]?[0-9]+)?$/ || m[1] + 0 <= 0)
          fail("measured s/clock \"" trim($6) "\" is not a positive number")
        e = trim($8)
        sub(/%$/, "", e)
        if (e != "-" && e !~ /^[-+]?[0-9.]+$/) fail("error \"" trim($8) "\" is not a percentage or -")
        printf "%d\t%s\t%s\t%s\n", i, key, m[1], e
        n++
      }
      END {
        if (bad) exit 2
        if (n == 0) { printf "validation-floor: %s has no table rows\n", t > "/dev/stderr"; exit 2 }
      }' "$t" || return 2
  done
}

# |error| median, max and counts within 10% and 5% of the numbers on stdin (one a line).
summary() {
  sort -g | awk "$SFB_MEDIAN_AWK"'{ v[NR] = $1 } END {
    if (NR == 0) { print "no rows"; exit }
    med = median()
    for (k = 1; k <= NR; k++) { w10 += v[k] <= 10; w5 += v[k] <= 5 }
    printf "|error| median %.3g%%, max %.3g%%, %d of %d within 10%%, %d within 5%%\n", med, v[NR], w10, NR, w5 }'
}

all=$(rows) || exit 2
# Each run's row against the median of the other runs' (leave one out), and the predictor's error.
scored=$(echo "$all" | awk -F'\t' '
  function median(a, n,   i, j, x) {
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { f[NR] = $1; k[NR] = $2; m[NR] = $3; e[NR] = $4; runs[$2] = runs[$2] + 1 }
  END {
    for (r = 1; r <= NR; r++) {
      if (runs[k[r]] < 2) { left++; continue }
      n = 0
      for (s = 1; s <= NR; s++) if (s != r && k[s] == k[r] && f[s] != f[r]) o[++n] = m[s]
      d = median(o, n) / m[r] - 1
      print "floor", (d < 0 ? -d : d) * 100
      if (e[r] != "-" && e[r] != "") print "predictor", (e[r] < 0 ? -e[r] : e[r])
    }
    if (left) print "left", left
  }')
left=$(echo "$scored" | awk '$1 == "left" { print $2 }')
echo "validation runs: ${#tables[@]} (${tables[*]})"
[ -z "$left" ] || echo "rows measured in only one run, left out: $left"
echo "the testbed against itself (each row by the median of the same row in the other runs): $(echo "$scored" | awk '$1 == "floor" { print $2 }' | summary)"
echo "the predictor on the same rows (the tables' held-out error): $(echo "$scored" | awk '$1 == "predictor" { print $2 }' | summary)"
# Every pair of runs: their measured medians apart, row by row.
n=${#tables[@]}
for ((a = 1; a < n; a++)); do
  for ((b = a + 1; b <= n; b++)); do
    apart=$(echo "$all" | awk -F'\t' -v a="$a" -v b="$b" '
      $1 == a { x[$2] = $3 } $1 == b { y[$2] = $3 }
      END { for (k in x) if (k in y) { d = x[k] / y[k] - 1; print (d < 0 ? -d : d) * 100 } }' | summary)
    echo "runs $a and $b (${tables[a-1]}, ${tables[b-1]}) measured apart: ${apart/|error| /}"
  done
done
