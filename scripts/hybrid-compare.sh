#!/usr/bin/env bash
# MG-WFBP's hybrid transport against dense all-reduces on the emulated cluster: the same CNN job
# (default configs/fashion_cnn_wide_fc.toml: two fc:2048 layers) under each planner, then one
# table of what each run measured next to what the planner predicted from the live profile:
# bytes per iteration and rank, iteration time (median after profiling), accuracy, the plan.
#
#   scripts/netns-cluster.sh up 4 --rate 1gbit
#   scripts/hybrid-compare.sh [--config F] [--ranks 4] [--iters 300] [--out runs/hybrid]
#                             [--planners "hybrid-optimal hybrid mgwfbp ddp"] [--table-only]
#
# --table-only re-joins the summaries of an earlier --out. Without a cluster (SFB_NETNS=0) the
# runs use plain mpirun on this machine.
set -euo pipefail
source "$(dirname "$0")/common.sh"  # SFB_ROOT, SFB_BUILD, sfb_mpirun
ROOT=$SFB_ROOT
BUILD=$SFB_BUILD
config=$ROOT/configs/fashion_cnn_wide_fc.toml
ranks=4
iters=300
out=$ROOT/runs/hybrid
planners="hybrid-optimal hybrid mgwfbp ddp"
table_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --planners) planners=$2; shift 2 ;;
    --table-only) table_only=1; shift ;;
    *) echo "hybrid-compare: unknown option $1" >&2; exit 2 ;;
  esac
done

run() {
  local planner=$1 dir=$out/$1
  rm -rf "$dir"
  mkdir -p "$dir"
  # One thread per rank, as the peer runs (bench/peer/ddp_cnn.py): the hosts share this machine's cores.
  local args=(--config "$config" --set "mgwfbp.planner=\"$planner\"" --set "stop.max_clocks=$iters"
    --set "eval.every=$iters" --set "output.dir=\"$dir\"" --set runtime.threads=1)
  echo "hybrid-compare: $planner, $ranks ranks, $iters iterations -> $dir" >&2
  if [ "${SFB_NETNS:-1}" = 1 ]; then
    "$ROOT/scripts/netns-cluster.sh" run -- -np "$ranks" "$BUILD/apps/sfbd" "${args[@]}" > "$dir/log" 2>&1
  else
    sfb_mpirun -np "$ranks" "$BUILD/apps/sfbd" "${args[@]}" > "$dir/log" 2>&1
  fi
}

if [ "$table_only" = 0 ]; then
  for p in $planners; do run "$p"; done
fi

/usr/bin/python3 - "$out" $planners <<'PY'
import json, sys, os
out, planners = sys.argv[1], sys.argv[2:]
rows = []
for p in planners:
    f = os.path.join(out, p, "summary.json")
    if not os.path.exists(f):
        print(f"hybrid-compare: no {f}", file=sys.stderr); sys.exit(1)
    rows.append((p, json.load(open(f))))
base = next((s for p, s in rows if p == "mgwfbp"), rows[0][1])
print(f"# hybrid-compare: {os.path.basename(rows[0][1]['config'])}, {rows[0][1]['ranks']} ranks, "
      f"{rows[0][1]['iterations']} iterations")
print()
print("| planner | plan | MB/iter measured | MB/iter predicted | iteration ms (median) | predicted ms | "
      "vs mgwfbp | accuracy % | replicas equal |")
print("|---|---|---|---|---|---|---|---|---|")
for p, s in rows:
    plan = s['plan'].replace('|', '\\|')  # inside a table cell
    print(f"| {p} | `{plan}` | {float(s['bytes_sent_per_iteration'])/1e6:.3f} | "
          f"{s['predicted_bytes_per_iteration']/1e6:.3f} | {float(s['iteration_us_median'])/1e3:.1f} | "
          f"{float(s['predicted_us'])/1e3:.1f} | "
          f"{float(s['iteration_us_median'])/float(base['iteration_us_median']):.2f}x | "
          f"{100*float(s['final_accuracy']):.2f} | {'yes' if s['checksums_equal'] else 'NO'} |")
PY
