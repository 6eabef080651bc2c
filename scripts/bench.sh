#!/usr/bin/env bash
# The update-path benchmarks (bench/update_bench.cc): the update kernel next to this machine's
# SGEMM peak and STREAM triad bandwidth (measured in the same run), serialisation, SF computation,
# and a 4-rank in-process run with its allocations per clock. Prints a table and keeps it, with
# the JSON, in runs/bench/. THREADS=n sets the OpenMP / Eigen threads per rank (default 1);
# extra arguments go to Google Benchmark (e.g. --benchmark_filter=Sparse).
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build sfb_bench
mkdir -p "$SFB_ROOT/runs/bench"
export OMP_NUM_THREADS=${THREADS:-1}
echo "== $(nproc) cores, OMP_NUM_THREADS=$OMP_NUM_THREADS, $(date -u +%FT%TZ)"
"$SFB_BUILD/bench/sfb_bench" --benchmark_counters_tabular=true \
  --benchmark_out="$SFB_ROOT/runs/bench/bench.json" --benchmark_out_format=json "$@" \
  2>&1 | grep -v '^\[' | tee "$SFB_ROOT/runs/bench/bench.txt"
echo "pct_of_peak: dense update GFLOP/s / SGEMM peak; pct_of_roofline: bytes the sparse update must"
echo "touch (each touched cache line of W read and written once, plus U and V) per second / STREAM triad."
