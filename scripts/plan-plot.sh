#!/usr/bin/env bash
# Predicted seconds per clock of every scheme from 4 to 1024 nodes on named links, from a scheme
# profile (sfbd --profile, or an auto run's summary.json): sfb-plan's CSV and a log-log plot, one
# line per scheme and link, and the crossovers sfb-plan finds.
#
#   scripts/plan-plot.sh --profile p.json --out DIR [--links 1gbe,10gbe] [--schemes sfb,halton,fms:4,allreduce]
#                        [--title TEXT]
# Writes DIR/plan.md (sfb-plan's tables and crossovers), DIR/plan.csv and DIR/predicted.png.
set -euo pipefail
source "$(dirname "$0")/common.sh"
profile="" out="" links="1gbe,10gbe" schemes="sfb,halton,fms:4,allreduce" title=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --schemes) schemes=$2; shift 2 ;;
    --title) title=$2; shift 2 ;;
    *) echo "plan-plot: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$profile" ] && [ -n "$out" ] || { echo "plan-plot: --profile and --out are required" >&2; exit 2; }
[ -n "${SFB_NO_BUILD:-}" ] || sfb_build sfb-plan >&2
mkdir -p "$out"
nodes=4,8,16,32,64,128,256,512,1024
"$SFB_BUILD/apps/sfb-plan" --profile "$profile" --nodes "$nodes" --links "$links" --schemes "$schemes" \
  --csv "$out/plan.csv" > "$out/plan.md"
cmd="set terminal pngcairo size 1000,620 noenhanced; set output '$out/predicted.png'; set logscale xy; set grid;"
cmd+=" set xlabel 'nodes (workers; one rank per node)'; set ylabel 'predicted seconds per clock';"
cmd+=" set key outside right; set title '${title:-$(basename "$profile")}'; set xtics (4,8,16,32,64,128,256,512,1024); plot"
sep="" dt=1
for l in ${links//,/ }; do
  for s in ${schemes//,/ }; do
    label=$s
    case "$s" in fms:n) label="fms:n" ;; fms:*) label="fms:s${s#fms:}" ;; halton:*) label="halton:q${s#halton:}" ;; esac
    awk -F, -v l="$l" -v s="$label" 'NR > 1 && $1 == l && $3 == s { print $2, $6 }' "$out/plan.csv" > "$out/$l-$label.dat"
    cmd+="$sep '$out/$l-$label.dat' using 1:2 with linespoints dt $dt title '$label, $l'"
    sep=","
  done
  dt=$((dt + 1))
done
gnuplot -e "$cmd"
grep -E "^(winner by N|crossover)" "$out/plan.md" || true
echo "plot: $out/predicted.png"
