#!/usr/bin/env bash
# The SFB paper's evaluation (Xie et al., "Distributed Machine Learning via Sufficient Factor
# Broadcasting", Figs. 7-16 and its table of costs) reproduced on emulated clusters: each figure's
# analogue at a size this machine runs, under every scheme sfb has, and each claim of the paper
# marked holds, partly or does not hold from the measurements (docs/paper.md has the full run).
#
#   scripts/paper-figures.sh [--quick] [--out DIR] [--only LIST] [--reuse] [--rate 1gbit]
#     --quick     a subset at smaller sizes (MLR only, fewer sizes, K, hosts and Q): 4 min here (full: 33)
#     --out DIR   where everything goes (default runs/paper, runs/paper-quick with --quick)
#     --only LIST comma list of experiments: size (Figs. 7, 8, 10, 14), ksweep (9), speedup (11, 12),
#                 staleness (13), halton (15, 16) (default: all)
#     --reuse     keep every group DIR already holds (DIR/<experiment>/<group>/median_runs.txt) and
#                 run the others; the figures and the table are rebuilt from all of them
#     --rate R    every host's link (tc tbf both ways; default 1gbit)
#
# Every run is one rank per emulated host (scripts/netns-cluster.sh: a network namespace, a CPU
# budget and a rate-limited link each), sfb-compare drives the schemes, and every number in the
# table is read back from the runs' summaries and metrics. Which CPU budget each experiment gave its
# hosts is in the table. Needs root, gnuplot, jq and python3 (scripts/install-deps.sh). Its hosts
# are its own (SFB_NETNS_PREFIX sfbpaper, SFB_NETNS_SUBNET 10.83.0 unless set).
# Writes DIR/paper.md (the claims table), DIR/fig*.png, DIR/fig*.dat and DIR/<experiment>/<group>/
# (sfb-compare's directories: table.md, the runs' metrics).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
quick=0 out="" only="size,ksweep,speedup,staleness,halton" reuse=0 rate=1gbit
bad() { echo "paper-figures: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --out) out=${2:-}; shift 2 || bad "--out needs a value" ;;
    --only) only=${2:-}; shift 2 || bad "--only needs a value" ;;
    --reuse) reuse=1; shift ;;
    --rate) rate=${2:-}; shift 2 || bad "--rate needs a value" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) bad "unknown option '$1' (paper-figures.sh --help)" ;;
  esac
done
[ -n "$out" ] || out=$([ "$quick" = 1 ] && echo runs/paper-quick || echo runs/paper)
for e in ${only//,/ }; do
  case "$e" in size|ksweep|speedup|staleness|halton) ;; *) bad "--only: unknown experiment '$e' (size, ksweep, speedup, staleness, halton)" ;; esac
done
[[ "$rate" =~ ^[1-9][0-9]{0,5}(kbit|mbit|gbit)$ ]] || bad "--rate must be like 100mbit or 1gbit, got '$rate'"
mkdir -p "$out" 2> /dev/null && [ -w "$out" ] || bad "--out: cannot create $out"
[ "$(id -u)" = 0 ] || bad "needs root (network namespaces and cgroups: scripts/netns-cluster.sh)"
for tool in gnuplot jq python3; do
  command -v "$tool" > /dev/null || bad "$tool is missing (scripts/install-deps.sh)"
done
[ -n "${SFB_NO_BUILD:-}" ] || sfb_build sfbd sfb-plan >&2
export SFB_NO_BUILD=1
out=$(cd "$out" && pwd)
netns=$here/netns-cluster.sh
# A cluster of its own (it is torn down and rebuilt per experiment): one a user has up under the
# default prefix for sfb-compare is left alone.
export SFB_NETNS_PREFIX=${SFB_NETNS_PREFIX:-sfbpaper} SFB_NETNS_SUBNET=${SFB_NETNS_SUBNET:-10.83.0}
trap '"$netns" down > /dev/null 2>&1 || true' EXIT
cfg=$SFB_ROOT/configs
started=$(date +%s)

cluster=""  # the hosts and budget of the cluster that is up
# compare <experiment> <group> <hosts> <cpus> sfb-compare args...: one sfb-compare group on <hosts>
# emulated hosts of <cpus> cores each (with one more for FMS's server when the group runs FMS).
compare() {
  local exp=$1 group=$2 hosts=$3 cpus=$4
  shift 4
  local dir=$out/$exp/$group
  if [ "$reuse" = 1 ] && [ -f "$dir/median_runs.txt" ]; then echo "== $exp/$group: kept"; return; fi
  if [ "$cluster" != "$hosts $cpus" ]; then
    "$netns" down > /dev/null 2>&1 || true
    "$netns" up "$hosts" --cpus "$cpus" --rate "$rate" > "$out/netns.log" 2>&1 || { cat "$out/netns.log"; exit 1; }
    cluster="$hosts $cpus"
  fi
  echo "== $exp/$group: $hosts hosts of $cpus core, $rate ($(( $(date +%s) - started )) s so far)"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$hosts $cpus $rate" > "$dir/cluster.txt"
  "$here/sfb-compare.sh" --netns --no-predict --out "$dir" "$@" > "$dir/compare.log" 2>&1 ||
    { tail -30 "$dir/compare.log"; exit 1; }
}
# size_sets <model> <size>: the --set arguments that give <model> its W of "<size>" (J x D).
size_sets() {
  local m=$1 J=${2%x*} D=${2#*x}
  case "$m" in
    mlr|l2mlr) echo "--set data.classes=$J --set data.features=$((D - 1))" ;;
    dml) echo "--set model.dim=$J --set data.features=$D" ;;
    sparse_coding) echo "--set data.features=$J --set model.atoms=$D" ;;
  esac
}
schemes_of() {  # <model>: every scheme the model runs under (the sharded scheme needs row statistics)
  case "$1" in sparse_coding) echo sfb,halton,fms,allreduce ;; *) echo sfb,halton,fms,allreduce,sharded ;; esac
}
has() { [[ ",$only," == *,$1,* ]]; }

if [ "$quick" = 1 ]; then
  size_models="mlr" sizes_mlr="256x256 512x512" size_clocks=30 size_stale="0,20"
  k_list="10 100" k_seconds=8 k_schemes=sfb,fms k_size=512x512
  sp_hosts="1 2 4" sp_cpus=0.4 sp_models="mlr" sp_schemes=sfb,fms,allreduce,sharded sp_stale="0" sp_clocks=30
  st_list="0,2,20" st_size=512x512 st_clocks=40 st_schemes=sfb,fms
  h_models="mlr" h_q="1,3" h_stale="0" h_clocks=40
else
  size_models="mlr l2mlr dml sparse_coding" sizes_mlr="256x256 1024x1024" size_clocks=50 size_stale="0,20"
  k_list="1 10 100 1000" k_seconds=20 k_schemes=sfb,halton,fms,allreduce,sharded k_size=1024x1024
  sp_hosts="1 2 4 8" sp_cpus=0.25 sp_models="mlr l2mlr dml sparse_coding" sp_schemes=sfb,halton,fms,allreduce,sharded
  sp_stale="0,20" sp_clocks=40
  st_list="0,2,10,20,50" st_size=1024x1024 st_clocks=60 st_schemes=sfb,halton,fms,allreduce
  h_models="mlr l2mlr" h_q="1,2,3,5" h_stale="0,20" h_clocks=60
fi
sizes_of() {  # <model>: its two W shapes (J x D), small and large
  case "$1" in
    mlr|l2mlr) echo "$sizes_mlr" ;;
    dml) [ "$quick" = 1 ] && echo "64x512 64x1024" || echo "64x512 128x2048" ;;
    sparse_coding) [ "$quick" = 1 ] && echo "256x64 512x128" || echo "256x64 1024x256" ;;
  esac
}

# Figs. 7, 8 (time to a fixed objective by model size, BSP and SSP 20), 10 (MLR under SSP 20) and
# 14 (bytes): 4 workers (+ FMS's server) of 0.4 core.
if has size; then
  for m in $size_models; do
    for s in $(sizes_of "$m"); do
      # shellcheck disable=SC2046
      compare size "$m-$s" 5 0.4 --config "$cfg/paper_$m.toml" --np 4 --schemes "$(schemes_of "$m")" \
        --staleness "$size_stale" --set stop.max_clocks="$size_clocks" $(size_sets "$m" "$s")
    done
  done
fi
# Fig. 9: MLR under BSP at several K, each run for the same wall time: samples per second and
# progress per sample.
if has ksweep; then
  for k in $k_list; do
    every=$(( k >= 1000 ? 1 : k >= 100 ? 5 : k >= 10 ? 40 : 200 ))
    # shellcheck disable=SC2046
    compare ksweep "k$k" 5 0.4 --config "$cfg/paper_mlr.toml" --np 4 --schemes "$k_schemes" --k "$k" \
      --set stop.max_seconds="$k_seconds" --set stop.max_clocks=1000000 --set eval.every="$every" \
      $(size_sets mlr "$k_size")
  done
fi
# Figs. 11 and 12: speedup against hosts, to the objective the largest cluster reaches in sp_clocks
# clocks (its worst run's); smaller clusters take P K samples a clock, so they get the clocks that
# hold the same samples, twice over, and stop at the target.
if has speedup; then
  max=${sp_hosts##* }
  for m in $sp_models; do
    sch=$([ "$m" = mlr ] && echo "$sp_schemes" || echo sfb,fms)
    s=$(sizes_of "$m" | awk '{ print $1 }')
    [ "$m" = mlr ] || [ "$m" = l2mlr ] && s=512x512
    # shellcheck disable=SC2046
    compare speedup "$m-h$max" $((max + 1)) "$sp_cpus" --config "$cfg/paper_$m.toml" --np "$max" --schemes "$sch" \
      --staleness "$sp_stale" --set stop.max_clocks="$sp_clocks" $(size_sets "$m" "$s")
    target=$(for f in "$out/speedup/$m-h$max"/*/summary.json; do jq -r .final_objective "$f"; done | sort -g | tail -1)
    echo "$target" > "$out/speedup/$m-target.txt"
    for n in $sp_hosts; do
      [ "$n" = "$max" ] && continue
      # shellcheck disable=SC2046
      compare speedup "$m-h$n" $((n + 1)) "$sp_cpus" --config "$cfg/paper_$m.toml" --np "$n" --schemes "$sch" \
        --staleness "$sp_stale" --target "$target" --set stop.target_objective="$target" \
        --set stop.max_clocks=$((2 * sp_clocks * max / n)) $(size_sets "$m" "$s")
    done
  done
fi
# Fig. 13: MLR, SFB and FMS (and, in the full run, Halton and the all-reduce; the sharded scheme is
# BSP only) at several staleness values: computation and waiting to converge.
if has staleness; then
  # shellcheck disable=SC2046
  compare staleness mlr 5 0.4 --config "$cfg/paper_mlr.toml" --np 4 --schemes "$st_schemes" --staleness "$st_list" \
    --set stop.max_clocks="$st_clocks" $(size_sets mlr "$st_size")
fi
# Figs. 15 and 16: Halton Q on 8 hosts (the paper's 12), MLR and L2-MLR, BSP and SSP 20.
if has halton; then
  for m in $h_models; do
    # shellcheck disable=SC2046
    compare halton "$m" 8 0.25 --config "$cfg/paper_$m.toml" --np 8 --schemes sfb,halton --q "$h_q" \
      --staleness "$h_stale" --set stop.max_clocks="$h_clocks" $(size_sets "$m" 512x512)
  done
fi
"$netns" down > /dev/null 2>&1 || true
echo "== figures and the claims table ($(( $(date +%s) - started )) s of runs)"
python3 "$here/paper_figures.py" --out "$out" --mode "$([ "$quick" = 1 ] && echo quick || echo full)" \
  --seconds "$(( $(date +%s) - started ))"
