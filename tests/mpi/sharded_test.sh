#!/usr/bin/env bash
# comm.scheme = "sharded" end to end under mpirun: 3 ranks train sparse MLR with checkpoints (the
# objective falls, bytes per clock match the formula within 2%, every rank holds a block of W, the
# model file is written from the blocks); the checkpoint resumes on 2 ranks (re-sharded) to the run's
# end; --evaluate of the model file reports the run's final accuracy; SSP, SDCA and sparse coding
# are refused with exit 2 naming why, before any work. comm.scheme = "auto" chooses the scheme where
# the recorded profile predicts it fastest (over TCP), and, without a profile, where W does not fit
# replicated under the address-space limit that refuses comm.scheme = "sfb" (ulimit -v). SIGTERM to
# one rank stops every rank at the same clock with the model and a checkpoint written; kill -9 of one
# rank ends the job naming it, and --resume from the last checkpoint finishes the job.
#   sharded_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
CFG="$SRC/configs/synthetic_sparse.toml"
COMMON=(--set comm.scheme='"sharded"' --set sfb.staleness=0 --set eval.every=20 --set eval.train_sample=500
  --set stop.divergence_factor=0)
run() {
  local np=$1
  shift
  sfb_mpirun -np "$np" "$SFBD" --config "$CFG" "${COMMON[@]}" "$@"
}

echo "== 3 ranks, 120 clocks, a checkpoint every 40"
run 3 --set stop.max_clocks=120 --set checkpoint.every=40 --set checkpoint.path='"ckpt.bin"' \
  --set "output.dir=\"$OUT/a\"" > "$OUT/a.log" 2>&1 || { cat "$OUT/a.log"; fail "run a"; }
S="$OUT/a/summary.json"
[ "$(jq -r .scheme "$S")" = sharded ] || fail "scheme $(jq -r .scheme "$S")"
[ "$(jq -r .final_clock "$S")" = 120 ] || fail "final_clock $(jq -r .final_clock "$S")"
first=$(head -1 "$OUT/a/metrics.jsonl" | jq -r .objective)
last=$(jq -r .final_objective "$S")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "the objective did not fall: $first -> $last"
acc=$(jq -r .final_accuracy "$S")
awk -v a="$acc" 'BEGIN { exit !(a > 0.2) }' || fail "test accuracy $acc"
measured=$(jq -r .bytes_per_clock "$S")
theory=$(jq -r .theory_bytes_per_clock "$S")
awk -v m="$measured" -v t="$theory" 'BEGIN { r = m / t; exit !(r > 0.98 && r < 1.02) }' ||
  fail "bytes per clock $measured, theory $theory"
[ "$(jq -r .checksums_equal "$S")" = null ] || fail "checksums_equal should be null for blocks"
grep -q "this rank's block of W (7 of 20 rows" "$OUT/a.log" || fail "no block in the memory estimate"
grep -q "checkpoint at clock 80 written" "$OUT/a.log" || fail "no checkpoint at clock 80"
[ -s "$OUT/a/model.bin" ] || fail "no model file"

echo "== the last checkpoint resumes on 2 ranks (re-sharded)"
cp "$OUT/a/ckpt.bin" "$OUT/ckpt120.bin"
run 2 --set stop.max_clocks=150 --set "output.dir=\"$OUT/b\"" --resume "$OUT/ckpt120.bin" > "$OUT/b.log" 2>&1 ||
  { cat "$OUT/b.log"; fail "resume"; }
grep -q "resuming from $OUT/ckpt120.bin at clock 120" "$OUT/b.log" || { cat "$OUT/b.log"; fail "resume clock"; }
[ "$(jq -r .final_clock "$OUT/b/summary.json")" = 150 ] || fail "resumed final_clock"

echo "== --evaluate the model file"
"$SFBD" --config "$CFG" --set eval.train_sample=500 --evaluate "$OUT/a/model.bin" > "$OUT/eval.json" 2> "$OUT/eval.err" ||
  { cat "$OUT/eval.err"; fail "evaluate"; }
[ "$(jq -r .test_accuracy "$OUT/eval.json")" = "$acc" ] || fail "evaluate accuracy $(jq -r .test_accuracy "$OUT/eval.json"), run $acc"
echo "== --evaluate sharded on 2 ranks (no rank holds W): the same numbers"
sfb_mpirun -np 2 "$SFBD" --config "$CFG" "${COMMON[@]}" --evaluate "$OUT/a/model.bin" > "$OUT/eval2.json" \
  2> "$OUT/eval2.err" || { cat "$OUT/eval2.err"; fail "sharded evaluate"; }
[ "$(jq -r .scheme "$OUT/eval2.json")" = sharded ] || { cat "$OUT/eval2.json"; fail "sharded evaluate: scheme"; }
[ "$(jq -r .test_accuracy "$OUT/eval2.json")" = "$acc" ] || fail "sharded evaluate accuracy $(jq -r .test_accuracy "$OUT/eval2.json")"
awk -v a="$(jq -r .train_objective "$OUT/eval.json")" -v b="$(jq -r .train_objective "$OUT/eval2.json")" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * a) }' || fail "sharded evaluate's train objective"

# The pid of rank $2 of the run whose output.dir is $1 (by its MPI environment).
rank_pid() {
  for p in $(pgrep -f -- "output.dir=\"$1\""); do
    tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
  done
  true
}
LONG=(--set stop.max_clocks=100000000 --set checkpoint.every=50 --set checkpoint.path='"ck.bin"'
  --set output.log_level=info)
# start_long NAME: a long run on 3 ranks into $OUT/NAME, in the background (its mpirun's pid in
# $pid), once it has checkpointed clock 100; rank 1's pid in $victim.
start_long() {
  run 3 "${LONG[@]}" --set "output.dir=\"$OUT/$1\"" > "$OUT/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q "checkpoint at clock 100" "$OUT/$1.log" && break; sleep 0.1; done
  victim=$(rank_pid "$OUT/$1" 1)
  [ -n "$victim" ] || { cat "$OUT/$1.log"; fail "$1: rank 1 not found"; }
}
echo "== SIGTERM to one rank: every rank stops at the same clock, writing the model and a checkpoint"
start_long sig
kill -TERM "$victim"
wait "$pid" || { tail -20 "$OUT/sig.log"; fail "SIGTERM to one rank: mpirun failed"; }
S="$OUT/sig/summary.json"
[ "$(jq -r .stop_reason "$S")" = signal ] || fail "stop reason $(jq -r .stop_reason "$S")"
jq -r .stop_detail "$S" | grep -qxE "rank [0-9]+ received signal 15" || fail "stop detail $(jq -r .stop_detail "$S")"
[ -s "$OUT/sig/model.bin" ] || fail "no model file after SIGTERM"
grep -q "checkpoint at clock $(jq -r .final_clock "$S") written" "$OUT/sig.log" || fail "no checkpoint at the stop"

echo "== kill -9 of one rank: the job ends naming it; --resume finishes from the last checkpoint"
start_long k9
kill -9 "$victim"
set +e
wait "$pid"
rc=$?
set -e
[ $rc != 0 ] || fail "kill -9 of a rank: mpirun exited 0"
# Named by rank 0 (its connection to rank 1 broke) or by mpirun (rank 1 killed), whichever is first.
grep -qE "connection to rank 1 |process rank 1 " "$OUT/k9.log" || { tail -20 "$OUT/k9.log"; fail "the lost rank is not named"; }
at=$(grep -o "checkpoint at clock [0-9]*" "$OUT/k9.log" | tail -1 | awk '{ print $4 }')
[ -n "$at" ] || { tail -20 "$OUT/k9.log"; fail "no checkpoint before the kill"; }
run 3 --set stop.max_clocks=$((at + 60)) --set "output.dir=\"$OUT/k9r\"" --resume "$OUT/k9/ck.bin" \
  > "$OUT/k9r.log" 2>&1 || { tail -20 "$OUT/k9r.log"; fail "resume after kill -9"; }
[ "$(jq -r .final_clock "$OUT/k9r/summary.json")" = $((at + 60)) ] || fail "the resumed run did not finish"

echo "== refused before any work"
for bad in "sfb.staleness=2:BSP only" "model.name=\"l2mlr\" --set model.solver=\"sdca\":model.solver = \"sdca\"" \
  "model.name=\"sparse_coding\":lasso over the whole dictionary"; do
  set +e
  # shellcheck disable=SC2086
  sfb_mpirun -np 2 "$SFBD" --config "$CFG" "${COMMON[@]}" --set ${bad%%:*} --set "output.dir=\"$OUT/c\"" \
    > "$OUT/c.log" 2>&1
  rc=$?
  set -e
  [ $rc = 2 ] && grep -qF "${bad#*:}" "$OUT/c.log" || { tail -5 "$OUT/c.log"; fail "${bad%%:*}: exit $rc"; }
done
echo "== auto: a recorded profile that predicts the sharded scheme fastest (4 ranks, TCP)"
sfb_mpirun -np 4 "$SFBD" --config "$SRC/configs/compare_mlr_2048_k16.toml" --set data.synthetic_samples=4096 \
  --set stop.max_clocks=6 --set eval.every=3 --set comm.scheme=auto --set 'comm.transport="tcp"' \
  --set "comm.auto_profile=\"$SRC/tests/data/scheme_profile_mlr2048_k16_4h_eval.json\"" --set output.log_level=info \
  --set "output.dir=\"$OUT/auto\"" > "$OUT/auto.log" 2>&1 || { cat "$OUT/auto.log"; fail "auto with a recorded profile"; }
S="$OUT/auto/summary.json"
[ "$(jq -r .auto.chosen "$S")" = sharded ] && [ "$(jq -r .scheme "$S")" = sharded ] ||
  fail "auto chose $(jq -r .auto.chosen "$S"), trained $(jq -r .scheme "$S")"
[ "$(jq '[.auto.predictions[].scheme] | index("sharded")' "$S")" = 0 ] || fail "sharded is not the first prediction"
[ "$(jq -r .final_clock "$S")" = 6 ] || fail "auto: final_clock $(jq -r .final_clock "$S")"
grep -q 'scheme = "sharded"' "$OUT/auto/config.resolved.toml" || fail "the resolved config does not name the choice"

echo "== auto: W does not fit replicated (ulimit -v), so every rank takes its rows without a profile"
BIG=(--config "$CFG" --set data.features=99999 --set data.classes=2000 --set data.synthetic_samples=2000
  --set data.synthetic_density=0.001 --set data.synthetic_test_samples=200 --set sfb.staleness=0
  --set stop.max_clocks=4 --set eval.every=2 --set 'comm.transport="tcp"')
limited() { bash -c 'ulimit -v 1700000; exec "$@"' _ "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${BIG[@]}" "$@"; }
set +e
limited --set 'comm.scheme="sfb"' --set "output.dir=\"$OUT/nofit\"" > "$OUT/nofit.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "needs about" "$OUT/nofit.log" || { tail -5 "$OUT/nofit.log"; fail "replicated W fit the limit (exit $rc)"; }
limited --set comm.scheme=auto --set output.log_level=info --set "output.dir=\"$OUT/fit\"" > "$OUT/fit.log" 2>&1 ||
  { tail -20 "$OUT/fit.log"; fail "auto under the limit"; }
S="$OUT/fit/summary.json"
[ "$(jq -r .scheme "$S")" = sharded ] && jq -r .auto.reason "$S" | grep -q "does not fit replicated" ||
  fail "auto under the limit: $(jq -c '{scheme, auto}' "$S")"
[ "$(jq -r .final_clock "$S")" = 4 ] || fail "auto under the limit: final_clock $(jq -r .final_clock "$S")"
echo PASS
