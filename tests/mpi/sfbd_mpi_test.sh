#!/usr/bin/env bash
# Real MPI: runs the daemon under `mpirun -np 4` and checks what it wrote.
#   bsp:    Fashion-MNIST under BSP reaches >= 82% test accuracy, every rank exits 0, and the
#           four final replicas of W have the same checksum.
#   ssp:    sparse synthetic data under SSP(s=2) with a slowed rank trains (>= 60% accuracy),
#           every pair is applied once per receiver, no rank ran more than 2 clocks ahead.
#   libsvm: sfb-datagen output read back as libsvm (sparse rows) trains to >= 80% accuracy.
#   killresume: kill -9 of a rank ends the job naming it; --resume on 3 ranks finishes it.
#   signal: SIGTERM to every rank mid-run: all stop at one clock, write model and summary, exit 0.
#   hybrid: the CNN mode with the hybrid planner (fully connected layers may travel as sufficient
#           factors): profiling times the factor all-gather, the replicas end bitwise equal, the
#           bytes sent per iteration are the plan's by the model, the trace names each transport.
set -euo pipefail
SFBD=$1
SRC=$2
MODE=$3
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
source "$SRC/scripts/common.sh"
run() { sfb_mpirun -np 4 "$SFBD" "$@"; }
field() { sfb_field "$1" "$OUT/summary.json"; }
# per_rank FILTER: the jq FILTER applied to every rank's entry of the summary, one line each.
per_rank() { jq -r ".per_rank[] | $1" "$OUT/summary.json"; }
fail() { echo "FAIL: $*"; cat "$OUT/summary.json" 2>/dev/null; exit 1; }

case "$MODE" in
  hybrid)
    run --config "$SRC/configs/fashion_cnn_wide_fc.toml" --set output.dir="$OUT" \
      --set cnn.layers=conv:8:5:2,relu,pool:2,fc:512,relu,fc:10 --set stop.max_clocks=40 --set eval.every=40 \
      --set mgwfbp.profile_iters=5 > "$OUT/log" 2>&1 || { cat "$OUT/log"; fail "sfbd exited non-zero"; }
    grep -q "factor all-gather fit" "$OUT/log" || { cat "$OUT/log"; fail "no all-gather fit in the log"; }
    echo "plan $(field plan), accuracy $(field final_accuracy)"
    [ "$(field checksums_equal)" = true ] || fail "replicas differ"
    jq -e '.contention.cpu_stolen_share | type == "number" and . >= 0 and . <= 1' "$OUT/summary.json" > /dev/null ||
      fail "contention.cpu_stolen_share: $(jq -c .contention "$OUT/summary.json")"
    awk -v a="$(field final_accuracy)" 'BEGIN { exit !(a >= 0.5) }' || fail "accuracy below 0.5"
    got=$(field bytes_sent_per_iteration)
    want=$(field predicted_bytes_per_iteration)
    # Payload by the model; the wire adds 24-byte all-reduce segment heads and 56-byte SF headers.
    awk -v g="$got" -v w="$want" 'BEGIN { exit !(w > 0 && g >= w && g < 1.01 * w) }' ||
      fail "bytes per iteration $got, the plan predicts $want"
    n=$(jq '[.[] | select(.args.transport != null)] | length' "$OUT/trace.json")
    [ "$n" -gt 0 ] || fail "no group with a transport in the trace"
    grep -qx "name,params,t_b,t_f,sf,t_sf" "$OUT/profile.csv" || fail "profile.csv has no factor columns"
    [ "$(grep -vc '^#' "$OUT/profile.csv")" = 4 ] || fail "profile.csv: expected a header and 3 layers"
    ;;
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
    sums=$(jq -r '.rank_checksums[]' "$OUT/summary.json")
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
    n=$(per_rank .pairs_applied | grep -cx 76800)
    [ "$n" = 4 ] || fail "pairs_applied on $n ranks != 76800"
    n=$(per_rank .pairs_received | grep -cx 57600)
    [ "$n" = 4 ] || fail "pairs_received on $n ranks != 57600"
    leads=$(per_rank .max_lead | sort -n | tail -1)
    [ "$leads" -le 2 ] || fail "a rank ran $leads clocks ahead under staleness 2"
    ;;
  signal)
    sfb_mpirun -np 4 "$SFBD" \
      --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT" --set stop.max_clocks=100000000 \
      > "$OUT/log" 2>&1 &
    pid=$!
    # Wait until training runs (the first metrics line), then signal every rank.
    for _ in $(seq 1 300); do [ -s "$OUT/metrics.jsonl" ] && break; sleep 0.1; done
    [ -s "$OUT/metrics.jsonl" ] || fail "training did not start"
    pkill -TERM -f -- "--set output.dir=$OUT" || true
    wait "$pid" || true  # mpirun reports the signal itself; the ranks' own exits are checked below
    cat "$OUT/log" | tail -8
    [ "$(field stop_reason)" = signal ] || fail "stop reason $(field stop_reason)"
    field stop_detail | grep -qxE 'rank [0-9]+ received signal 15' || fail "stop detail $(field stop_detail)"
    [ -s "$OUT/model.bin" ] || fail "no model file after SIGTERM"
    ! grep -q "fatal" "$OUT/log" || fail "a rank failed"
    clocks=$(per_rank .clocks | sort -u | wc -l)
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
  killresume)
    # kill -9 of rank 2 mid-run: mpirun ends the job within 60 s naming rank 2; --resume from the
    # last checkpoint (every 200 clocks) then finishes the job, losing at most 200 clocks.
    ck=(--set checkpoint.path=ck.bin --set checkpoint.every=200 --set eval.every=100 --set output.log_level=info)
    sfb_mpirun -np 4 "$SFBD" \
      --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT" --set stop.max_clocks=3000 "${ck[@]}" \
      > "$OUT/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do grep -q "checkpoint at clock 400" "$OUT/log" && break; sleep 0.1; done
    grep -q "checkpoint at clock 400" "$OUT/log" || fail "no checkpoint at clock 400: $(tail -3 "$OUT/log")"
    victim=""
    for p in $(pgrep -f -- "--set output.dir=$OUT"); do
      if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2'; then victim=$p; fi
    done
    [ -n "$victim" ] || fail "rank 2 not found"
    killed_at=$(date +%s)
    kill -9 "$victim"
    code=0
    wait "$pid" || code=$?
    took=$(( $(date +%s) - killed_at ))
    echo "mpirun exited with $code, $took s after the kill"
    [ "$code" != 0 ] || fail "the job did not fail"
    [ "$took" -le 60 ] || fail "the job took $took s to end after the kill"
    grep -q "rank 2" "$OUT/log" || fail "the lost rank is not named: $(tail -5 "$OUT/log")"
    last_ck=$(grep -o "checkpoint at clock [0-9]*" "$OUT/log" | tail -1 | awk '{print $4}')
    last_clock=$(grep -o "clock *[0-9]*/3000" "$OUT/log" | tail -1 | tr -dc '0-9/' | cut -d/ -f1)
    echo "last checkpoint at clock $last_ck, last progress line at clock $last_clock"
    [ $((last_clock - last_ck)) -le 200 ] || fail "more than 200 clocks since the checkpoint"
    sfb_mpirun -np 3 "$SFBD" \
      --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT" --set stop.max_clocks=3000 "${ck[@]}" \
      --resume "$OUT/ck.bin" > "$OUT/log2" 2>&1 || fail "resume failed: $(tail -5 "$OUT/log2")"
    grep -q "resuming from $OUT/ck.bin at clock $last_ck" "$OUT/log2" || fail "resume clock"
    [ "$(field final_clock)" = 3000 ] || fail "final clock $(field final_clock)"
    acc=$(field final_accuracy)
    echo "resumed on 3 ranks from clock $last_ck: final accuracy $acc"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.82) }' || fail "accuracy $acc < 0.82"
    ;;
  *) echo "unknown mode $MODE"; exit 2 ;;
esac
echo "PASS: $MODE"
