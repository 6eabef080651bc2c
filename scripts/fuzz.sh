#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 60):
#   scripts/fuzz.sh [SECONDS] [wire libsvm idx config checkpoint]
# Each run starts from the kept corpus fuzz/corpus/<target>/ and the hand-made fuzz/seeds/<target>/,
# grows a working corpus in runs/fuzz/<target>/, and at the end merges into fuzz/corpus/<target>/
# only the inputs that add coverage (libFuzzer -merge=1), so the kept corpus stays small and every
# later run (and reviewer) starts where this one ended. Prints per target the executions, the
# kept corpus before and after, and findings; a crash leaves its input in runs/fuzz/crash-* and
# fails the script. The same build also holds the unit tests under ASan/UBSan
# (build-fuzz/tests/sfb_tests).
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(wire libsvm idx config checkpoint streams handshake)
BUILD=${SFB_FUZZ_BUILD:-$SFB_ROOT/build-fuzz}
if [ ! -f "$BUILD/build.ninja" ]; then
  CXX=clang++ cmake -S "$SFB_ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSFB_FUZZ=ON \
    -DSFB_SANITIZE=address -DSFB_BUILD_BENCH=OFF > /dev/null
fi
cmake --build "$BUILD" -j "${SFB_JOBS:-2}" --target $(printf 'fuzz_%s ' "${TARGETS[@]}") ${SFB_FUZZ_EXTRA_TARGETS:-}
mkdir -p "$SFB_ROOT/runs/fuzz"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
printf '%-11s %8s %14s %12s %12s %9s\n' target seconds executions "kept before" "kept after" findings > "$SFB_ROOT/runs/fuzz/summary.txt"
for t in "${TARGETS[@]}"; do
  corpus="$SFB_ROOT/runs/fuzz/$t"
  kept="$SFB_ROOT/fuzz/corpus/$t"
  mkdir -p "$corpus" "$kept"
  before=$(find "$kept" -type f | wc -l)
  echo "== fuzz_$t for ${SECONDS_EACH}s (kept corpus: $before inputs)"
  seeds=("$kept")
  [ -d "$SFB_ROOT/fuzz/seeds/$t" ] && seeds+=("$SFB_ROOT/fuzz/seeds/$t")
  "$BUILD/fuzz/fuzz_$t" "$corpus" "${seeds[@]}" -max_total_time="$SECONDS_EACH" -use_value_profile=1 \
    -rss_limit_mb=2048 -artifact_prefix="$SFB_ROOT/runs/fuzz/crash-$t-" -print_final_stats=1 \
    > "$SFB_ROOT/runs/fuzz/$t.log" 2>&1 || true
  grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|crash-" "$SFB_ROOT/runs/fuzz/$t.log" || true
  execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$SFB_ROOT/runs/fuzz/$t.log" | awk '{ print $2 }')
  findings=$(find "$SFB_ROOT/runs/fuzz" -maxdepth 1 -name "crash-$t-*" | wc -l)
  "$BUILD/fuzz/fuzz_$t" -merge=1 "$kept" "$corpus" > "$SFB_ROOT/runs/fuzz/$t.merge.log" 2>&1 || true
  after=$(find "$kept" -type f | wc -l)
  printf '%-11s %8s %14s %12s %12s %9s\n' "$t" "$SECONDS_EACH" "${execs:-?}" "$before" "$after" "$findings" \
    | tee -a "$SFB_ROOT/runs/fuzz/summary.txt"
  if [ "$findings" -gt 0 ]; then
    echo "fuzz_$t found a crash: $(ls "$SFB_ROOT/runs/fuzz/crash-$t-"*)"
    exit 1
  fi
done
cat "$SFB_ROOT/runs/fuzz/summary.txt"
echo "fuzzing: ${#TARGETS[@]} targets x ${SECONDS_EACH}s, no crashes"
