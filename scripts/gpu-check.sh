#!/usr/bin/env bash
# The CUDA checks, as one script for a machine with a GPU: builds with the CUDA layers, runs the
# `cuda` tests (CUDA layers against the CPU layers), trains the default CNN for a few hundred
# iterations on the GPU and on the CPU (one rank each, same seed and batch), and prints a table of
# step times; then the wide fully connected head (configs/fashion_cnn_wide_fc.toml) on the GPU with
# 2 ranks, hybrid transport (factors downloaded and all-gathered) against dense all-reduces; then
# save and resume on the GPU: a checkpoint written on the GPU resumed on the GPU against the
# uninterrupted GPU run, the GPU's model file evaluated on the CPU, a CPU checkpoint resumed on
# the GPU.
# Needs nvcc (/usr/local/cuda), cuBLAS, cuDNN and a CUDA device; prints why and exits 1 when
# no device answers.
#   scripts/gpu-check.sh [ITERATIONS]        (default 300)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/common.sh"  # sfb_field, sfb_mpirun
ITERS=${1:-300}
BUILD=${SFB_GPU_BUILD:-$ROOT/build-gpu}
OUT=${SFB_GPU_OUT:-$ROOT/runs/gpu-check}
mkdir -p "$OUT"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== configure and build with CUDA ($BUILD)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSFB_WITH_CUDA=ON -DSFB_BUILD_BENCH=OFF > "$OUT/configure.log"
cmake --build "$BUILD" -j "$(nproc)" --target sfbd sfb_cuda_tests > "$OUT/build.log" || { tail -30 "$OUT/build.log"; exit 1; }

echo "== cuda tests"
"$BUILD/tests/sfb_cuda_tests" 2>&1 | tee "$OUT/cuda_tests.log" | tail -15
if grep -q "SKIPPED" "$OUT/cuda_tests.log"; then
  echo "gpu-check: the cuda tests were skipped (no device answered); nothing to measure"; exit 1
fi
grep -q "FAILED" "$OUT/cuda_tests.log" && { echo "gpu-check: cuda tests failed"; exit 1; }

run() {  # <device> <out dir>
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} sfb_mpirun -np 1 "$BUILD/apps/sfbd" \
    --config "$ROOT/configs/fashion_cnn_mgwfbp.toml" --set device="$1" --set stop.max_clocks="$ITERS" \
    --set eval.every="$ITERS" --set output.dir="$2" --set output.log_level=warn
}
echo "== train $ITERS iterations on the GPU, then on the CPU"
run cuda "$OUT/cuda" | tee "$OUT/cuda.log" | tail -6
run cpu "$OUT/cpu" | tee "$OUT/cpu.log" | tail -6

echo
echo "| device | iterations | step (ms) | forward (ms) | backward (ms) | test accuracy |"
echo "|---|---|---|---|---|---|"
for d in cuda cpu; do
  s="$OUT/$d/summary.json"
  printf '| %s | %s | %.2f | %.2f | %.2f | %.2f %% |\n' "$d" "$(sfb_field iterations "$s")" \
    "$(awk -v x="$(sfb_field iteration_us "$s")" 'BEGIN { print x / 1000 }')" \
    "$(awk -v x="$(sfb_field forward_us "$s")" 'BEGIN { print x / 1000 }')" \
    "$(awk -v x="$(sfb_field backward_us "$s")" 'BEGIN { print x / 1000 }')" \
    "$(awk -v x="$(sfb_field final_accuracy "$s")" 'BEGIN { print 100 * x }')"
done
gpu=$(sfb_field iteration_us "$OUT/cuda/summary.json"); cpu=$(sfb_field iteration_us "$OUT/cpu/summary.json")
awk -v g="$gpu" -v c="$cpu" 'BEGIN { if (g > 0) printf "\nGPU step time is %.2fx faster than the CPU step (batch per rank as in the config)\n", c / g }'

echo
echo "== the wide FC head on the GPU, 2 ranks: hybrid-optimal against mgwfbp (dense), $((ITERS / 3)) iterations"
for p in hybrid-optimal mgwfbp; do
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} sfb_mpirun -np 2 "$BUILD/apps/sfbd" \
    --config "$ROOT/configs/fashion_cnn_wide_fc.toml" --set device=cuda --set mgwfbp.planner="$p" \
    --set stop.max_clocks=$((ITERS / 3)) --set eval.every=$((ITERS / 3)) --set output.dir="$OUT/wide-$p" \
    --set output.log_level=warn > "$OUT/wide-$p.log" 2>&1 || { tail -20 "$OUT/wide-$p.log"; exit 1; }
done
echo "| planner | plan | MB/iter and rank | step (ms, median) | predicted (ms) | accuracy | replicas equal |"
echo "|---|---|---|---|---|---|---|"
for p in hybrid-optimal mgwfbp; do
  s="$OUT/wide-$p/summary.json"
  printf '| %s | %s | %.3f | %.2f | %.2f | %.2f %% | %s |\n' "$p" "$(sfb_field plan "$s" | sed "s,|,\\\\|,g")" \
    "$(awk -v x="$(sfb_field bytes_sent_per_iteration "$s")" 'BEGIN { print x / 1e6 }')" \
    "$(awk -v x="$(sfb_field iteration_us_median "$s")" 'BEGIN { print x / 1000 }')" \
    "$(awk -v x="$(sfb_field predicted_us "$s")" 'BEGIN { print x / 1000 }')" \
    "$(awk -v x="$(sfb_field final_accuracy "$s")" 'BEGIN { print 100 * x }')" "$(sfb_field checksums_equal "$s")"
done

echo
echo "== save and resume on the GPU (1 rank, $((ITERS / 3)) + $((ITERS / 3)) iterations)"
half=$((ITERS / 3))
ck() {  # <device> <out dir> <iterations> [--resume FILE]: a run with a checkpoint every $half
  local dev=$1 dir=$2 n=$3; shift 3
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} sfb_mpirun -np 1 "$BUILD/apps/sfbd" \
    --config "$ROOT/configs/fashion_cnn_mgwfbp.toml" --set device="$dev" --set stop.max_clocks="$n" \
    --set eval.every="$half" --set checkpoint.path=ck.bin --set checkpoint.every="$half" \
    --set output.dir="$dir" --set output.log_level=warn "$@" > "$dir.log" 2>&1 || { tail -20 "$dir.log"; exit 1; }
}
ck cuda "$OUT/ck-full" $((2 * half))
ck cuda "$OUT/ck-half" "$half"
cp "$OUT/ck-half/ck.bin" "$OUT/ck-gpu-$half.bin"
ck cuda "$OUT/ck-half" $((2 * half)) --resume "$OUT/ck-gpu-$half.bin"
ck cpu "$OUT/ck-cpu" "$half"
cp "$OUT/ck-cpu/ck.bin" "$OUT/ck-cpu-$half.bin"
ck cuda "$OUT/ck-cpu" $((2 * half)) --resume "$OUT/ck-cpu-$half.bin"
"$BUILD/apps/sfbd" --config "$ROOT/configs/fashion_cnn_mgwfbp.toml" --set output.dir="$OUT/ck-eval" \
  --evaluate "$OUT/ck-full/model.bin" > "$OUT/ck-eval.json"
echo "| run | checksum | test accuracy |"
echo "|---|---|---|"
for r in ck-full ck-half ck-cpu; do
  printf '| %s | %s | %.2f %% |\n' "$r" "$(sfb_field checksum "$OUT/$r/summary.json")" \
    "$(awk -v x="$(sfb_field final_accuracy "$OUT/$r/summary.json")" 'BEGIN { print 100 * x }')"
done
printf '| GPU model on the CPU (--evaluate) | | %.2f %% |\n' "$(awk -v x="$(jq -r .test_accuracy "$OUT/ck-eval.json")" 'BEGIN { print 100 * x }')"
if [ "$(sfb_field checksum "$OUT/ck-full/summary.json")" = "$(sfb_field checksum "$OUT/ck-half/summary.json")" ]; then
  echo "GPU resume: bit for bit the uninterrupted GPU run"
else
  echo "GPU resume: not bit for bit (cuDNN may pick non-deterministic backward algorithms); compare the accuracies"
fi
