#!/usr/bin/env bash
# MG-WFBP mode under every planner: trains the config's CNN for N iterations per planner and prints
# measured vs predicted iteration time (the simulator on the live profile and a/b fit), locally or
# on the netns cluster (scripts/netns-cluster.sh up first).
#   scripts/mgwfbp-planners.sh [--np P] [--iters N] [--netns] [--config C] [--out DIR] [-- sfbd args]
set -euo pipefail
source "$(dirname "$0")/common.sh"
np=4 iters=300 netns=0 config="$SFB_ROOT/configs/fashion_cnn_mgwfbp.toml" out="$SFB_ROOT/runs/mgwfbp-planners"
planners="wfbp synceasgd mgwfbp optimal ddp"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --netns) netns=1; shift ;;
    --config) config=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --planners) planners=${2//,/ }; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "mgwfbp-planners: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "${SFB_NO_BUILD:-}" ] || sfb_build sfbd  # tests run it on an existing build
mkdir -p "$out"
rows=()
for p in $planners; do
  dir="$out/$p"
  args=(--config "$config" --set mgwfbp.planner="$p" --set stop.max_clocks="$iters" --set eval.every="$iters"
        --set runtime.threads=1 --set output.dir="$dir" --set output.log_level=warn "${extra[@]}")
  echo "== $p"
  if [ "$netns" = 1 ]; then
    "$SFB_ROOT/scripts/netns-cluster.sh" run -- -np "$np" "$SFB_BUILD/apps/sfbd" "${args[@]}" > "$dir.log" 2>&1 || { tail "$dir.log"; exit 1; }
  else
    sfb_mpirun -np "$np" "$SFB_BUILD/apps/sfbd" "${args[@]}" > "$dir.log" 2>&1 || { tail "$dir.log"; exit 1; }
  fi
  s="$dir/summary.json"
  m=$(sfb_field iteration_us "$s"); pr=$(sfb_field predicted_us "$s")
  rows+=("$(printf '| %s | %s | %s | %.2f | %.2f | %+.1f %% | %.2f | %.2f | %.2f | %.2f |' "$p" "$(sfb_field groups "$s")" "$(sfb_field plan "$s" | tr "|" "/")" \
    "$(awk -v x="$m" 'BEGIN{print x/1000}')" "$(awk -v x="$pr" 'BEGIN{print x/1000}')" \
    "$(awk -v a="$m" -v b="$pr" 'BEGIN{ if (b > 0) print 100 * (a - b) / b; else print 0 }')" \
    "$(awk -v x="$(sfb_field forward_us "$s")" 'BEGIN{print x/1000}')" "$(awk -v x="$(sfb_field backward_us "$s")" 'BEGIN{print x/1000}')" \
    "$(awk -v x="$(sfb_field comm_wait_us "$s")" 'BEGIN{print x/1000}')" "$(awk -v x="$(sfb_field final_accuracy "$s")" 'BEGIN{print 100*x}')")")
done
echo
echo "| planner | groups | plan | measured ms | predicted ms | measured vs predicted | forward ms | backward ms | comm not overlapped ms | test acc % |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
