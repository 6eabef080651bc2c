#!/usr/bin/env bash
# The CNN mode killed and resumed twice (issue 39's scenario): configs/fashion_cnn_mgwfbp.toml on 4
# ranks to 1,200 iterations with a checkpoint every 200, once uninterrupted and once with kill -9 of
# rank 2 right after the checkpoints at 400 and at 800, each time resumed with --resume. Checks and
# prints: metrics.jsonl's iterations and cumulative seconds rise across both resumes, every attempt's
# trace is on disk (trace.json, trace.from-400.json, trace.from-800.json), the final accuracy
# against the uninterrupted run's, and one plot of the continuous curve (sfb-plot).
#   scripts/cnn-kill-resume.sh [OUT_DIR]   (default runs/cnn-kill-resume; about 3 minutes here)
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_build sfbd
OUT=${1:-$SFB_ROOT/runs/cnn-kill-resume}
rm -rf "$OUT" && mkdir -p "$OUT"
export OMP_NUM_THREADS=1
SFBD="$SFB_BUILD/apps/sfbd"
CFG=(--config "$SFB_ROOT/configs/fashion_cnn_mgwfbp.toml" --set stop.max_clocks=1200 --set eval.every=100
     --set checkpoint.path=ck.bin --set checkpoint.every=200 --set output.trace_iters=20)
sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/full" > "$OUT/full.log" 2>&1
d="$OUT/killed"
mkdir -p "$d"
attempt() {  # $1: kill after this checkpoint iteration (empty: run to the end); the rest: sfbd args
  local at=$1 victim=
  shift
  sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$d" "$@" >> "$d/log" 2>&1 &
  local job=$!
  if [ -z "$at" ]; then wait "$job"; return; fi
  until grep -q "checkpoint at iteration $at written" "$d/log" 2> /dev/null; do sleep 0.05; done
  for p in $(pgrep -f -- "--set output.dir=$d"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2'; then victim=$p; fi
  done
  kill -9 "$victim"
  wait "$job" || true
  echo "killed rank 2 (pid $victim) after the checkpoint at iteration $at"
}
attempt 400
attempt 800 --resume "$d/ck.bin"
attempt "" --resume "$d/ck.bin"
jq -s -e '[.[].iteration] as $i | [.[].seconds] as $s | ($i | length) == 12 and $i == ($i | sort) and
          ([range(1; $s | length)] | all($s[.] > $s[. - 1]))' "$d/metrics.jsonl" > /dev/null &&
  echo "metrics.jsonl: 12 evaluations, iterations and cumulative seconds rise across both resumes" ||
  { echo "metrics.jsonl is not one continuous curve:"; jq -c '[.iteration, .seconds, .attempt_seconds]' "$d/metrics.jsonl"; exit 1; }
for t in trace.json trace.from-400.json trace.from-800.json; do
  [ -s "$d/$t" ] && echo "$t: $(wc -l < "$d/$t") lines" || { echo "missing $t"; exit 1; }
done
printf 'final test accuracy: killed and resumed twice %s, uninterrupted %s; seconds %s and %s\n' \
  "$(jq -r .final_accuracy "$d/summary.json")" "$(jq -r .final_accuracy "$OUT/full/summary.json")" \
  "$(jq -r '.seconds' "$d/summary.json")" "$(jq -r .seconds "$OUT/full/summary.json")"
"$SFB_ROOT/apps/sfb-plot" "$OUT/full" "$d" -o "$OUT/curves.png" && echo "plot: $OUT/curves.png"
