#!/usr/bin/env bash
# Data sorted by label (issue: partitions that differ). A synthetic libsvm file of 5 classes,
# sorted by label, on 4 ranks:
#   * full broadcast, contiguous partitions: the reported objective is the objective of the global
#     sample (`sfbd --evaluate` of the model file gives the same number) and near the whole
#     training set's;
#   * partial broadcast, contiguous, no reconciliation: the drift guard warns (progress line and
#     summary.json), and stop.max_replica_drift makes it fatal (exit 4, no model written);
#   * partial broadcast with the default reconciliation: one consensus on every rank, accuracy
#     near full broadcast's;
#   * the default shuffled partition trains the sorted file as well as the unsorted one.
#   sorted_data_test.sh <sfbd> <source dir> <sfb-datagen>
set -euo pipefail
SFBD=$1
SRC=$2
DATAGEN=$3
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch

"$DATAGEN" --samples 4000 --features 200 --classes 5 --density 0.1 --out "$OUT/train.svm"
"$DATAGEN" --samples 1000 --features 200 --classes 5 --density 0.1 --test --out "$OUT/test.svm"
sort -s -n -k1,1 "$OUT/train.svm" > "$OUT/sorted.svm"
[ "$(head -1 "$OUT/sorted.svm" | cut -d' ' -f1)" = 0 ] && [ "$(tail -1 "$OUT/sorted.svm" | cut -d' ' -f1)" = 4 ] ||
  fail "the file is not sorted by label"
cat > "$OUT/job.toml" <<TOML
[data]
format = "libsvm"
train = "$OUT/sorted.svm"
test = "$OUT/test.svm"
features = 200
classes = 5
[optimizer]
lr = 0.5
minibatch = 16
[eval]
every = 50
train_sample = 2000
[stop]
max_clocks = 400
[output]
log_level = "info"
TOML
# run NAME [--set ...]: trains into $OUT/NAME, the log in $OUT/NAME.log; returns sfbd's exit code.
run() {
  local name=$1
  shift
  local rc=0
  sfb_mpirun -np 4 "$SFBD" --config "$OUT/job.toml" --set "output.dir=\"$OUT/$name\"" "$@" > "$OUT/$name.log" 2>&1 || rc=$?
  return $rc
}
field() { sfb_field "$1" "$OUT/$2/summary.json"; }

echo "== full broadcast, contiguous partitions: the objective is the global sample's"
run full --set 'data.partition="contiguous"' || { cat "$OUT/full.log"; fail "full"; }
"$SFBD" --config "$OUT/job.toml" --evaluate "$OUT/full/model.bin" > "$OUT/eval.json" 2> "$OUT/eval.err" ||
  { cat "$OUT/eval.err"; fail "evaluate"; }
[ "$(jq -r .objective_rows "$OUT/eval.json")" = 2000 ] || fail "objective_rows $(jq -r .objective_rows "$OUT/eval.json")"
[ "$(field objective_rows full)" = 2000 ] || fail "summary objective_rows $(field objective_rows full)"
[ "$(jq -r .sample_objective "$OUT/eval.json")" = "$(field final_objective full)" ] ||
  fail "the run reports $(field final_objective full), the global sample's objective is $(jq -r .sample_objective "$OUT/eval.json")"
awk -v s="$(field final_objective full)" -v w="$(jq -r .train_objective "$OUT/eval.json")" \
  'BEGIN { d = s - w; if (d < 0) d = -d; exit !(d <= 0.02 * w) }' ||
  fail "sample objective $(field final_objective full) is not within 2% of the whole set's $(jq -r .train_objective "$OUT/eval.json")"
full_acc=$(field final_accuracy full)
echo "full broadcast: objective $(field final_objective full), accuracy $full_acc"

echo "== partial broadcast, contiguous, no reconciliation: the drift guard warns"
run drift --set 'data.partition="contiguous"' --set 'sfb.broadcast="halton"' --set 'sfb.reconcile="off"' \
  --set eval.drift_warn=0.15 || { cat "$OUT/drift.log"; fail "drift run"; }
warnings=$(jq -r .replica_drift.warnings "$OUT/drift/summary.json")
echo "drift: last $(jq -r .replica_drift.last "$OUT/drift/summary.json"), max $(jq -r .replica_drift.max "$OUT/drift/summary.json"), $warnings warnings"
[ "$warnings" -gt 0 ] || fail "no drift warning"
grep -q "DRIFT .* > eval.drift_warn 0.15" "$OUT/drift.log" || fail "the progress line does not warn"
grep -q "WARNING: above eval.drift_warn" "$OUT/drift.log" || fail "the summary table does not warn"
[ "$(field reconcile drift)" = null ] || fail "reconciled with sfb.reconcile = off"

echo "== the same partial broadcast on shuffled partitions: healthy, and eval.drift_warn = auto stays quiet"
run healthy --set 'sfb.broadcast="halton"' --set 'sfb.reconcile="off"' || { cat "$OUT/healthy.log"; fail "healthy run"; }
[ "$(jq -r .replica_drift.warnings "$OUT/healthy/summary.json")" = 0 ] ||
  fail "healthy shuffled data warned: $(jq -c .replica_drift "$OUT/healthy/summary.json")"
grep -q 'eval.drift_warn = "auto": 0.866' "$OUT/healthy.log" || fail "auto's threshold (P = 4, Q = 2) not logged"
echo "healthy: drift max $(jq -r .replica_drift.max "$OUT/healthy/summary.json"), no warning (auto: 0.866)"

echo "== stop.max_replica_drift makes it fatal"
rc=0
run fatal --set 'data.partition="contiguous"' --set 'sfb.broadcast="halton"' --set 'sfb.reconcile="off"' \
  --set stop.max_replica_drift=0.2 || rc=$?
[ $rc = 4 ] || { tail -20 "$OUT/fatal.log"; fail "exit $rc, not 4"; }
[ "$(field stop_reason fatal)" = replica_drift ] || fail "stop_reason $(field stop_reason fatal)"
[ ! -e "$OUT/fatal/model.bin" ] || fail "a model was written"
grep -q "exceeds stop.max_replica_drift 0.2" "$OUT/fatal.log" || fail "no message naming stop.max_replica_drift"

echo "== partial broadcast with the default reconciliation"
run reconciled --set 'data.partition="contiguous"' --set 'sfb.broadcast="halton"' ||
  { cat "$OUT/reconciled.log"; fail "reconciled"; }
[ "$(jq -r .reconcile.mode "$OUT/reconciled/summary.json")" = mean ] || fail "reconcile mode"
[ "$(jq -r .reconcile.count "$OUT/reconciled/summary.json")" -gt 10 ] || fail "reconcile count"
[ "$(field checksums_equal reconciled)" = true ] || fail "the replicas do not end on one consensus"
rec_acc=$(field final_accuracy reconciled)
echo "reconciled partial broadcast: accuracy $rec_acc (full $full_acc), $(field bytes_per_clock reconciled) bytes/clock (full $(field bytes_per_clock full))"
awk -v a="$rec_acc" -v f="$full_acc" 'BEGIN { exit !(a >= f - 0.03) }' || fail "accuracy $rec_acc vs full $full_acc"
awk -v a="$(field bytes_per_clock reconciled)" -v f="$(field bytes_per_clock full)" 'BEGIN { exit !(a < f) }' ||
  fail "partial broadcast sent no fewer bytes than full"

echo "== the shuffled partition (default): the sorted file trains like the unsorted one"
run sorted_shuffled || { cat "$OUT/sorted_shuffled.log"; fail "sorted_shuffled"; }
run unsorted_shuffled --set "data.train=\"$OUT/train.svm\"" || { cat "$OUT/unsorted_shuffled.log"; fail "unsorted"; }
grep -q "shuffled partition" "$OUT/sorted_shuffled.log" || fail "the log does not name the partition"
a=$(field final_accuracy sorted_shuffled)
b=$(field final_accuracy unsorted_shuffled)
echo "shuffled: sorted file $a, unsorted file $b"
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02) }' || fail "sorted $a vs unsorted $b"
echo PASS
