#!/usr/bin/env bash
# Validates the SFB engine's predictor (sfb-plan, sfb/predict/scheme_model.h) on the emulated
# cluster: for each host count and link rate it brings up scripts/netns-cluster.sh (the workers'
# hosts plus the FMS servers'), runs sfb-compare (which profiles the job with `sfbd --profile` on
# the same ranks, then runs every scheme) on a config where SFB wins and one where the all-reduce
# does, then a comm.scheme = "auto" run of each, and joins everything into one table: predicted
# and measured seconds per clock per scheme with the error, the measured winner and auto's choice.
#
#   scripts/predict-validate.sh [--hosts "4 8"] [--rates "1gbit"] [--repeats 3] [--out DIR]
#                               [--configs "A B"] [--reprofile] [--table-only]
#     --hosts LIST    worker host counts                      (default "4 8")
#     --rates LIST    tbf link rates                          (default "1gbit")
#     --repeats R     sfb-compare --repeats                   (default 3)
#     --configs LIST  job configs                             (default configs/compare_mlr_8192.toml
#                                                              configs/compare_mlr_512_k1024.toml)
#     --out DIR       output directory                        (default runs/predict-validate)
#     --reprofile     keep the measured runs in DIR: bring the clusters up again, measure the
#                     profiles (sfbd --profile) and the auto runs anew, and rebuild the tables
#                     (sfb-compare --table-only): for a change of the predictor or the profiler
# Needs root (network namespaces); takes about 40 minutes on 2 cores with the defaults. Writes
# DIR/<rate>-<hosts>h/<config>/ (sfb-compare's output), DIR/<rate>-<hosts>h/<config>-auto/ and
# DIR/validation.md.
set -euo pipefail
source "$(dirname "$0")/common.sh"
hosts_list="4 8" rates="1gbit" repeats=3 out="$SFB_ROOT/runs/predict-validate" table_only=0 reprofile=0
configs="$SFB_ROOT/configs/compare_mlr_8192.toml $SFB_ROOT/configs/compare_mlr_512_k1024.toml"
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts_list=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --table-only) table_only=1; shift ;;
    --reprofile) reprofile=1; shift ;;
    *) echo "predict-validate: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "${SFB_NO_BUILD:-}" ] || [ "$table_only" = 1 ] || sfb_build sfbd sfb-plan
export SFB_NO_BUILD=1
mkdir -p "$out"
# Per config: the overrides that keep FMS's clocks (W through the servers' links) to minutes.
# Evaluations every few clocks give sfb-compare's steady seconds per clock; FMS gets a server per
# worker host (each server's link then carries one W each way a clock, as in Bosen and Petuum).
declare -A sets=([compare_mlr_8192]="stop.max_clocks=14 eval.every=3" [compare_mlr_512_k1024]="stop.max_clocks=30 eval.every=5")
servers_for() { echo "$1"; }

if [ "$table_only" = 0 ]; then
  for rate in $rates; do
    for h in $hosts_list; do
      S=$(servers_for "$h")
      "$SFB_ROOT/scripts/netns-cluster.sh" down > /dev/null 2>&1 || true
      "$SFB_ROOT/scripts/netns-cluster.sh" up $((h + S)) --rate "$rate"
      for c in $configs; do
        name=$(basename "$c" .toml)
        dir="$out/$rate-${h}h/$name"
        args=()
        for s in ${sets[$name]:-}; do args+=(--set "$s"); done
        if [ "$reprofile" = 1 ]; then
          mkdir -p "$dir/profile"
          "$SFB_ROOT/scripts/netns-cluster.sh" run -- -np "$h" "$SFB_BUILD/apps/sfbd" --config "$c" \
            --set output.log_level=warn --set runtime.threads=1 --set output.dir="$dir/profile" --set comm.scheme=sfb \
            "${args[@]}" --profile "$dir/profile.json" > "$dir/profile/log" 2>&1 || { tail -20 "$dir/profile/log"; exit 1; }
          "$SFB_ROOT/scripts/sfb-compare.sh" --config "$c" --netns --np "$h" --servers "$S" --repeats "$repeats" \
            --out "$dir" --table-only "${args[@]}" > /dev/null
        else
          "$SFB_ROOT/scripts/sfb-compare.sh" --config "$c" --netns --np "$h" --servers "$S" --repeats "$repeats" \
            --out "$dir" "${args[@]}"
        fi
        # auto on the same cluster: it profiles at start-up and picks.
        rm -rf "$dir-auto"
        mkdir -p "$dir-auto"
        "$SFB_ROOT/scripts/netns-cluster.sh" run -- -np "$h" "$SFB_BUILD/apps/sfbd" --config "$c" \
          --set output.dir="$dir-auto" --set runtime.threads=1 --set comm.scheme=auto --set output.log_level=info \
          "${args[@]}" > "$dir-auto/log" 2>&1 || { tail -20 "$dir-auto/log"; exit 1; }
      done
    done
  done
  "$SFB_ROOT/scripts/netns-cluster.sh" down > /dev/null 2>&1 || true
fi

# The joined table: one row per (rate, hosts, config, scheme).
col() {  # <table.md> <run> <column name>: the cell of that run's row
  awk -F'|' -v run="$2" -v name="$3" '{ for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i) }
    $2 == "run" { for (i = 1; i <= NF; i++) if ($i == name) c = i }
    c && $2 == run { print $c; exit }' "$1"
}
{
  echo "| link | hosts | config | scheme | measured s/clock (median, min-max) | predicted s/clock | error | measured winner | auto chose |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for rate in $rates; do
    for h in $hosts_list; do
      for c in $configs; do
        name=$(basename "$c" .toml)
        dir="$out/$rate-${h}h/$name"
        [ -f "$dir/table.md" ] || continue
        winner=$(sed -n 's/^\*\*Verdict: \([^ ]*\) wins.*/\1/p' "$dir/table.md")
        chose=$(jq -r '.auto.chosen // "-"' "$dir-auto/summary.json" 2>/dev/null || echo "-")
        for run in sfb-s0 halton-s0 fms-s0 allreduce-s0; do
          meas=$(col "$dir/table.md" "$run" "s/clock")
          [ -n "$meas" ] || continue
          echo "| $rate | $h | $name | ${run%-s0} | $meas | $(col "$dir/table.md" "$run" "predicted s/clock") | $(col "$dir/table.md" "$run" "error") | ${winner%-s0} | $chose |"
        done
      done
    done
  done
} > "$out/validation.md"
cat "$out/validation.md"
# Predictions from 4 to 1024 nodes (one rank per node) from each config's profile at the first
# host count, with the crossovers.
first=${hosts_list%% *}
for c in $configs; do
  name=$(basename "$c" .toml)
  p="$out/${rates%% *}-${first}h/$name/profile.json"
  [ -f "$p" ] || continue
  "$SFB_ROOT/scripts/plan-plot.sh" --profile "$p" --out "$out/plan-$name" --links 1gbe,10gbe,100gbe \
    --schemes "sfb,halton,fms:n,allreduce" --title "$name: predicted from the ${first}-host profile" > /dev/null
done
