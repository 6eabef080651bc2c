#!/usr/bin/env bash
# optimizer.lr = "auto" (issue 39): the search trains each candidate from the start W and keeps the
# rate whose sample objective ended lowest; two runs of one BSP job choose the same rate (the
# trials are seeded like the run); the choice is in the log, config.resolved.toml and
# summary.json's lr_search; --find-lr prints and plots the candidates and trains nothing; modes and
# models without a searchable step are refused (exit 2).
#   lr_auto_test.sh <sfbd> <source dir>
set -uo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
sfb_test_counting
C=(--config "$SRC/configs/synthetic_sparse.toml" --set sfb.staleness=0 --set stop.max_clocks=200
   --set optimizer.lr='"auto"' --set optimizer.lr_search_clocks=20)
for run in a b; do
  sfb_mpirun -np 2 "$SFBD" "${C[@]}" --set output.dir="$OUT/$run" > "$OUT/$run.log" 2>&1 || fail "run $run: $(tail -3 "$OUT/$run.log")"
done
a=$(jq -r .lr_search.chosen "$OUT/a/summary.json") b=$(jq -r .lr_search.chosen "$OUT/b/summary.json")
[ "$a" = "$b" ] && [ "$a" != null ] && ok "both runs chose lr $a" || fail "chosen $a and $b"
jq -e '(.lr_search.tried | length) == 9 and ((.lr_search.tried | min_by(.objective) | .lr) == .lr_search.chosen)
       and (.lr_search.tried | min_by(.objective) | .objective) < .lr_search.start_objective' "$OUT/a/summary.json" > /dev/null &&
  ok "9 candidates, the lowest objective chosen, below the start's" || fail "lr_search: $(jq -c .lr_search "$OUT/a/summary.json")"
grep -q "optimizer.lr = \"auto\": [0-9.e-]* (objective" "$OUT/a.log" && ok "the log names the choice" || fail "no choice in the log"
grep -qE '^optimizer.lr = [0-9.e-]+$' "$OUT/a/config.resolved.toml" && ok "config.resolved.toml trains with a number" ||
  fail "config.resolved.toml: $(grep 'optimizer.lr ' "$OUT/a/config.resolved.toml")"
[ "$(jq -r .rank_checksums[0] "$OUT/a/summary.json")" = "$(jq -r .rank_checksums[0] "$OUT/b/summary.json")" ] &&
  ok "the two runs trained alike" || fail "the runs' W differ"
expect find-lr 0 120 "chosen: optimizer.lr = " -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${C[@]}" --find-lr --set output.dir="$OUT/find"
[ "$(grep -c '^| [0-9.e+-]* | ' <<<"$LAST_OUT")" = 9 ] && [ "$(wc -l < "$OUT/find/lr_search.csv")" = 10 ] &&
  [ ! -e "$OUT/find/model.bin" ] && [ ! -e "$OUT/find/summary.json" ] &&
  ok "--find-lr: 9 candidates printed and in lr_search.csv, nothing trained" || fail "--find-lr: $(ls "$OUT/find")"
expect find-lr-cnn 2 60 "--find-lr searches job.mode = \"sfb\"'s step" -- "$SFBD" \
  --config "$SRC/configs/fashion_cnn_mgwfbp.toml" --find-lr --set output.dir="$OUT/cnn2"
expect fms-refused 2 60 "optimizer.lr = \"auto\" is not searched under comm.scheme = \"fms\"" -- "${SFB_MPIRUN[@]}" -np 3 "$SFBD" \
  "${C[@]}" --set comm.scheme=fms --set output.dir="$OUT/fms"
expect cnn-refused 2 60 "optimizer.lr = \"auto\" searches the sfb mode's step" -- "$SFBD" \
  --config "$SRC/configs/fashion_cnn_mgwfbp.toml" --set optimizer.lr='"auto"' --set output.dir="$OUT/cnn"
expect sdca-refused 2 120 "this model's updates take no step size" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${C[@]}" \
  --set model.name=l2mlr --set model.solver=sdca --set output.dir="$OUT/sdca"
sfb_test_summary
