#!/usr/bin/env bash
# The update-path benchmarks (bench/update_bench.cc): the update kernel next to this machine's
# SGEMM peak (OpenBLAS, 4096^3, one core) and STREAM triad bandwidth, both measured in the same
# run next to each row; serialisation, SF computation, and a 4-rank in-process run with its
# allocations per clock. Every row is repeated REPS times (default 5) and reported as its median.
# OpenBLAS picks its kernels by CPU; OPENBLAS_CORETYPE forces one. The benchmark runs twice: with
# OPENBLAS_CORETYPE as this shell has it (this environment sets Haswell) and with it unset (the
# kernels OpenBLAS detects). Tables and JSON go to runs/bench/. THREADS=n sets the OpenMP / BLAS
# threads per rank (default 1); extra arguments go to Google Benchmark (e.g. --benchmark_filter=Sparse).
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build sfb_bench
mkdir -p "$SFB_ROOT/runs/bench"
export OMP_NUM_THREADS=${THREADS:-1}
run_one() {  # $1: label, then Google Benchmark's arguments
  local label=$1
  shift
  echo "== $label: $(nproc --all) cores, OMP_NUM_THREADS=$OMP_NUM_THREADS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}, $(date -u +%FT%TZ)"
  "$SFB_BUILD/bench/sfb_bench" --benchmark_counters_tabular=true --benchmark_repetitions="${REPS:-5}" \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$SFB_ROOT/runs/bench/bench-$label.json" --benchmark_out_format=json "$@" \
    2>&1 | grep -v '^\[' | grep -E '^(-|Benchmark|.*_median)' | tee "$SFB_ROOT/runs/bench/bench-$label.txt"
}
label=coretype-${OPENBLAS_CORETYPE:-detected}
run_one "$label" "$@"
if [[ -n "${OPENBLAS_CORETYPE:-}" ]]; then
  (unset OPENBLAS_CORETYPE; run_one coretype-detected "$@")
fi
echo "pct_of_peak: dense update GFLOP/s / SGEMM peak; pct_of_roofline: bytes the sparse update must"
echo "touch (each touched cache line of W read and written once, plus U and V) per second / STREAM triad."
