#!/usr/bin/env bash
# The plugin API end to end: install sfb into a temporary prefix, build examples/plugins out of
# tree with find_package(sfb), train it under `mpirun -np 4 sfbd` on Fashion-MNIST (>= 78% test
# accuracy, identical replicas), and check that sfbd refuses a plugin of another ABI version and a
# missing plugin file with exit code 2 and a message naming the file.
#   plugin_test.sh <sfbd> <source dir> <build dir> <bad-ABI plugin>
set -euo pipefail
SFBD=$1
SRC=$2
BUILD=$3
BAD=$4
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
run() { sfb_mpirun -np 4 "$SFBD" "$@"; }
field() { sfb_field "$1" "$OUT/run/summary.json"; }

echo "== install sfb into $OUT/prefix"
cmake --install "$BUILD" --prefix "$OUT/prefix" > "$OUT/install.log"
for f in include/sfb/api/plugin.h include/sfb/api/errors.h bin/sfbd bin/sfb-gradcheck bin/sfb-plot bin/sfb-run \
         share/doc/sfb/plugins.md share/doc/sfb/README.md share/sfb/configs/fashion_mlr.toml \
         share/sfb/examples/plugins/CMakeLists.txt; do
  [ -e "$OUT/prefix/$f" ] || fail "$f not installed"
done
echo "== build the installed examples/plugins out of tree against it"
cmake -S "$OUT/prefix/share/sfb/examples/plugins" -B "$OUT/plugin-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$OUT/prefix" > "$OUT/configure.log" || { cat "$OUT/configure.log"; fail "configure"; }
cmake --build "$OUT/plugin-build" > "$OUT/build.log" || { cat "$OUT/build.log"; fail "build"; }
LIB="$OUT/plugin-build/libsmoothed_mlr.so"
[ -f "$LIB" ] || fail "no $LIB"
# The plugin must need nothing of sfb at load time: no undefined sfb symbols.
if nm -DC --undefined-only "$LIB" | grep -q "sfb::"; then
  nm -DC --undefined-only "$LIB" | grep "sfb::"; fail "the plugin imports sfb symbols"
fi

echo "== train it: mpirun -np 4 sfbd with model.plugin = $LIB"
run --config "$SRC/configs/test_fashion_small.toml" --set model.plugin="$LIB" \
    --set model.params.label_smoothing=0.1 --set output.dir="$OUT/run"
acc=$(field final_accuracy)
echo "final accuracy $acc, model $(field model)"
[ "$(field model)" = "smoothed_mlr" ] || fail "model name $(field model)"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }' || fail "accuracy $acc < 0.78"
sums=$(jq -r '.rank_checksums[]' "$OUT/run/summary.json" | sort -u | wc -l)
[ "$sums" = 1 ] || fail "replicas differ"

expect_refused() {  # <expected message> <sfbd args...>
  local want=$1; shift
  set +e
  run --config "$SRC/configs/test_fashion_small.toml" --set output.dir="$OUT/bad" "$@" > "$OUT/bad.log" 2>&1
  local rc=$?
  set -e
  [ $rc = 2 ] || { cat "$OUT/bad.log"; fail "exit code $rc, expected 2"; }
  grep -qF -- "$want" "$OUT/bad.log" || { cat "$OUT/bad.log"; fail "no '$want' in the error"; }
  echo "refused: $(grep -F -- "$want" "$OUT/bad.log" | head -1)"
}
echo "== the installed sfb-gradcheck passes the plugin's SFs"
"$OUT/prefix/bin/sfb-gradcheck" --config "$SRC/configs/test_fashion_small.toml" --set model.plugin="$LIB" \
  --set model.params.label_smoothing=0.1 > "$OUT/gc.log" 2>&1 || { cat "$OUT/gc.log"; fail "gradcheck of the plugin"; }
tail -1 "$OUT/gc.log"
echo "== bad plugins are refused"
expect_refused "$BAD was built for plugin ABI version 999" --set model.plugin="$BAD"
expect_refused "no such file: $OUT/missing.so" --set model.plugin="$OUT/missing.so"
expect_refused "unknown key model.params.label_smothing" --set model.plugin="$LIB" --set model.params.label_smothing=0.1
expect_refused "model.lambda is a key of the built-in models" --set model.plugin="$LIB" --set model.lambda=10
echo "plugin test passed"
