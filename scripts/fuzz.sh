#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 60):
#   scripts/fuzz.sh [SECONDS] [wire libsvm idx config checkpoint]
# Corpora grow in runs/fuzz/<target>/ (seeded from fuzz/seeds/); a crash leaves its input in
# runs/fuzz/crash-* and fails the script. The same build also holds the unit tests under
# ASan/UBSan (build-fuzz/tests/sfb_tests).
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(wire libsvm idx config checkpoint)
BUILD=${SFB_FUZZ_BUILD:-$SFB_ROOT/build-fuzz}
if [ ! -f "$BUILD/build.ninja" ]; then
  CXX=clang++ cmake -S "$SFB_ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSFB_FUZZ=ON \
    -DSFB_SANITIZE=address -DSFB_BUILD_BENCH=OFF > /dev/null
fi
cmake --build "$BUILD" -j "${SFB_JOBS:-2}" --target $(printf 'fuzz_%s ' "${TARGETS[@]}") ${SFB_FUZZ_EXTRA_TARGETS:-}
mkdir -p "$SFB_ROOT/runs/fuzz"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "${TARGETS[@]}"; do
  corpus="$SFB_ROOT/runs/fuzz/$t"
  mkdir -p "$corpus"
  echo "== fuzz_$t for ${SECONDS_EACH}s"
  seeds=()
  [ -d "$SFB_ROOT/fuzz/seeds/$t" ] && seeds=("$SFB_ROOT/fuzz/seeds/$t")
  "$BUILD/fuzz/fuzz_$t" "$corpus" "${seeds[@]}" -max_total_time="$SECONDS_EACH" -use_value_profile=1 \
    -rss_limit_mb=2048 -artifact_prefix="$SFB_ROOT/runs/fuzz/crash-$t-" -print_final_stats=1 2>&1 \
    | grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|crash-" || true
  if ls "$SFB_ROOT/runs/fuzz/crash-$t-"* > /dev/null 2>&1; then
    echo "fuzz_$t found a crash: $(ls "$SFB_ROOT/runs/fuzz/crash-$t-"*)"
    exit 1
  fi
done
echo "fuzzing: ${#TARGETS[@]} targets x ${SECONDS_EACH}s, no crashes"
