#!/usr/bin/env bash
# Kill-and-resume study: trains configs/test_fashion_small.toml to 3,000 clocks on 4 ranks
# uninterrupted, then once per kill point: kill -9 rank 2 right after the checkpoint at that clock,
# resume with --resume on 4 ranks, and compare. Prints one row per kill point.
#   scripts/kill-resume.sh [kill clocks...]   (default: 400 1400 2600; checkpoints every 200)
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build sfbd
POINTS=("$@")
[ ${#POINTS[@]} -gt 0 ] || POINTS=(400 1400 2600)
OUT="$SFB_ROOT/runs/kill-resume"
rm -rf "$OUT" && mkdir -p "$OUT"
SFBD="$SFB_BUILD/apps/sfbd"
CFG=(--config "$SFB_ROOT/configs/test_fashion_small.toml" --set stop.max_clocks=3000 --set eval.every=100
     --set checkpoint.path=ck.bin --set checkpoint.every=200 --set output.log_level=info)
acc() { sfb_field final_accuracy "$1/summary.json"; }
sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/full" > "$OUT/full.log" 2>&1
printf '%-12s %-14s %-12s %-12s %-16s %-14s\n' "killed after" "last progress" "lost clocks" "job ended in" "resumed accuracy" "uninterrupted"
for k in "${POINTS[@]}"; do
  d="$OUT/kill$k"
  mkdir -p "$d"
  sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$d" > "$d/log" 2>&1 &
  job=$!
  until grep -q "checkpoint at clock $k " "$d/log" 2> /dev/null; do sleep 0.05; done
  for p in $(pgrep -f -- "--set output.dir=$d"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2'; then victim=$p; fi
  done
  t0=$(date +%s%N)
  kill -9 "$victim"
  wait "$job" || true
  ended_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  last_ck=$(grep -o "checkpoint at clock [0-9]*" "$d/log" | tail -1 | awk '{print $4}')
  last=$(grep -o "clock *[0-9]*/3000" "$d/log" | tail -1 | tr -dc '0-9/' | cut -d/ -f1)
  sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$d" --resume "$d/ck.bin" > "$d/resume.log" 2>&1
  printf '%-12s %-14s %-12s %-12s %-16s %-14s\n' "$last_ck" "$last" "<= $((last - last_ck))" "${ended_ms} ms" "$(acc "$d")" "$(acc "$OUT/full")"
done
