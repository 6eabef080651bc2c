#!/usr/bin/env bash
# One model, two layouts of W in memory (model.layout), one file order on disk: on sparse data a
# 2-rank BSP run keeps W feature-major ("auto"); the same run kept row-major ends on the same bits
# (the same summary checksums and model file); its checkpoint resumes in the other layout and ends
# bit for bit where the uninterrupted run did; `sfbd --evaluate` of the model gives the same numbers
# in both layouts; `model.init` warm-starts across layouts; sfb-gradcheck passes in both.
#   layouts_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
CFG="$SRC/configs/synthetic_sparse.toml"
COMMON=(--set sfb.staleness=0 --set stop.max_clocks=60 --set eval.every=20 --set data.synthetic_samples=6000
  --set checkpoint.every=20)
run() {
  local dir=$1
  shift
  sfb_mpirun -np 2 "$SFBD" --config "$CFG" "${COMMON[@]}" --set "output.dir=\"$OUT/$dir\"" \
    --set "checkpoint.path=\"$OUT/$dir/ckpt.bin\"" "$@" > "$OUT/$dir.log" 2>&1 || { cat "$OUT/$dir.log"; fail "run $dir"; }
}
checksum() { jq -er '.rank_checksums[0]' "$OUT/$1/summary.json"; }

echo "== the same run feature-major (auto on sparse data) and row-major"
run fm
run rm --set 'model.layout="row-major"'
[ "$(jq -r .w_layout "$OUT/fm/summary.json")" = feature-major ] || fail "auto on sparse data: $(jq -r .w_layout "$OUT/fm/summary.json")"
[ "$(jq -r .w_layout "$OUT/rm/summary.json")" = row-major ] || fail "row-major run: $(jq -r .w_layout "$OUT/rm/summary.json")"
grep -q "feature-major" "$OUT/fm.log" || fail "the table does not name the layout"
[ "$(checksum fm)" = "$(checksum rm)" ] || fail "W differs between the layouts: $(checksum fm) vs $(checksum rm)"
cmp -s "$OUT/fm/model.bin" "$OUT/rm/model.bin" || fail "the model files differ"
[ "$(sfb_field final_objective "$OUT/fm/summary.json")" = "$(sfb_field final_objective "$OUT/rm/summary.json")" ] ||
  fail "final objectives differ"

echo "== a feature-major checkpoint resumes row-major, and back, bit for bit"
run fm40 --set stop.max_clocks=40
run fm_from_rm --set stop.max_clocks=40 --set 'model.layout="row-major"'
# the run stopped at 40 wrote its checkpoint there; continue it to 60 in the other layout
cp "$OUT/fm40/ckpt.bin" "$OUT/at40.bin"
[ "$(od -An -tu8 -j32 -N8 "$OUT/at40.bin" | tr -d ' ')" = 40 ] || fail "checkpoint clock"
run resumed_rm --set 'model.layout="row-major"' --resume "$OUT/at40.bin"
[ "$(checksum resumed_rm)" = "$(checksum fm)" ] || fail "resumed row-major from feature-major: $(checksum resumed_rm) vs $(checksum fm)"
cp "$OUT/fm_from_rm/ckpt.bin" "$OUT/rm40.bin"
run resumed_fm --resume "$OUT/rm40.bin"
[ "$(checksum resumed_fm)" = "$(checksum rm)" ] || fail "resumed feature-major from row-major"

echo "== --evaluate gives the same numbers in both layouts"
"$SFBD" --config "$CFG" "${COMMON[@]}" --evaluate "$OUT/fm/model.bin" > "$OUT/e_fm.json" 2> "$OUT/e.err" || { cat "$OUT/e.err"; fail "evaluate"; }
"$SFBD" --config "$CFG" "${COMMON[@]}" --set 'model.layout="row-major"' --evaluate "$OUT/fm/model.bin" > "$OUT/e_rm.json" 2> "$OUT/e.err" || { cat "$OUT/e.err"; fail "evaluate row-major"; }
[ "$(jq -r .layout "$OUT/e_fm.json")" = feature-major ] || fail "evaluate layout"
for k in train_objective sample_objective test_objective test_accuracy; do
  a=$(jq -r ".$k" "$OUT/e_fm.json")
  b=$(jq -r ".$k" "$OUT/e_rm.json")
  [ "$a" = "$b" ] || fail "--evaluate $k: $a feature-major, $b row-major"
done
[ "$(jq -r .test_accuracy "$OUT/e_fm.json")" = "$(sfb_field final_accuracy "$OUT/fm/summary.json")" ] ||
  fail "evaluate accuracy $(jq -r .test_accuracy "$OUT/e_fm.json"), run $(sfb_field final_accuracy "$OUT/fm/summary.json")"

echo "== model.init across layouts: the clock-0 objective is the model's"
run warm --set stop.max_clocks=1 --set 'model.layout="row-major"' --set "model.init=\"$OUT/fm/model.bin\""
first=$(head -1 "$OUT/warm/metrics.jsonl" | jq -r .objective)
[ "$first" = "$(sfb_field final_objective "$OUT/fm/summary.json")" ] || fail "warm start objective $first"

echo "== a model that reads W by rows refuses feature-major, naming the key"
set +e
"$SFBD" --config "$SRC/configs/test_fashion_small.toml" --set model.name='"dml"' --set 'model.layout="feature-major"' \
  --check > "$OUT/dml.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q 'model.layout = "feature-major": model "dml"' "$OUT/dml.log" || { cat "$OUT/dml.log"; fail "dml feature-major: exit $rc"; }

echo "== sfb-gradcheck in both layouts"
GRADCHECK="$(dirname "$SFBD")/sfb-gradcheck"
for l in feature-major row-major; do
  "$GRADCHECK" --config "$CFG" --set "model.layout=\"$l\"" --set data.synthetic_samples=2000 > "$OUT/gc.log" 2>&1 ||
    { cat "$OUT/gc.log"; fail "gradcheck $l"; }
  grep -q "$l" "$OUT/gc.log" && grep -q "^PASS" "$OUT/gc.log" || { cat "$OUT/gc.log"; fail "gradcheck $l"; }
done
echo PASS
