#!/usr/bin/env bash
# optimizer.lr = "auto" (issue 39): the search (apps/sfbd/lr_policy.h) trains each candidate from the start
# and keeps the rate with the best held-out accuracy; two runs of one BSP job choose the same rate
# (the trials are seeded like the run); the choice is in the log, config.resolved.toml and
# summary.json's lr_search; the run with the chosen rate is within 0.5 points of the best hand-set
# rate of the half-decade grid at equal clocks; --find-lr prints and plots the candidates and trains
# nothing, in both modes; the CNN mode searches its rate too; FMS and SDCA are refused (exit 2).
#   lr_auto_test.sh <sfbd> <source dir>
set -uo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
sfb_test_counting
C=(--config "$SRC/configs/synthetic_sparse.toml" --set sfb.staleness=0 --set stop.max_clocks=200)
for run in a b; do
  sfb_mpirun -np 2 "$SFBD" "${C[@]}" --set optimizer.lr='"auto"' --set output.dir="$OUT/$run" > "$OUT/$run.log" 2>&1 ||
    fail "run $run: $(tail -3 "$OUT/$run.log")"
done
a=$(jq -r .lr_search.chosen "$OUT/a/summary.json") b=$(jq -r .lr_search.chosen "$OUT/b/summary.json")
[ "$a" = "$b" ] && [ "$a" != null ] && ok "both runs chose lr $a" || fail "chosen $a and $b"
jq -e '.lr_search as $s | ($s.tried | length) >= 5 and $s.clocks_each == 100 and $s.judged_by == "held-out accuracy"
       and ([$s.tried[] | select(.lr == $s.chosen)][0] as $c | $c.held_out_accuracy == ($s.tried | map(.held_out_accuracy) | max)
            and $c.held_out_objective < $s.start.held_out_objective)' "$OUT/a/summary.json" > /dev/null &&
  ok "100-clock trials (half the run), the best held-out accuracy chosen, its objective below the start's" ||
  fail "lr_search: $(jq -c .lr_search "$OUT/a/summary.json")"
grep -q "optimizer.lr = \"auto\": [0-9.e-]* (held-out accuracy" "$OUT/a.log" && ok "the log names the choice" || fail "no choice in the log"
grep -qE '^optimizer.lr = [0-9.e-]+$' "$OUT/a/config.resolved.toml" && ok "config.resolved.toml trains with a number" ||
  fail "config.resolved.toml: $(grep 'optimizer.lr ' "$OUT/a/config.resolved.toml")"
[ "$(jq -r .rank_checksums[0] "$OUT/a/summary.json")" = "$(jq -r .rank_checksums[0] "$OUT/b/summary.json")" ] &&
  ok "the two runs trained alike" || fail "the runs' W differ"
# The band: the chosen rate's accuracy against every hand-set rate of the grid, 200 clocks each.
best=0 best_lr=
for lr in 0.01 0.0316 0.1 0.316 1 3.16 10; do
  sfb_mpirun -np 2 "$SFBD" "${C[@]}" --set optimizer.lr=$lr --set output.dir="$OUT/hand$lr" > "$OUT/hand$lr.log" 2>&1 ||
    fail "lr $lr: $(tail -3 "$OUT/hand$lr.log")"
  acc=$(jq -r .final_accuracy "$OUT/hand$lr/summary.json")
  if awk -v a="$acc" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$acc best_lr=$lr; fi
done
auto_acc=$(jq -r .final_accuracy "$OUT/a/summary.json")
awk -v a="$auto_acc" -v b="$best" 'BEGIN { exit !(a >= b - 0.005) }' &&
  ok "auto ($a) reached $auto_acc, the best hand-set rate ($best_lr) $best: within 0.5 points" ||
  fail "auto ($a) reached $auto_acc, the best hand-set rate ($best_lr) $best"
expect find-lr 0 120 "chosen: optimizer.lr = " -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${C[@]}" --set optimizer.lr_search_clocks=20 \
  --find-lr --set output.dir="$OUT/find"
rows=$(grep -c '^| [0-9.e+-]* | ' <<<"$LAST_OUT")
[ "$rows" -ge 5 ] && [ "$(wc -l < "$OUT/find/lr_search.csv")" = $((rows + 1)) ] &&
  [ ! -e "$OUT/find/model.bin" ] && [ ! -e "$OUT/find/summary.json" ] &&
  ok "--find-lr: $rows candidates printed and in lr_search.csv, nothing trained" || fail "--find-lr: $(ls "$OUT/find")"
CNN=(--config "$SRC/configs/fashion_cnn_mgwfbp.toml" --set stop.max_clocks=40 --set data.max_train_samples=4000
     --set eval.every=40 --set output.trace='""')
expect find-lr-cnn 0 300 "chosen: optimizer.lr = " -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${CNN[@]}" --find-lr \
  --set output.dir="$OUT/cnnfind"
[ -s "$OUT/cnnfind/lr_search.csv" ] && [ ! -e "$OUT/cnnfind/model.bin" ] && ok "--find-lr in the CNN mode: a table, nothing trained" ||
  fail "CNN --find-lr: $(ls "$OUT/cnnfind")"
sfb_mpirun -np 2 "$SFBD" "${CNN[@]}" --set optimizer.lr='"auto"' --set output.dir="$OUT/cnn" > "$OUT/cnn.log" 2>&1 ||
  fail "CNN auto: $(tail -3 "$OUT/cnn.log")"
jq -e '.lr_search.unit == "iterations" and .lr_search.clocks_each == 30 and (.lr_search.tried | length) >= 5' \
  "$OUT/cnn/summary.json" > /dev/null && grep -qE '^optimizer.lr = [0-9.e-]+$' "$OUT/cnn/config.resolved.toml" &&
  ok "the CNN mode searched its rate ($(jq -r .lr_search.chosen "$OUT/cnn/summary.json")) and trained with it" ||
  fail "CNN lr_search: $(jq -c .lr_search "$OUT/cnn/summary.json" 2>&1)"
expect fms-refused 2 60 "optimizer.lr = \"auto\" is not searched under comm.scheme = \"fms\"" -- "${SFB_MPIRUN[@]}" -np 3 "$SFBD" \
  "${C[@]}" --set optimizer.lr='"auto"' --set comm.scheme=fms --set output.dir="$OUT/fms"
expect sdca-refused 2 120 "this model's updates take no step size" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${C[@]}" \
  --set optimizer.lr='"auto"' --set model.name=l2mlr --set model.solver=sdca --set output.dir="$OUT/sdca"
sfb_test_summary
