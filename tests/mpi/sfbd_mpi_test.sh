#!/usr/bin/env bash
# Real MPI: runs the daemon under `mpirun -np 4` and checks what it wrote.
#   bsp:    Fashion-MNIST under BSP reaches >= 82% test accuracy, every rank exits 0, and the
#           four final replicas of W have the same checksum.
#   ssp:    sparse synthetic data under SSP(s=2) with a slowed rank trains (>= 60% accuracy),
#           every pair is applied once per receiver, no rank ran more than 2 clocks ahead.
#   libsvm: sfb-datagen output read back as libsvm (sparse rows) trains to >= 80% accuracy.
#   signal: SIGTERM to every rank mid-run: all stop at one clock, write model and summary, exit 0.
set -euo pipefail
SFBD=$1
SRC=$2
MODE=$3
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() { OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 "$SFBD" "$@"; }
field() { sed -n "s/^ *\"$1\": \\(.*\\),\$/\\1/p" "$OUT/summary.json" | tr -d '"'; }
fail() { echo "FAIL: $*"; cat "$OUT/summary.json" 2>/dev/null; exit 1; }

case "$MODE" in
  bsp)
    if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
      echo "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)"; exit 1
    fi
    run --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT"
    acc=$(field final_accuracy)
    echo "final accuracy $acc"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.82) }' || fail "accuracy $acc < 0.82"
    [ "$(field consistency)" = "BSP" ] || fail "consistency"
    [ "$(field final_clock)" = "2000" ] || fail "final clock $(field final_clock)"
    sums=$(sed -n 's/^ *"rank_checksums": \[\(.*\)\],$/\1/p' "$OUT/summary.json" | tr -d '" ' | tr ',' '\n')
    [ "$(echo "$sums" | wc -l)" = 4 ] || fail "expected 4 checksums, got: $sums"
    [ "$(echo "$sums" | sort -u | wc -l)" = 1 ] || fail "replicas differ: $sums"
    [ -s "$OUT/model.bin" ] || fail "no model file"
    [ "$(wc -l < "$OUT/metrics.jsonl")" -ge 4 ] || fail "metrics lines"
    ;;
  ssp)
    run --config "$SRC/configs/synthetic_sparse.toml" --set output.dir="$OUT" --set runtime.slow_rank=2 \
        --set runtime.slow_ms=2 --set output.log_level=warn
    acc=$(field final_accuracy)
    echo "final accuracy $acc"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.6) }' || fail "accuracy $acc < 0.6"
    # 600 clocks x K = 32 pairs from each of 4 ranks, applied by every rank.
    n=$(grep -c '"pairs_applied": 76800,' "$OUT/summary.json")
    [ "$n" = 4 ] || fail "pairs_applied on $n ranks != 76800"
    n=$(grep -c '"pairs_received": 57600,' "$OUT/summary.json")
    [ "$n" = 4 ] || fail "pairs_received on $n ranks != 57600"
    leads=$(grep -o '"max_lead": [0-9]*' "$OUT/summary.json" | awk '{print $2}' | sort -n | tail -1)
    [ "$leads" -le 2 ] || fail "a rank ran $leads clocks ahead under staleness 2"
    ;;
  signal)
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 "$SFBD" \
      --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT" --set stop.max_clocks=100000000 \
      > "$OUT/log" 2>&1 &
    pid=$!
    # Wait until training runs (the first metrics line), then signal every rank.
    for _ in $(seq 1 300); do [ -s "$OUT/metrics.jsonl" ] && break; sleep 0.1; done
    [ -s "$OUT/metrics.jsonl" ] || fail "training did not start"
    pkill -TERM -f -- "--set output.dir=$OUT" || true
    wait "$pid" || true  # mpirun reports the signal itself; the ranks' own exits are checked below
    cat "$OUT/log" | tail -8
    grep -qE '"stop_reason": "(rank [0-9]+ received )?signal 15"' "$OUT/summary.json" || fail "stop reason"
    [ -s "$OUT/model.bin" ] || fail "no model file after SIGTERM"
    ! grep -q "fatal" "$OUT/log" || fail "a rank failed"
    clocks=$(grep -o '"clocks": [0-9]*' "$OUT/summary.json" | sort -u | wc -l)
    [ "$clocks" = 1 ] || fail "ranks stopped at different clocks"
    ;;
  libsvm)
    # sfb-datagen writes the synthetic rows as libsvm; sfbd trains on the file (sparse rows).
    DATAGEN=$4
    "$DATAGEN" --samples 4000 --features 300 --classes 5 --density 0.1 --out "$OUT/train.svm"
    "$DATAGEN" --samples 1000 --features 300 --classes 5 --density 0.1 --test --out "$OUT/test.svm"
    printf '[data]\nformat = "libsvm"\ntrain = "%s"\ntest = "%s"\nfeatures = 300\nclasses = 5\n[optimizer]\nlr = 0.5\nminibatch = 16\n[eval]\nevery = 100\n[stop]\nmax_clocks = 400\n[output]\ndir = "%s"\nlog_level = "warn"\n' \
      "$OUT/train.svm" "$OUT/test.svm" "$OUT" > "$OUT/job.toml"
    run --config "$OUT/job.toml"
    acc=$(field final_accuracy)
    echo "final accuracy $acc"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }' || fail "accuracy $acc < 0.8"
    ;;
  *) echo "unknown mode $MODE"; exit 2 ;;
esac
echo "PASS: $MODE"
