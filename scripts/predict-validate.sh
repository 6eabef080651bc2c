#!/usr/bin/env bash
# Validates the SFB engine's predictor (sfb-plan, sfb/predict) on the emulated cluster, holding
# things out: each config is profiled once per link rate at the first host count (sfbd --profile),
# and that one profile predicts every row: the other host counts (held-out scale) and a shape that
# was measured but never profiled (held-out shape: each config's variant below, predicted with
# sfb-plan --rows/--minibatch). FMS with S servers is predicted from a profile taken with its S
# server ranks launched (mpirun -np P+S with comm.scheme = "fms": the profile then has the FMS
# engine's clock), at the first host count too. Every host is a network namespace with a CPU budget of its own
# (scripts/netns-cluster.sh --cpus), so N hosts compute like N nodes of that many cores instead of
# interleaving on the shared ones. Every scheme runs --repeats times (sfb-compare: medians and
# min-max), FMS with each server count of --servers, and a comm.scheme = "auto" run per config
# and host count (it profiles at start-up, on its own ranks, and picks).
#
#   scripts/predict-validate.sh [--hosts "4 8"] [--rates "1gbit 300mbit"] [--cpus 0.125]
#                               [--servers "1 4"] [--repeats 3] [--configs "A B"] [--out DIR]
#                               [--table-only]
#     --hosts LIST    worker host counts; the first is the profiled one      (default "4 8")
#     --rates LIST    tbf link rates                                         (default "1gbit 300mbit")
#     --cpus C        cores per host (a cgroup quota; 0: no budget)          (default 0.125)
#     --servers LIST  FMS server counts, each on hosts of its own            (default "1 4")
#     --repeats R     runs of every scheme                                   (default 3)
#     --configs LIST  job configs (default configs/compare_mlr_512_k1024.toml
#                     configs/compare_mlr_2048_k16.toml)
#     --out DIR       output directory                                       (default runs/predict-validate)
#     --table-only    run nothing: predict again from the recorded profiles and rebuild the table
#                     (for a change of the predictor)
# Needs root (network namespaces, cgroups). Hosts: the largest host count plus the largest server
# count, each with C cores: keep their product within the machine's cores. About 80 minutes on 2
# cores with the defaults. Writes DIR/<rate>/<config>[@<variant>]-<hosts>h/ (sfb-compare's output,
# FMS with other server counts in ...-fmsS/), DIR/<rate>/<config>-profile.json, the profiles with S
# FMS servers DIR/<rate>/<config>-profile-fmsS.json, and DIR/validation.md. Each row of the table
# also says how much of the CPU time the machine wanted a hypervisor gave to other guests while the
# profile that predicts it and its runs were timed (cpu_stolen_share: "profile / runs", runs as the
# median of the repeats; - where unknown, or an earlier build's files, which recorded a share of all
# the CPU time): on a virtual machine the neighbours' load is in every time.
set -euo pipefail
source "$(dirname "$0")/common.sh"
hosts_list="4 8" rates="1gbit 300mbit" cpus=0.125 servers_list="1 4" repeats=3 table_only=0
out="$SFB_ROOT/runs/predict-validate"
configs="$SFB_ROOT/configs/compare_mlr_512_k1024.toml $SFB_ROOT/configs/compare_mlr_2048_k16.toml"
bad() { echo "predict-validate: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ "$1" = --table-only ] && { table_only=1; shift; continue; }
  [ $# -ge 2 ] || bad "$1 needs a value (see the header of $0)"
  case "$1" in
    --hosts) hosts_list=$2 ;;
    --rates) rates=$2 ;;
    --cpus) cpus=$2 ;;
    --servers) servers_list=$2 ;;
    --repeats) repeats=$2 ;;
    --configs) configs=$2 ;;
    --out) out=$2 ;;
    *) bad "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
for v in $hosts_list $servers_list; do [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -ge 1 ] || bad "host and server counts must be integers >= 1, got '$v'"; done
[[ "$repeats" =~ ^[0-9]+$ ]] && [ "$repeats" -ge 1 ] || bad "--repeats must be an integer >= 1, got '$repeats'"
[[ "$cpus" =~ ^[0-9]+(\.[0-9]+)?$ ]] || bad "--cpus must be cores per host (0: none), got '$cpus'"
for c in $configs; do [ -f "$c" ] || bad "no config $c"; done
[ -n "${SFB_NO_BUILD:-}" ] || [ "$table_only" = 1 ] || sfb_build sfbd sfb-plan
export SFB_NO_BUILD=1
plan=$SFB_BUILD/apps/sfb-plan
mkdir -p "$out"
read -r -a hosts_arr <<< "$hosts_list"
read -r -a servers_arr <<< "$servers_list"
first=${hosts_arr[0]}
s1=${servers_arr[0]}

# Per config: run-length overrides (steady seconds per clock from a few evaluations), and the
# held-out shape: the overrides that make it and the sfb-plan options that predict it.
declare -A sets=([compare_mlr_8192]="stop.max_clocks=14 eval.every=3"
                 [compare_mlr_512_k1024]="stop.max_clocks=20 eval.every=5"
                 [compare_mlr_2048_k16]="stop.max_clocks=16 eval.every=4")
declare -A heldout_sets=([compare_mlr_512_k1024]="data.classes=1024" [compare_mlr_2048_k16]="optimizer.minibatch=32"
                         [compare_mlr_8192]="optimizer.minibatch=128")
declare -A heldout_plan=([compare_mlr_512_k1024]="--rows 1024" [compare_mlr_2048_k16]="--minibatch 32"
                         [compare_mlr_8192]="--minibatch 128")
declare -A heldout_name=([compare_mlr_512_k1024]="J1024" [compare_mlr_2048_k16]="K32" [compare_mlr_8192]="K128")

cluster_up() {  # <hosts>
  "$SFB_ROOT/scripts/netns-cluster.sh" down > /dev/null 2>&1 || true
  local budget=()
  if [ "$cpus" != 0 ]; then
    # The kernel's least quota is 1 ms: the period grows for small budgets (5 ms at 0.2 cores and up).
    budget=(--cpus "$cpus" --cpu-period-us "$(awk -v c="$cpus" 'BEGIN { p = 5000; if (c * p < 1000) p = int(1000 / c + 1); print p }')")
  fi
  "$SFB_ROOT/scripts/netns-cluster.sh" up "$1" --rate "$rate" "${budget[@]}"
}

# sfb-compare of one config (and variant) at h hosts, FMS with the first server count; FMS with
# each other server count in DIR-fmsS; one auto run.
measure() {  # <config> <dir> <hosts> <overrides...>
  local c=$1 dir=$2 h=$3
  shift 3
  local args=()
  for s in "$@"; do args+=(--set "$s"); done
  "$SFB_ROOT/scripts/sfb-compare.sh" --config "$c" --netns --np "$h" --servers "$s1" --repeats "$repeats" \
    --out "$dir" "${args[@]}"
  for S in "${servers_arr[@]:1}"; do
    "$SFB_ROOT/scripts/sfb-compare.sh" --config "$c" --netns --np "$h" --servers "$S" --repeats "$repeats" \
      --schemes fms --no-predict --out "$dir-fms$S" "${args[@]}"
  done
  rm -rf "$dir-auto"
  mkdir -p "$dir-auto"
  "$SFB_ROOT/scripts/netns-cluster.sh" run -- -np "$h" "$SFB_BUILD/apps/sfbd" --config "$c" --set output.dir="$dir-auto" \
    --set runtime.threads=1 --set comm.scheme=auto --set output.log_level=info "${args[@]}" > "$dir-auto/log" 2>&1 ||
    { tail -20 "$dir-auto/log"; exit 1; }
}

# The profile of a config with its FMS engine and S server ranks working: mpirun -np hosts+S.
profile_fms() {  # <config> <file> <hosts> <servers> <overrides...>
  local c=$1 file=$2 h=$3 S=$4
  shift 4
  local args=() d=${file%.json}
  for s in "$@"; do args+=(--set "$s"); done
  mkdir -p "$d"
  "$SFB_ROOT/scripts/netns-cluster.sh" run -- -np $((h + S)) "$SFB_BUILD/apps/sfbd" --config "$c" --set output.dir="$d" \
    --set output.log_level=warn --set runtime.threads=1 --set comm.scheme=fms --set fms.servers="$S" "${args[@]}" \
    --profile "$file" > "$d/log" 2>&1 || { tail -20 "$d/log"; exit 1; }
}

# Per link rate one cluster of the most hosts (a run on fewer takes the first ones; the others stay
# idle), and per config every host count back to back: the held-out rows are measured minutes after
# the profile that predicts them, not after every other config's runs. This machine's speed drifts
# by more than the predictor's errors over that time (the 512 job's all-reduce at 4 hosts and 300
# Mbit/s measured 0.111 s a clock in one run, 0.136-0.148 in two others the same day, and its
# profile, minutes before the first, 0.113): what the table measures is the predictor, not the drift.
if [ "$table_only" = 0 ]; then
  maxS=0 maxH=0
  for S in "${servers_arr[@]}"; do [ "$S" -gt "$maxS" ] && maxS=$S; done
  for h in "${hosts_arr[@]}"; do [ "$h" -gt "$maxH" ] && maxH=$h; done
  for rate in $rates; do
    cluster_up $((maxH + maxS))
    for c in $configs; do
      name=$(basename "$c" .toml)
      read -r -a base <<< "${sets[$name]:-}"
      for h in "${hosts_arr[@]}"; do
        measure "$c" "$out/$rate/$name-${h}h" "$h" "${base[@]}"
        # The profile every prediction comes from: the first host count's, on the config's own shape.
        if [ "$h" = "$first" ]; then
          cp "$out/$rate/$name-${h}h/profile.json" "$out/$rate/$name-profile.json"
          for S in "${servers_arr[@]}"; do profile_fms "$c" "$out/$rate/$name-profile-fms$S.json" "$h" "$S" "${base[@]}"; done
        fi
        if [ "$h" != "$first" ] && [ -n "${heldout_sets[$name]:-}" ]; then
          read -r -a more <<< "${heldout_sets[$name]}"
          measure "$c" "$out/$rate/$name@${heldout_name[$name]}-${h}h" "$h" "${base[@]}" "${more[@]}"
        fi
      done
    done
  done
  "$SFB_ROOT/scripts/netns-cluster.sh" down > /dev/null 2>&1 || true
fi

# The joined table: one row per (rate, hosts, config and shape, scheme).
col() {  # <table.md> <run> <column name>: the cell of that run's row
  awk -F'|' -v run="$2" -v name="$3" '{ for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i) }
    $2 == "run" { for (i = 1; i <= NF; i++) if ($i == name) c = i }
    c && $2 == run { print $c; exit }' "$1"
}
predict_csv() {  # <profile> <hosts> <schemes> <extra sfb-plan args...>: the CSV of the predictions
  local p=$1 h=$2 schemes=$3 tmp
  shift 3
  local layout=()
  [ "$(jq -r .ranks_on_host "$p")" = 1 ] || layout=(--one-host)
  tmp=$(mktemp)
  "$plan" --profile "$p" --nodes "$h" --links fitted "${layout[@]}" --schemes "$schemes" "$@" --csv "$tmp" > /dev/null
  cat "$tmp"
  rm -f "$tmp"
}
pct() { awk -v x="$1" 'BEGIN { if (x == "-" || x == "") print "-"; else printf "%.3g", 100 * x }'; }
# The hypervisor's steal while a run's repeats trained, from their summaries (not sfb-compare's
# table, which --table-only does not rebuild: an earlier build's table has a share of all the CPU
# time there): median (min-max) in %, - where no summary has cpu_stolen_share.
runs_steal() {  # <sfb-compare dir> <run>
  local s vals
  vals=$(for s in "$1/$2"-r*/summary.json; do
           if [ -f "$s" ]; then jq -r '.cpu_stolen_share // empty' "$s"; fi
         done | sort -g)
  if [ -z "$vals" ]; then echo -; return; fi
  echo "$vals" | awk "$SFB_MEDIAN_AWK"' { v[NR] = $1 } END { printf "%.3g (%.3g-%.3g)\n", 100 * median(), 100 * v[1], 100 * v[NR] }'
}
err() { awk -v p="$1" -v m="$2" 'BEGIN { if (m > 0 && p != "" && p != "-") printf "%+.1f%%", 100 * (p - m) / m; else print "-" }'; }
{
  echo "| link | hosts | config (shape) | scheme | measured s/clock: median (min-max) | predicted from the ${first}-host profile (FMS: with its servers) | error | predicted in place (same hosts, same shape) | error | measured winner | predicted winner | auto chose | cpu steal %: profile / runs |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for rate in $rates; do
    for h in "${hosts_arr[@]}"; do
      for c in $configs; do
        name=$(basename "$c" .toml)
        prof="$out/$rate/$name-profile.json"
        [ -f "$prof" ] || continue
        variants=("$name")
        [ "$h" != "$first" ] && [ -n "${heldout_name[$name]:-}" ] && variants+=("$name@${heldout_name[$name]}")
        for v in "${variants[@]}"; do
          dir="$out/$rate/$v-${h}h"
          [ -f "$dir/table.md" ] || continue
          extra=()
          [ "$v" != "$name" ] && read -r -a extra <<< "${heldout_plan[$name]}"
          schemes="sfb,halton,allreduce"
          for S in "${servers_arr[@]}"; do schemes+=",fms:$S"; done
          csv=$(predict_csv "$prof" "$h" "$schemes" "${extra[@]}")
          # Measured rows: sfb-compare's (FMS with the first server count) and the other FMS runs.
          rows=()
          for run in sfb halton allreduce fms; do rows+=("$run|$dir/table.md|$run-s0"); done
          for S in "${servers_arr[@]:1}"; do rows+=("fms:$S|$dir-fms$S/table.md|fms-s0"); done
          best_m="" best_ms="" best_p="" best_ps=""
          lines=() steals=()
          for row in "${rows[@]}"; do
            IFS='|' read -r label table run <<< "$row"
            [ -f "$table" ] || continue
            meas=$(col "$table" "$run" "s/clock")
            [ -n "$meas" ] || continue
            [ "$label" = fms ] && label="fms:$s1"
            key=$label
            [[ $key == fms:* ]] && key="fms:s${key#fms:}"
            pred=$(echo "$csv" | awk -F, -v s="$key" 'NR > 1 && $3 == s { print $6; exit }')
            fprof="$out/$rate/$name-profile-fms${label#fms:}.json"
            [[ $label == fms:* ]] && [ -f "$fprof" ] &&
              pred=$(predict_csv "$fprof" "$h" "$label" "${extra[@]}" | awk -F, 'NR > 1 { print $6; exit }')
            med=${meas%% *}
            inplace=-  # sfb-compare predicts its own runs from its own profile; other FMS runs have none
            [[ $label == fms:* && $label != "fms:$s1" ]] || inplace=$(col "$table" "$run" "predicted s/clock")
            # The hypervisor's steal while the predicting profile and these runs were timed.
            src_prof=$prof
            [[ $label == fms:* ]] && [ -f "$fprof" ] && src_prof=$fprof
            steal="$(pct "$(jq -r '.cpu_stolen_share // "-"' "$src_prof")") / $(runs_steal "$(dirname "$table")" "$run")"
            lines+=("| $rate | $h | $v | $label | $meas | $pred | $(err "$pred" "$med") | $inplace | $(err "$inplace" "$med") |")
            steals+=("$steal")
            if [ -z "$best_ms" ] || awk -v a="$med" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then best_m=$label best_ms=$med; fi
            if [ -n "$pred" ] && { [ -z "$best_ps" ] || awk -v a="$pred" -v b="$best_ps" 'BEGIN { exit !(a < b) }'; }; then best_p=$label best_ps=$pred; fi
          done
          chose=$(jq -r '.auto.chosen // "-"' "$dir-auto/summary.json" 2>/dev/null || echo "-")
          for i in "${!lines[@]}"; do echo "${lines[$i]} $best_m | $best_p | $chose | ${steals[$i]:--} |"; done
        done
      done
    done
  done
} > "$out/validation.md"
cat "$out/validation.md"
# The error summary: |error| of the held-out predictions, median and max.
errs=$(awk -F'|' 'NR > 2 && $8 ~ /%/ { e = $8; gsub(/[ %+]/, "", e); if (e < 0) e = -e; print e }' "$out/validation.md" | sort -g)
if [ -n "$errs" ]; then
  n=$(echo "$errs" | wc -l)
  med=$(echo "$errs" | awk "$SFB_MEDIAN_AWK"' { v[NR] = $1 } END { print median() }')
  echo -e "\nheld-out predictions: $n rows, |error| median $med%, max $(echo "$errs" | tail -1)%" | tee -a "$out/validation.md"
fi
# The hypervisor's steal while the rows' runs were timed (each row's median repeat; rows of an
# earlier build's runs have none): a row timed under a large one measured the neighbours too.
steals=$(awk -F'|' 'NR > 2 && $14 ~ /\// { split($14, a, "/"); v = a[2]; sub(/^ +/, "", v); sub(/ .*/, "", v)
                                         if (v != "-" && v != "") print v + 0 }' "$out/validation.md" | sort -g)
if [ -n "$steals" ]; then
  echo "$steals" | awk "$SFB_MEDIAN_AWK"' { v[NR] = $1 } END { printf "\ncpu steal while the rows were measured (the median of each row'"'"'s repeats): median %.3g%%, max %.3g%% of the CPU time the machine wanted, %d rows\n", median(), v[NR], NR }' |
    tee -a "$out/validation.md"
fi
