#!/usr/bin/env bash
# A finished run is reusable and says what it was: train 2 ranks for half an epoch (stop.max_epochs)
# and check the clock count, config.resolved.toml (loads back, repeats the run bit for bit) and the
# provenance in summary.json; `sfbd --evaluate` of the model file reports the run's final test
# accuracy and objective; `model.init` starts a run from that W (its clock-0 evaluation equals the
# first run's last); a model file of the wrong shape is exit 2 naming it; sfb-gradcheck (installed
# next to sfbd) passes the config's model and refuses a dual one; sfb-plot draws the runs.
#   evaluate_and_warm_start_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
CFG="$SRC/configs/test_fashion_small.toml"
run() { sfb_mpirun -np 2 "$SFBD" --config "$@"; }

echo "== half an epoch on 2 ranks"
run "$CFG" --set stop.max_epochs=0.5 --set "output.dir=\"$OUT/a\"" > "$OUT/a.log" 2>&1 || { cat "$OUT/a.log"; fail "run a"; }
# ceil(0.5 * 60000 / (2 ranks * 32)) = 469 clocks
[ "$(sfb_field final_clock "$OUT/a/summary.json")" = 469 ] || fail "final_clock $(sfb_field final_clock "$OUT/a/summary.json")"
[ -n "$(sfb_field git_revision "$OUT/a/summary.json")" ] || fail "no git_revision"
[ "$(sfb_field sfb_version "$OUT/a/summary.json")" != null ] || fail "no sfb_version"
grep -q '^stop.max_epochs = 0.5$' "$OUT/a/config.resolved.toml" || fail "config.resolved.toml misses the override"

echo "== the resolved config repeats the run"
run "$OUT/a/config.resolved.toml" --set "output.dir=\"$OUT/b\"" > "$OUT/b.log" 2>&1 || { cat "$OUT/b.log"; fail "run b"; }
a_sum=$(jq -er ".rank_checksums[0]" "$OUT/a/summary.json")
b_sum=$(jq -er ".rank_checksums[0]" "$OUT/b/summary.json")
[ "$a_sum" = "$b_sum" ] || fail "the resolved config gave W $b_sum, the run $a_sum"

echo "== --evaluate the model file"
"$SFBD" --config "$CFG" --evaluate "$OUT/a/model.bin" > "$OUT/eval.json" 2> "$OUT/eval.err" || { cat "$OUT/eval.err"; fail "evaluate"; }
acc=$(jq -r .test_accuracy "$OUT/eval.json")
[ "$acc" = "$(sfb_field final_accuracy "$OUT/a/summary.json")" ] || fail "evaluate accuracy $acc, run $(sfb_field final_accuracy "$OUT/a/summary.json")"
[ "$(jq -r .train_rows "$OUT/eval.json")" = 60000 ] || fail "train_rows"

echo "== model.init starts from that W"
run "$CFG" --set stop.max_clocks=10 --set "model.init=\"$OUT/a/model.bin\"" --set "output.dir=\"$OUT/c\"" \
  > "$OUT/c.log" 2>&1 || { cat "$OUT/c.log"; fail "run c"; }
first=$(head -1 "$OUT/c/metrics.jsonl" | jq -r .objective)
[ "$first" = "$(sfb_field final_objective "$OUT/a/summary.json")" ] || fail "clock-0 objective $first"

echo "== wrong shapes and files are exit 2 naming them"
set +e
run "$CFG" --set data.bias=false --set "model.init=\"$OUT/a/model.bin\"" --set "output.dir=\"$OUT/d\"" > "$OUT/d.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || { cat "$OUT/d.log"; fail "wrong-shape model.init: exit $rc"; }
grep -q "model.init = $OUT/a/model.bin: the file's W is 10 x 785" "$OUT/d.log" || { cat "$OUT/d.log"; fail "message"; }
set +e
"$SFBD" --config "$CFG" --evaluate "$OUT/a/summary.json" > /dev/null 2> "$OUT/e.err"
rc=$?
set -e
[ $rc = 2 ] && grep -q "summary.json: bad magic" "$OUT/e.err" || { cat "$OUT/e.err"; fail "evaluate of a non-model: exit $rc"; }
echo "== sfb-plot overlays the two runs"
"$SRC/apps/sfb-plot" -o "$OUT/p.png" "$OUT/a" "$OUT/c" > "$OUT/plot.log" 2>&1 || { cat "$OUT/plot.log"; fail "sfb-plot"; }
[ "$(head -c 4 "$OUT/p.png" | tail -c 3)" = PNG ] || fail "sfb-plot wrote no PNG"
set +e
"$SRC/apps/sfb-plot" "$OUT/nothing-here" > "$OUT/plot2.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "no metrics" "$OUT/plot2.log" || { cat "$OUT/plot2.log"; fail "sfb-plot of a missing run: exit $rc"; }

echo "== sfb-gradcheck: the model of this config passes, a dual model is exit 2"
GRADCHECK="$(dirname "$SFBD")/sfb-gradcheck"
"$GRADCHECK" --config "$CFG" > "$OUT/gc.log" 2>&1 || { cat "$OUT/gc.log"; fail "gradcheck of mlr"; }
grep -q "^PASS" "$OUT/gc.log" || fail "no PASS line"
set +e
"$GRADCHECK" --config "$SRC/configs/fashion_l2mlr_sdca.toml" > "$OUT/gc2.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "not a gradient" "$OUT/gc2.log" || { cat "$OUT/gc2.log"; fail "gradcheck of sdca: exit $rc"; }
echo PASS
