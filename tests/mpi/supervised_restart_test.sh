#!/usr/bin/env bash
# sfb-run restarts a job whose ranks die: 4 ranks, BSP, checkpoints every 100 clocks; rank 0 is
# killed with SIGKILL after the checkpoint at clock 400, then rank 2 of the restarted job after
# the checkpoint at clock 1400. The supervised job must finish (exit 0) after exactly 2 restarts,
# each resumed from the newest checkpoint and logged with at most checkpoint.every clocks lost,
# and its final W must equal the uninterrupted run's bit for bit. Then --max-restarts 0 gives up
# (exit 5) at the first failure; a SIGSTOPped rank ends the attempt within the peer timeout and
# --shrink restarts the job on 3 ranks; SIGTERM to sfb-run stops the job with a final checkpoint
# and model at its final clock (exit 6); a config without checkpoint.path is refused (exit 2).
#   supervised_restart_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
OUT=$(mktemp -d)
trap 'pkill -9 -f -- "$OUT" 2> /dev/null || true; rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; [ -f "$OUT/sup.log" ] && tail -20 "$OUT/sup.log"; exit 1; }
source "$SRC/tests/mpi/lib.sh"
export OMP_NUM_THREADS=1
RUN="$SRC/apps/sfb-run"
CFG=(--config "$SRC/configs/test_fashion_small.toml" --set stop.max_clocks=3000 --set eval.every=100
     --set checkpoint.path=ck.bin --set checkpoint.every=100 --set output.log_level=info)

echo "== uninterrupted"
sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/full" > "$OUT/full.log" 2>&1 || { cat "$OUT/full.log"; fail "uninterrupted run"; }
want=$(jq -r '.rank_checksums[0]' "$OUT/full/summary.json")

wait_sup() {  # waits for the supervisor; its exit code in rc
  rc=0
  wait "$sup" || rc=$?
}
wait_for() {  # <text> <file>: while the supervisor runs
  until grep -q "$1" "$2" 2> /dev/null; do
    kill -0 "$sup" 2> /dev/null || fail "the supervisor ended before '$1' appeared in $2"
    sleep 0.02
  done
}

echo "== supervised, two ranks killed"
"$RUN" --max-restarts 3 -- "${SFB_MPIRUN[@]}" -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/sup" 2> "$OUT/sup.log" &
sup=$!
kill_rank 0 clock 400 "$OUT/sup" 1
kill_rank 2 clock 1400 "$OUT/sup" 2
wait_sup
cat "$OUT/sup.log"
[ $rc = 0 ] || fail "sfb-run exit code $rc"
[ "$(grep -c "failed: exit code" "$OUT/sup.log")" = 2 ] || fail "not two failures logged"
grep -q "restart 1 of at most 3: from clock [0-9]*" "$OUT/sup.log" || fail "restart 1"
grep -q "the job finished (attempt 3, 2 restart(s))" "$OUT/sup.log" || fail "not finished on attempt 3"
for lost in $(grep -o "clocks lost: [0-9a-z]*" "$OUT/sup.log" | awk '{ print $3 }'); do
  [ "$lost" != unknown ] && [ "$lost" -le 100 ] || fail "lost $lost clocks (checkpoint.every = 100)"
done
# Each restart resumed from the newest checkpoint when its rank died (the kill lands just after the
# checkpoint at 400 or 1400; a faster job may have written the next one first).
n=1
for c in $(grep -o "failed: .*checkpoint at clock [0-9]*" "$OUT/sup.log" | grep -o "clock [0-9]*$" | awk '{ print $2 }'); do
  n=$((n + 1))
  grep -q "resuming from $OUT/sup/ck.bin at clock $c " "$OUT/sup/sfb-run/attempt-$n.log" || fail "attempt $n did not resume from clock $c"
  echo "attempt $n resumed from clock $c"
done
[ $n = 3 ] || fail "$((n - 1)) resumes"
got=$(jq -r '.rank_checksums[0]' "$OUT/sup/summary.json")
[ "$got" = "$want" ] || fail "supervised W $got, uninterrupted $want"
echo "W bit for bit equal: $got"
# The metrics file continues across the restarts: the same clocks and objectives as uninterrupted.
diff <(jq -c '[.clock, .objective]' "$OUT/full/metrics.jsonl") <(jq -c '[.clock, .objective]' "$OUT/sup/metrics.jsonl") \
  || fail "the supervised run's metrics differ from the uninterrupted run's"

echo "== --max-restarts 0 gives up at the first failure"
"$RUN" --max-restarts 0 -- "${SFB_MPIRUN[@]}" -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/once" 2> "$OUT/sup.log" &
sup=$!
kill_rank 1 clock 200 "$OUT/once" 1
wait_sup
[ $rc = 5 ] || fail "exit code $rc, expected 5"
grep -q "giving up: 1 failures, --max-restarts 0" "$OUT/sup.log" || fail "no giving-up line"

echo "== a SIGSTOPped rank is found within runtime.peer_timeout_s and the job restarts on fewer ranks (--shrink)"
"$RUN" --shrink --min-ranks 2 -- "${SFB_MPIRUN[@]}" -np 4 "$SFBD" "${CFG[@]}" --set runtime.peer_timeout_s=3 \
  --set stop.max_clocks=1500 --set output.dir="$OUT/stop" 2> "$OUT/sup.log" &
sup=$!
wait_for "checkpoint at clock 300 " "$OUT/stop/sfb-run/attempt-1.log"
for p in $(pgrep -f -- "output.dir=$OUT/stop"); do
  [ "$(cat /proc/$p/comm 2> /dev/null)" = sfbd ] || continue
  tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=3" && kill -STOP "$p" && echo "stopped rank 3 (pid $p)"
done
t0=$(date +%s)
until grep -q "attempt 1 failed" "$OUT/sup.log" 2> /dev/null; do
  [ $(( $(date +%s) - t0 )) -lt 60 ] || fail "the stopped rank was not found in 60 s"
  sleep 0.1
done
echo "attempt 1 ended $(( $(date +%s) - t0 )) s after the SIGSTOP (peer_timeout_s = 3)"
wait_sup
cat "$OUT/sup.log"
[ $rc = 0 ] || fail "exit code $rc after the SIGSTOP"
grep -q "attempt 2 on 3 ranks" "$OUT/sup.log" || fail "not restarted on 3 ranks"
grep -q "rank 3" "$OUT/stop/sfb-run/attempt-1.log" || fail "the stopped rank was not named"

echo "== SIGTERM to sfb-run stops the job at a common clock with a final checkpoint (exit 6)"
"$RUN" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${CFG[@]}" --set stop.max_clocks=1000000 --set output.dir="$OUT/term" \
  2> "$OUT/sup.log" &
sup=$!
wait_for "checkpoint at clock 300 " "$OUT/term/sfb-run/attempt-1.log"
kill -TERM $sup
wait_sup
[ $rc = 6 ] || fail "exit code $rc after SIGTERM, expected 6"
grep -q "stopped by a signal" "$OUT/sup.log" || fail "no stop line"
c=$(od -An -t d8 -j 32 -N 8 "$OUT/term/ck.bin" | tr -d ' ')
[ "$c" -ge 300 ] || fail "final checkpoint at clock $c"
grep -q "signal 15" "$OUT/term/sfb-run/attempt-1.log" || fail "the job did not see the signal"
# The ranks (not mpirun, which would kill them within a second) got the signal: the job stopped at
# a common clock and wrote its final checkpoint, model and summary.
jq -e '.stop_reason == "signal" and (.stop_detail | test("received signal 15"))' "$OUT/term/summary.json" > /dev/null ||
  fail "no summary with stop_reason signal: $(jq -c '[.stop_reason, .stop_detail]' "$OUT/term/summary.json")"
[ -s "$OUT/term/model.bin" ] || fail "no final model after SIGTERM"
[ "$(jq -r .final_clock "$OUT/term/summary.json")" = "$c" ] || fail "the final checkpoint is not at the final clock"
echo "stopped; final checkpoint at clock $c"

echo "== a job without checkpoint.path is refused"
rc=0
"$RUN" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" --config "$SRC/configs/test_fashion_small.toml" 2> "$OUT/nock.log" || rc=$?
[ $rc = 2 ] && grep -q "no checkpoint.path" "$OUT/nock.log" || { cat "$OUT/nock.log"; fail "no-checkpoint: exit $rc"; }
echo PASS
