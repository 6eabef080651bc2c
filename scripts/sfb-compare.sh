#!/usr/bin/env bash
# sfb-compare: runs one job config under several communication schemes and settings and compares
# them: time to a target objective, throughput, bytes per clock (measured and theory), and the
# compute / update / network-wait split; a Markdown table, PNG plots (gnuplot) and every run's
# raw metrics.
#
#   scripts/sfb-compare.sh --config configs/x.toml [options] [-- extra sfbd args]
#     --schemes LIST     comma list of sfb, halton, halton-static, fms, allreduce (default: sfb,halton,fms,allreduce)
#     --np P             workers                                            (default 4)
#     --servers S        FMS parameter-server ranks, added to the P workers (default 1)
#     --staleness LIST   comma list of staleness values (0, 2, inf, ...)    (default 0)
#     --q LIST           Halton peers per worker, a comma list runs one job per Q (the paper's Q
#                        sweep)                                             (default: ceil(log2 P))
#     --k K              minibatch K                                        (default: the config's)
#     --set KEY=VALUE    any config override (repeatable; e.g. data.features=8192)
#     --target OBJ       target objective (default: the worst final objective over the runs)
#     --netns            run on the cluster of scripts/netns-cluster.sh (up it first)
#     --out DIR          output directory                                   (default runs/compare)
#
# Writes DIR/table.md, DIR/objective_vs_time.png, DIR/objective_vs_clock.png,
# DIR/bytes_per_clock.png, DIR/time_breakdown.png, DIR/drift_vs_clock.png (replica drift) and
# DIR/<run>/{metrics.jsonl,summary.json,log}.
set -euo pipefail
source "$(dirname "$0")/common.sh"

config="" schemes="sfb,halton,fms,allreduce" np=4 servers=1 stales="0" q="" k="" target="" netns=0
out="$SFB_ROOT/runs/compare"
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --schemes) schemes=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --staleness) stales=$2; shift 2 ;;
    --q) q=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --target) target=$2; shift 2 ;;
    --netns) netns=1; shift ;;
    --out) out=$2; shift 2 ;;
    --) shift; sets+=("$@"); break ;;
    *) echo "sfb-compare: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$config" ] || { echo "sfb-compare: --config is required" >&2; exit 2; }
[ -f "$config" ] || { echo "sfb-compare: no such config: $config" >&2; exit 2; }
command -v gnuplot > /dev/null || { echo "sfb-compare: gnuplot is missing (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 2; }
[ -n "${SFB_NO_BUILD:-}" ] || sfb_build sfbd  # tests run it on an existing build
mkdir -p "$out"
out=$(cd "$out" && pwd)


# Every (scheme, Q) to run: Halton schemes once per Q of --q, the others once.
q=${q//,/ }
variants=()
for scheme in ${schemes//,/ }; do
  case "$scheme" in
    halton|halton-static) for qv in ${q:-default}; do variants+=("$scheme:$qv"); done ;;
    *) variants+=("$scheme:-") ;;
  esac
done
runs=()
for variant in "${variants[@]}"; do
  scheme=${variant%%:*} qv=${variant#*:}
  for s in ${stales//,/ }; do
    name="$scheme-s$s"
    [[ "$qv" != "-" && "$qv" != "default" ]] && name="$scheme-q$qv-s$s"
    dir="$out/$name"
    rm -rf "$dir"
    mkdir -p "$dir"
    args=(--config "$config" --set output.dir="$dir" --set sfb.staleness="$s" --set output.log_level=warn)
    ranks=$np
    case "$scheme" in
      sfb) args+=(--set comm.scheme=sfb --set sfb.broadcast=full) ;;
      halton|halton-static) args+=(--set comm.scheme=sfb --set sfb.broadcast="$scheme")
              [ "$qv" != "default" ] && args+=(--set sfb.halton_q="$qv") ;;
      fms) args+=(--set comm.scheme=fms --set fms.servers="$servers"); ranks=$((np + servers)) ;;
      allreduce) args+=(--set comm.scheme=allreduce) ;;
      *) echo "sfb-compare: unknown scheme $scheme" >&2; exit 2 ;;
    esac
    [ -n "$k" ] && args+=(--set optimizer.minibatch="$k")
    # Every rank's threads share this machine's cores: one thread per rank.
    args+=(--set runtime.threads=1 "${sets[@]}")
    echo "== $name: $ranks ranks: sfbd ${args[*]}"
    if [ "$netns" = 1 ]; then
      "$SFB_ROOT/scripts/netns-cluster.sh" run -- -np "$ranks" "$SFB_BUILD/apps/sfbd" "${args[@]}" > "$dir/log" 2>&1 \
        || { tail -20 "$dir/log"; exit 1; }
    else
      sfb_mpirun -np "$ranks" "$SFB_BUILD/apps/sfbd" "${args[@]}" > "$dir/log" 2>&1 || { tail -20 "$dir/log"; exit 1; }
    fi
    # objective vs time and clock, for the plots: seconds clock objective
    jq -r '"\(.seconds) \(.clock) \(.objective)"' "$dir/metrics.jsonl" > "$dir/curve.dat"
    jq -r 'select(.replica_drift_clock != null) | "\(.replica_drift_clock) \(.replica_drift)"' "$dir/metrics.jsonl" \
      > "$dir/drift.dat"
    runs+=("$name")
  done
done

# The target: given, or the worst final objective (every run reached it).
if [ -z "$target" ]; then
  target=$(for r in "${runs[@]}"; do sfb_field final_objective "$out/$r/summary.json"; done | sort -g | tail -1)
fi

ttt() {  # time to target: the first evaluation at or below it (seconds), or "-" when never
  awk -v t="$target" '$3 <= t { print $1; found = 1; exit } END { if (!found) print "-" }' "$1"
}
base_ttt=""
{
  echo "# sfb-compare: $(basename "$config"), P = $np workers$([ "$netns" = 1 ] && echo ", netns cluster ($(cat /tmp/${SFB_NETNS_PREFIX:-sfb}-netns-cluster/rate 2>/dev/null || echo '?') links)")"
  echo
  echo "Target objective $target (time to target = first evaluation at or below it). Bytes are the whole job's"
  echo "network bytes per clock; theory: SFB full P(P-1)K(J+D), Halton PQK(J+D) plus its reconciliation all-reduce every sfb.reconcile_every clocks, FMS 2PJD, all-reduce 2(P-1)JD floats (a sparse v counted as 8 bytes per nonzero it had)."
  echo "compute / update / wait: seconds per worker (mean) computing SFs or dense updates, applying to W, waiting on peers."
  echo
  echo "replica drift: the last measured relative distance of the workers' W from their mean (0 under full-broadcast BSP)."
  echo
  echo "| run | clocks | time to target (s) | vs first | final objective | samples/s | MB/clock measured | MB/clock theory | measured/theory | compute s | update s | wait s | wall s | replica drift |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for r in "${runs[@]}"; do
    sum="$out/$r/summary.json"
    t=$(ttt "$out/$r/curve.dat")
    [ -z "$base_ttt" ] && base_ttt=$t
    ratio=$(awk -v a="$t" -v b="$base_ttt" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2fx", a / b }')
    m=$(sfb_field bytes_per_clock "$sum"); th=$(sfb_field theory_bytes_per_clock "$sum")
    drift=$(tail -1 "$out/$r/drift.dat" 2>/dev/null | awk '{ print $2 }')
    # bytes_per_clock is null when Open MPI's all-reduce moved the bytes (comm.collectives = "mpi").
    if [ "$m" = null ]; then mb="not counted (MPI)" mr="-"
    else mb=$(awk -v x="$m" 'BEGIN{ printf "%.3f", x/1e6 }') mr=$(awk -v a="$m" -v b="$th" 'BEGIN{ if (b > 0) printf "%.4f", a/b; else print 0 }'); fi
    printf '| %s | %s | %s | %s | %s | %.0f | %s | %.3f | %s | %.2f | %.2f | %.2f | %.2f | %s |\n' "$r" "$(sfb_field final_clock "$sum")" \
      "$t" "$ratio" "$(sfb_field final_objective "$sum")" "$(sfb_field samples_per_s "$sum")" "$mb" \
      "$(awk -v x="$th" 'BEGIN{print x/1e6}')" "$mr" \
      "$(sfb_field compute_s_mean "$sum")" "$(sfb_field update_s_mean "$sum")" "$(sfb_field wait_s_mean "$sum")" "$(sfb_field seconds "$sum")" \
      "${drift:--}"
  done
} > "$out/table.md"

# Plots.
plot_lines() {  # <png> <xcol> <xlabel>
  local cmd="set terminal pngcairo size 900,560 noenhanced; set output '$1'; set key top right; set grid;"
  cmd+=" set xlabel '$3'; set ylabel 'objective'; set title 'objective, $(basename "$config")';"
  cmd+=" set arrow from graph 0, first $target to graph 1, first $target nohead dt 2 lc rgb 'gray';"
  local first=1
  cmd+=" plot"
  for r in "${runs[@]}"; do
    [ $first = 1 ] || cmd+=","
    first=0
    cmd+=" '$out/$r/curve.dat' using $2:3 with linespoints title '$r'"
  done
  gnuplot -e "$cmd"
}
plot_lines "$out/objective_vs_time.png" 1 "seconds"
plot_lines "$out/objective_vs_clock.png" 2 "clock"
drift_cmd="set terminal pngcairo size 900,560 noenhanced; set output '$out/drift_vs_clock.png'; set key top right; set grid;"
drift_cmd+=" set xlabel 'clock'; set ylabel 'replica drift'; set title 'replica drift, $(basename "$config")'; plot"
first=1
for r in "${runs[@]}"; do
  [ -s "$out/$r/drift.dat" ] || continue
  [ $first = 1 ] || drift_cmd+=","
  first=0
  drift_cmd+=" '$out/$r/drift.dat' using 1:2 with linespoints title '$r'"
done
[ $first = 1 ] || gnuplot -e "$drift_cmd"
for r in "${runs[@]}"; do
  sum="$out/$r/summary.json"
  m=$(sfb_field bytes_per_clock "$sum")
  [ "$m" = null ] && m=NaN  # not counted (MPI's all-reduce): no bar
  echo "$r $m $(sfb_field theory_bytes_per_clock "$sum") $(sfb_field compute_s_mean "$sum") $(sfb_field update_s_mean "$sum") $(sfb_field wait_s_mean "$sum")"
done > "$out/bars.dat"
gnuplot -e "set terminal pngcairo size 900,560 noenhanced; set output '$out/bytes_per_clock.png'; set style data histograms;
  set style histogram clustered gap 1; set style fill solid 0.8; set logscale y; set ylabel 'MB per clock (log)'; set grid ytics;
  set title 'network bytes per clock'; set xtics rotate by -30;
  plot '$out/bars.dat' using (\$2/1e6):xtic(1) title 'measured', '' using (\$3/1e6) title 'theory'"
gnuplot -e "set terminal pngcairo size 900,560 noenhanced; set output '$out/time_breakdown.png'; set style data histograms;
  set style histogram rowstacked; set style fill solid 0.8; set boxwidth 0.6; set ylabel 'seconds per worker'; set grid ytics;
  set title 'compute / update / network wait'; set xtics rotate by -30;
  plot '$out/bars.dat' using 4:xtic(1) title 'compute', '' using 5 title 'update', '' using 6 title 'wait'"
cat "$out/table.md"
echo
echo "plots: $out/{objective_vs_time,objective_vs_clock,bytes_per_clock,time_breakdown}.png; raw: $out/<run>/metrics.jsonl"
