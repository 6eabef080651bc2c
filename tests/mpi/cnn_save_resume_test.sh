#!/usr/bin/env bash
# The CNN mode keeps what it trains (4 ranks, Fashion-MNIST, 120 iterations):
#  * output.model -> sfbd --evaluate gives the run's final test accuracy and loss;
#  * model.init warm-starts from it; a file of another network is exit 2 naming the layer;
#  * a checkpoint at 80 resumed on 4 ranks ends bit for bit where the uninterrupted run did, and
#    the metrics continue; resumed on 2 ranks it ends in the same accuracy band;
#  * sfb-run restarts the job after kill -9 of rank 0 and then of rank 2, each time from the
#    newest checkpoint with at most checkpoint.every iterations lost, and ends bit for bit equal;
#    SIGTERM to sfb-run stops the job with a final checkpoint and model (exit 6);
#  * the Chrome trace names every rank's process and threads, one track per group;
#  * every planner `sfbd --keys` lists is accepted; a key the mode ignores is an error.
#   cnn_save_resume_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
OUT=$(mktemp -d)
trap 'pkill -9 -f -- "$OUT" 2> /dev/null || true; rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; [ -f "$OUT/sup.log" ] && tail -20 "$OUT/sup.log"; exit 1; }
source "$SRC/tests/mpi/lib.sh"
export OMP_NUM_THREADS=1
RUN="$SRC/apps/sfb-run"
CFG=(--config "$SRC/configs/fashion_cnn_mgwfbp.toml" --set stop.max_clocks=120 --set eval.every=40
     --set checkpoint.path=ck.bin --set checkpoint.every=40 --set output.log_level=info --set mgwfbp.profile_iters=5)

echo "== uninterrupted, 4 ranks, every rank traced"
sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/full" --set output.trace_ranks=all > "$OUT/full.log" 2>&1 \
  || { tail -30 "$OUT/full.log"; fail "uninterrupted run"; }
want=$(jq -r '.checksum' "$OUT/full/summary.json")
acc=$(jq -r '.final_accuracy' "$OUT/full/summary.json")
loss=$(jq -r '.final_test_loss' "$OUT/full/summary.json")
[ "$(jq -r .checksums_equal "$OUT/full/summary.json")" = true ] || fail "replicas differ"
[ -s "$OUT/full/model.bin" ] || fail "no model file"
echo "final accuracy $acc, test loss $loss, checksum $want"

echo "== --evaluate gives the run's final accuracy and loss"
"$SFBD" "${CFG[@]}" --set output.dir="$OUT/full" --evaluate "$OUT/full/model.bin" > "$OUT/eval.json" \
  || fail "--evaluate"
cat "$OUT/eval.json"
jq -e --argjson a "$acc" --argjson l "$loss" \
  '(.test_accuracy - $a | fabs) < 1e-6 and (.test_loss - $l | fabs) < 1e-5 and .iterations_trained == 120' \
  "$OUT/eval.json" > /dev/null || fail "--evaluate differs from the run's final accuracy $acc / loss $loss"
# The final checkpoint holds the same weights: --evaluate takes it too, and says which it read.
"$SFBD" "${CFG[@]}" --set output.dir="$OUT/full" --evaluate "$OUT/full/ck.bin" > "$OUT/eval_ck.json" ||
  fail "--evaluate of the checkpoint"
jq -e --argjson a "$acc" '(.test_accuracy - $a | fabs) < 1e-6 and .file_kind == "checkpoint"' "$OUT/eval_ck.json" \
  > /dev/null || fail "--evaluate ck.bin: $(cat "$OUT/eval_ck.json")"

echo "== the trace: named processes and threads, a track per group"
T="$OUT/full/trace.json"
jq -e '[.[] | select(.ph == "M" and .name == "process_name") | .args.name] | sort == ["rank 0","rank 1","rank 2","rank 3"]' "$T" > /dev/null \
  || fail "process names: $(jq -c '[.[] | select(.name == "process_name")]' "$T")"
for r in 0 1 2 3; do
  jq -e --argjson r $r '[.[] | select(.ph == "M" and .name == "thread_name" and .pid == $r) | .args.name]
    | (index("forward and update") != null) and (index("backward (per layer)") != null)
      and (map(select(startswith("group "))) | length) >= 1' "$T" > /dev/null || fail "rank $r's thread names"
done
# Every duration event is on a named thread; backward events name layers by their labels.
jq -e '([.[] | select(.ph == "M" and .name == "thread_name") | "\(.pid)/\(.tid)"] | unique) as $named
  | [.[] | select(.ph == "X") | "\(.pid)/\(.tid)"] | unique | all(. as $t | $named | index($t) != null)' "$T" > /dev/null \
  || fail "events on unnamed threads"
jq -e '[.[] | select(.ph == "X") | .name] | index("backward conv1") != null' "$T" > /dev/null || fail "no backward conv1"
jq -e '.plan | test("fc2")' "$OUT/full/summary.json" > /dev/null || fail "the summary's plan has no layer names"
grep -q "group 0: layers fc2-" "$OUT/full.log" || fail "the plan log has no layer names"

echo "== model.init warm-starts; another network is refused naming its first differing layer"
sfb_mpirun -np 2 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/warm" --set model.init="$OUT/full/model.bin" \
  --set stop.max_clocks=20 --set eval.every=20 --set optimizer.lr=0.001 > "$OUT/warm.log" 2>&1 || { tail "$OUT/warm.log"; fail "warm start"; }
grep -q "starting from the weights of $OUT/full/model.bin" "$OUT/warm.log" || fail "no warm-start line"
wacc=$(jq -r .final_accuracy "$OUT/warm/summary.json")
jq -en --argjson w "$wacc" --argjson a "$acc" '$w > $a - 0.03' > /dev/null || fail "warm start at $wacc, the model had $acc"
echo "warm start: $wacc after 20 iterations (the model: $acc)"
rc=0
"$SFBD" "${CFG[@]}" --set output.dir="$OUT/bad" --set model.init="$OUT/full/model.bin" \
  --set cnn.layers=conv:16:5:2,relu,pool:2,conv:32:5:2,relu,pool:2,fc:64,relu,fc:10 > "$OUT/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "layer 7 differs: the file has fc1 fc:128" "$OUT/bad.log" || { cat "$OUT/bad.log"; fail "other network: exit $rc"; }
rc=0
"$SFBD" "${CFG[@]}" --set output.dir="$OUT/bad" --resume "$OUT/full/model.bin" > "$OUT/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "is a CNN model file, not a checkpoint" "$OUT/bad.log" || { cat "$OUT/bad.log"; fail "model as checkpoint: exit $rc"; }

echo "== resume at 80 on 4 ranks: bit for bit; on 2 ranks: the same accuracy band"
sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/half" --set stop.max_clocks=80 > "$OUT/half.log" 2>&1 || fail "first half"
cp "$OUT/half/ck.bin" "$OUT/ck80.bin"
sfb_mpirun -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/half" --resume "$OUT/ck80.bin" > "$OUT/res.log" 2>&1 || { tail "$OUT/res.log"; fail "resume"; }
grep -q "resuming from $OUT/ck80.bin at iteration 80 (written by 4 ranks)" "$OUT/res.log" || fail "no resume line"
got=$(jq -r .checksum "$OUT/half/summary.json")
[ "$got" = "$want" ] || fail "resumed on 4 ranks: checksum $got, uninterrupted $want"
diff <(jq -c '[.iteration, .loss, .accuracy]' "$OUT/full/metrics.jsonl") <(jq -c '[.iteration, .loss, .accuracy]' "$OUT/half/metrics.jsonl") \
  || fail "the resumed run's metrics differ from the uninterrupted run's"
echo "4 ranks: bit for bit ($got), metrics continue"
echo "== resumed twice (40 -> 80 -> 120): one continuous time axis"
sfb_mpirun -np 2 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/twice" --set stop.max_clocks=40 > "$OUT/t1.log" 2>&1 || fail "twice, 1"
sfb_mpirun -np 2 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/twice" --set stop.max_clocks=80 --resume "$OUT/twice/ck.bin" \
  > "$OUT/t2.log" 2>&1 || fail "twice, 2"
sfb_mpirun -np 2 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/twice" --resume "$OUT/twice/ck.bin" > "$OUT/t3.log" 2>&1 ||
  fail "twice, 3"
jq -s -e '(map(.iteration) == [40, 80, 120]) and (.[0].seconds < .[1].seconds and .[1].seconds < .[2].seconds)
          and (.[2].attempt_seconds < .[2].seconds)' "$OUT/twice/metrics.jsonl" > /dev/null ||
  fail "seconds across two resumes: $(jq -c '[.iteration, .seconds, .attempt_seconds]' "$OUT/twice/metrics.jsonl" | tr '\n' ' ')"
echo "seconds: $(jq -c '[.iteration, .seconds, .attempt_seconds]' "$OUT/twice/metrics.jsonl" | tr '\n' ' ')"
sfb_mpirun -np 2 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/two" --resume "$OUT/ck80.bin" > "$OUT/two.log" 2>&1 || { tail "$OUT/two.log"; fail "resume on 2"; }
tacc=$(jq -r .final_accuracy "$OUT/two/summary.json")
jq -en --argjson t "$tacc" --argjson a "$acc" '($t - $a | fabs) < 0.04' > /dev/null || fail "resumed on 2 ranks: $tacc, 4 ranks $acc"
grep -q "profile:" "$OUT/two.log" || fail "on other ranks the resumed run does not profile again"
echo "2 ranks: accuracy $tacc (4 ranks: $acc)"


echo "== supervised: kill -9 of rank 0, then of rank 2"
"$RUN" --max-restarts 3 -- "${SFB_MPIRUN[@]}" -np 4 "$SFBD" "${CFG[@]}" --set output.dir="$OUT/sup" 2> "$OUT/sup.log" &
sup=$!
kill_rank 0 iteration 40 "$OUT/sup" 1
kill_rank 2 iteration 80 "$OUT/sup" 2
rc=0
wait "$sup" || rc=$?
cat "$OUT/sup.log"
[ $rc = 0 ] || fail "sfb-run exit code $rc"
grep -q "the job finished (attempt 3, 2 restart(s))" "$OUT/sup.log" || fail "not finished on attempt 3"
for lost in $(grep -o "iterations lost: [0-9a-z]*" "$OUT/sup.log" | awk '{ print $3 }'); do
  [ "$lost" != unknown ] && [ "$lost" -le 40 ] || fail "lost $lost iterations (checkpoint.every = 40)"
done
[ "$(grep -c "iterations lost" "$OUT/sup.log")" = 2 ] || fail "not two failures logged"
grep -q "resuming from $OUT/sup/ck.bin at iteration" "$OUT/sup/sfb-run/attempt-3.log" || fail "attempt 3 did not resume"
got=$(jq -r .checksum "$OUT/sup/summary.json")
[ "$got" = "$want" ] || fail "supervised: checksum $got, uninterrupted $want"
echo "supervised: bit for bit ($got)"
# The trace streams: the attempt killed by kill -9 left its events (an array without its closing
# bracket, which viewers accept); each resumed attempt traced into a file of its own.
events() { jq -c . "$1" 2> /dev/null || (cat "$1"; echo "]") | jq -c .; }  # closed, or cut by a kill
[ "$(tail -c 3 "$OUT/sup/trace.json")" != "$(printf '\n]\n' | tail -c 3)" ] || fail "the killed attempt closed its trace?"
events "$OUT/sup/trace.json" | jq -e '[.[] | select(.ph == "X") | .name] | index("backward conv1") != null' \
  > /dev/null || fail "the killed attempt's trace: $(head -c 200 "$OUT/sup/trace.json")"
for f in trace.from-40.json trace.from-80.json; do
  events "$OUT/sup/$f" | jq -e '[.[] | select(.ph == "X")] | length > 0' > /dev/null || fail "no trace in $f"
done
echo "traces: killed attempt $(wc -c < "$OUT/sup/trace.json") bytes, resumed attempts $(ls "$OUT/sup" | grep -c 'trace.from-')"

echo "== SIGTERM to sfb-run: a final checkpoint and model (exit 6)"
"$RUN" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${CFG[@]}" --set stop.max_clocks=100000 --set output.dir="$OUT/term" 2> "$OUT/sup.log" &
sup=$!
until grep -q "checkpoint at iteration 40 " "$OUT/term/sfb-run/attempt-1.log" 2> /dev/null; do
  kill -0 "$sup" 2> /dev/null || fail "the supervisor ended before iteration 40"
  sleep 0.02
done
kill -TERM $sup
rc=0
wait "$sup" || rc=$?
[ $rc = 6 ] || { cat "$OUT/sup.log"; fail "exit code $rc after SIGTERM, expected 6"; }
c=$(od -An -t d8 -j 32 -N 8 "$OUT/term/ck.bin" | tr -d ' ')
[ "$c" -ge 40 ] && [ $((c % 10)) = 0 ] || fail "final checkpoint at iteration $c"
m=$(od -An -t d8 -j 32 -N 8 "$OUT/term/model.bin" | tr -d ' ')
[ "$m" = "$c" ] || fail "model at iteration $m, checkpoint at $c"
[ "$(jq -r .stop_reason "$OUT/term/summary.json")" = signal ] || fail "stop_reason"
# The summary's accuracy is the saved model's (the stop came between evaluations).
"$SFBD" "${CFG[@]}" --set output.dir="$OUT/term" --evaluate "$OUT/term/model.bin" > "$OUT/term_eval.json" || fail "evaluate term"
jq -e --slurpfile s "$OUT/term/summary.json" '(.test_accuracy - $s[0].final_accuracy | fabs) < 1e-6' \
  "$OUT/term_eval.json" > /dev/null ||
  fail "after SIGTERM the summary says $(jq .final_accuracy "$OUT/term/summary.json"), the model $(jq .test_accuracy "$OUT/term_eval.json")"
[ "$(tail -1 "$OUT/term/metrics.jsonl" | jq .iteration)" = "$c" ] || fail "no metrics line at the stop, iteration $c"
echo "stopped at iteration $c with checkpoint and model; the summary's accuracy is the model's"

echo "== every planner sfbd --keys lists is accepted; a key the mode ignores is refused"
list=$("$SFBD" --keys | grep '^| `mgwfbp.planner`' | sed 's/.*One of: \(.*\)\. |$/\1/')
[ -n "$list" ] || fail "no planner list in --keys"
n=0
for p in $(echo "$list" | tr ',' '\n' | tr -d ' ' | sed 's/<MiB>/8/'); do
  "$SFBD" "${CFG[@]}" --set output.dir="$OUT/keys" --set mgwfbp.planner="$p" --check > /dev/null 2>&1 || fail "planner $p listed but refused"
  n=$((n + 1))
done
[ $n -ge 9 ] || fail "only $n planners listed: $list"
rc=0
"$SFBD" "${CFG[@]}" --set output.dir="$OUT/keys" --set sfb.broadcast=halton --check > "$OUT/key.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'sfb.broadcast is not used by job.mode = "mgwfbp"' "$OUT/key.log" || { cat "$OUT/key.log"; fail "ignored key: exit $rc"; }
rc=0
"$SFBD" --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT/keys" --set cnn.momentum=0.5 --check > "$OUT/key.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'cnn.momentum is not used by job.mode = "sfb"' "$OUT/key.log" || { cat "$OUT/key.log"; fail "ignored cnn key: exit $rc"; }
echo "$n planners accepted; ignored keys refused"
echo PASS
