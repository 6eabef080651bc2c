#!/usr/bin/env bash
# The SFB paper's headline comparison on the four models: SFB (full, rotating Halton) vs FMS (1
# server, and one per host) vs the dense all-reduce, BSP, on the emulated cluster of
# scripts/netns-cluster.sh (up it first: `scripts/netns-cluster.sh up 4 --rate 1gbit`). Every
# number comes from a scripts/sfb-compare.sh table; this script runs them and joins the rows into
# one Markdown table (docs/compare.md, "The four models").
#
#   scripts/compare-models.sh [--out DIR] [--repeats R] [--table-only]
#     --out DIR       output directory (default runs/compare-models; the runs take ~15 min on 2 cores
#                     per repeat)
#     --repeats R     every run R times (sfb-compare --repeats): medians and min-max (default 1)
#     --table-only    only join the tables of an earlier run in DIR
#
# Writes DIR/<model>/ (sfb, halton, allreduce), DIR/<model>-fms1/ and DIR/<model>-fms4/ (FMS with
# 1 and 4 server ranks, timed to the first table's target objective), each an sfb-compare output
# (table.md, plots, runs), DIR/table.md and DIR/<model>_objective_vs_time.png (the five runs).
set -euo pipefail
source "$(dirname "$0")/common.sh"

out="$SFB_ROOT/runs/compare-models" table_only=0 repeats=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --table-only) table_only=1; shift ;;
    *) echo "compare-models: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "${SFB_NO_BUILD:-}" ] || [ "$table_only" = 1 ] || sfb_build sfbd sfb-plan
export SFB_NO_BUILD=1
mkdir -p "$out"

# model key, config, overrides (sized so that FMS finishes in minutes at 1 Gbit/s)
models=(mlr l2mlr dml sparse_coding)
declare -A config=(
  [mlr]=configs/compare_mlr_8192.toml [l2mlr]=configs/synthetic_l2mlr_large.toml
  [dml]=configs/synthetic_dml_large.toml [sparse_coding]=configs/synthetic_sparse_coding_large.toml)
declare -A sets=(
  [mlr]="data.features=2047 data.classes=2048 stop.max_clocks=40 eval.every=4"
  [l2mlr]="data.features=4096 data.classes=1024 stop.max_clocks=100 eval.every=10 eval.train_sample=500"
  [dml]="stop.max_clocks=100 eval.every=10"
  [sparse_coding]="optimizer.minibatch=32 stop.max_clocks=60 eval.every=10")
declare -A title=([mlr]="MLR" [l2mlr]="L2-MLR (proximal SGD)" [dml]="DML" [sparse_coding]="sparse coding")

for m in "${models[@]}"; do
  [ "$table_only" = 0 ] || break
  args=()
  for s in ${sets[$m]}; do args+=(--set "$s"); done
  "$SFB_ROOT/scripts/sfb-compare.sh" --config "$SFB_ROOT/${config[$m]}" --netns --schemes sfb,halton,allreduce \
    --repeats "$repeats" --out "$out/$m" "${args[@]}"
  target=$(sed -n 's/^Target objective \([^ ]*\) .*/\1/p' "$out/$m/table.md")
  for s in 1 4; do
    "$SFB_ROOT/scripts/sfb-compare.sh" --config "$SFB_ROOT/${config[$m]}" --netns --schemes fms --servers "$s" \
      --repeats "$repeats" --no-predict --target "$target" --out "$out/$m-fms$s" "${args[@]}"
  done
done

# One row of an sfb-compare table as "time|objective|measured|theory|compute|wait|other|wall" (the
# time a median, with the min-max of the repeats after it).
row() {
  awk -F'|' -v run="$2" '{ for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i) }
    $2 == run { print $4 "|" $6 "|" $8 "|" $9 "|" $11 "|" $12 "|" $13 "|" $14 }' "$1"
}
rm -f "$out"/.rows-*
{
  echo "| model | scheme | time to target (s) | vs SFB | final objective | MB/clock measured | theory | compute / wait / other s | wall s |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for m in "${models[@]}"; do
    sfb_time=$(row "$out/$m/table.md" sfb-s0 | cut -d'|' -f1)
    first=1
    for spec in "sfb-s0:$m:SFB full" "halton-s0:$m:SFB Halton" "fms-s0:$m-fms1:FMS, 1 server" \
                "fms-s0:$m-fms4:FMS, 4 servers" "allreduce-s0:$m:all-reduce"; do
      IFS=: read -r run dir name <<< "$spec"
      IFS='|' read -r t obj meas theory comp upd wait wall <<< "$(row "$out/$dir/table.md" "$run")"
      label=""
      [ "$first" = 1 ] && label=${title[$m]}
      first=0
      awk -v l="$label" -v n="$name" -v t="$t" -v s="$sfb_time" -v o="$obj" -v me="$meas" -v th="$theory" \
        -v c="$comp" -v u="$upd" -v w="$wait" -v wa="$wall" \
        'BEGIN { printf "| %s | %s | %s | %.2fx | %s | %s | %s | %s / %s / %s | %s |\n", l, n, t, t / s, o, me, th, c, u, w, wa }'
      echo "$name|$t|$meas|$theory" >> "$out/.rows-$m"
    done
  done
  echo
  # A verdict per model over its five rows: the fastest to the target, its ratio to the next, and
  # its bytes against the next's (the theory where MPI moved the bytes).
  for m in "${models[@]}"; do
    sort -t'|' -k2,2g "$out/.rows-$m" | awk -F'|' -v model="${title[$m]}" '
      NR == 1 { b = $1; tb = $2 + 0; mb = ($3 ~ /^[0-9.]+$/) ? $3 : $4 }
      NR == 2 { n = $1; tn = $2 + 0; mn = ($3 ~ /^[0-9.]+$/) ? $3 : $4 }
      END { printf "**%s: %s wins**, %.2fx faster to the target than %s, sending %.3gx its bytes per clock.\n\n", model, b, tn / tb, n, mb / mn }'
    rm -f "$out/.rows-$m"
  done
  for m in "${models[@]}"; do
    echo "${title[$m]} (sfb-compare, $out/$m/table.md):"
    grep -E '^(\*\*Verdict|Break-even)' "$out/$m/table.md" || true
    echo
  done
} > "$out/table.md"
cat "$out/table.md"

# Objective vs time per model, the five runs of the table (sfb-compare's curve.dat: seconds clock objective).
for m in "${models[@]}"; do
  plot="" sep=""
  for spec in "$m/sfb-s0:SFB full" "$m/halton-s0:SFB Halton" "$m-fms1/fms-s0:FMS, 1 server" \
              "$m-fms4/fms-s0:FMS, 4 servers" "$m/allreduce-s0:all-reduce"; do
    run=${spec%%:*}
    dir=$(awk -v r="${run#*/}" '$1 == r { print $2 }' "$out/${run%%/*}/median_runs.txt")
    plot+="$sep'$dir/curve.dat' using 1:3 with linespoints title '${spec#*:}'"
    sep=", "
  done
  gnuplot -e "set terminal pngcairo size 900,560 noenhanced; set output '$out/${m}_objective_vs_time.png';
    set title '${title[$m]}: objective vs time, 4 hosts'; set xlabel 'seconds'; set ylabel 'objective';
    set grid; set key top right; plot $plot"
done
