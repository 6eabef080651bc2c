#!/usr/bin/env bash
# The argument discipline of every installed tool (issue 38): a bad value of any option, NaN,
# infinity, a negative count or seed, an overflowing number, an empty list or a path that cannot
# be written ends with exit 2 and a message naming the option and the value, before any work;
# mgwfbp-plan runs gnuplot without a shell, with names as arguments (an --out path that closes a
# quote runs nothing).
#   tool_args_test.sh <source dir> <mgwfbp-plan> <sfb-gradcheck> <sfb-datagen> <sfb-commbench> <sfb-plan>
set -uo pipefail
SRC=$1 MGW=$2 GRAD=$3 GEN=$4 BENCH=$5 PLAN=$6
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
sfb_test_counting
C="$SRC/configs/synthetic_sparse.toml"

echo "== mgwfbp-plan"
expect mgw-gflops-inf 2 30 "--gflops: 'inf' is not a finite number" -- "$MGW" --model alexnet --gflops inf
expect mgw-forward-nan 2 30 "--forward-ms: 'nan'" -- "$MGW" --model alexnet --forward-ms nan
expect mgw-ratio-inf 2 30 "--forward-ratio: 'inf'" -- "$MGW" --model alexnet --forward-ratio inf
expect mgw-batch-0 2 30 "--batch: '0' is not an integer" -- "$MGW" --model alexnet --batch 0
expect mgw-nodes-overflow 2 30 "--nodes: '99999999999999' is not a node count" -- "$MGW" --model alexnet --nodes 99999999999999
expect mgw-ab-nan 2 30 "--network ab:nan,1: 'nan'" -- "$MGW" --model alexnet --network ab:nan,1
expect mgw-ab-huge 2 30 "'1e400' is not a finite number" -- "$MGW" --model alexnet --network ab:1e400,1
expect mgw-fit-min-neg 2 30 "--fit-min-bytes: '-1'" -- "$MGW" --model alexnet --fit-min-bytes -1
expect mgw-timeline-0 2 30 "--timeline-nodes: '0'" -- "$MGW" --model alexnet --timeline-nodes 0
expect mgw-trials-neg 2 30 "--random-trials: '-1'" -- "$MGW" --random-trials -1
expect mgw-trials-huge 2 30 "--random-trials: '1000000000'" -- "$MGW" --random-trials 1000000000
expect mgw-seed-neg 2 30 "--seed: '-1'" -- "$MGW" --random-trials 10 --seed -1
expect mgw-planners-empty 2 30 "--planners \"\": an empty planner name" -- "$MGW" --model alexnet --planners ""
expect mgw-planner-bad 2 30 "planner \"horovod:0\"" -- "$MGW" --model alexnet --planners horovod:0
grep -q "iteration ms" <<<"$LAST_OUT" && fail "mgwfbp-plan printed predictions before refusing --planners"
expect mgw-out-proc 2 30 "/proc/x: cannot create directory" -- "$MGW" --model alexnet --out /proc/x
evil="$OUT/o'; touch $OUT/PWNED; '"
mkdir -p "$evil"
expect mgw-out-quote 0 60 "wrote $evil/predictions.csv" -- "$MGW" --model alexnet --nodes 2,4 --out "$evil"
[ ! -e "$OUT/PWNED" ] && ok "mgwfbp-plan --out with a quote ran nothing" || fail "mgwfbp-plan --out ran a shell command"
if command -v gnuplot > /dev/null; then
  [ -s "$evil/speedup.png" ] && [ -s "$evil/timeline.png" ] && ok "plots written under the hostile name" ||
    fail "no plots under $evil"
fi

echo "== sfb-gradcheck"
expect grad-tol-nan 2 30 "--tolerance: 'nan'" -- "$GRAD" -c "$C" --tolerance nan
expect grad-steps-inf 2 30 "--steps: 'inf'" -- "$GRAD" -c "$C" --steps 0.01 inf
expect grad-seed-neg 2 30 "--seed: '-1'" -- "$GRAD" -c "$C" --seed -1
expect grad-samples-0 2 30 "--samples: '0'" -- "$GRAD" -c "$C" --samples 0

echo "== sfb-datagen"
G=("$GEN" --features 10 --classes 3 --out "$OUT/d.svm")
expect gen-separation-nan 2 30 "--separation: 'nan'" -- "${G[@]}" --separation nan
expect gen-density-nan 2 30 "--density: 'nan'" -- "${G[@]}" --density nan
expect gen-noise-inf 2 30 "--noise: 'inf'" -- "${G[@]}" --noise inf
expect gen-seed-neg 2 30 "--seed: '-1'" -- "${G[@]}" --seed -1
expect gen-features-huge 2 30 "--features: '99999999999999'" -- "$GEN" --features 99999999999999 --classes 3 --out "$OUT/d.svm"
expect gen-samples-huge 2 30 "--samples: '99999999999999999999'" -- "${G[@]}" --samples 99999999999999999999
expect gen-row-too-wide 2 30 "non-zeros per row" -- "$GEN" --features 2147483648 --classes 3 --out "$OUT/d.svm"
expect gen-out-proc 2 30 "--out" -- "$GEN" --features 10 --classes 3 --out /proc/x/d.svm
expect gen-out-dir 2 30 "--out" -- "$GEN" --features 10 --classes 3 --out "$OUT"
[ ! -e "$OUT/d.svm" ] && ok "no data file from refused arguments" || fail "a refused sfb-datagen wrote $OUT/d.svm"
# Many blocks (5000 dense features: 838 rows a block) stream to the same rows as sfbd's data.
expect gen-blocks 0 60 "2000 rows, 5000 features" -- "$GEN" --features 5000 --classes 3 --samples 2000 --density 1 \
  --out "$OUT/blocks.svm"
[ "$(wc -l < "$OUT/blocks.svm")" = 2000 ] && ok "2000 lines" || fail "blocks.svm has $(wc -l < "$OUT/blocks.svm") lines"

echo "== sfb-commbench, sfb-plan, sfb-run, sfb-netns-cluster"
expect bench-repeats-0 2 60 "--repeats: '0'" -- "${SFB_MPIRUN[@]}" -np 1 "$BENCH" --repeats 0
expect bench-a-nan 2 60 "--link-a-us: 'nan'" -- "${SFB_MPIRUN[@]}" -np 1 "$BENCH" --link-a-us nan
expect bench-sizes 2 60 "--max-bytes 4096 is below --min-bytes 8192" -- "${SFB_MPIRUN[@]}" -np 1 "$BENCH" \
  --min-bytes 8192 --max-bytes 4096
expect plan-clocks-nan 2 30 "--clocks: 'nan'" -- "$PLAN" --profile "$SRC/tests/data/scheme_profile_mlr512_k1024_4h_cpus.json" --clocks nan
expect plan-csv-proc 2 30 "--csv" -- "$PLAN" --profile "$SRC/tests/data/scheme_profile_mlr512_k1024_4h_cpus.json" \
  --csv /proc/x/p.csv
grep -q "^| N |" <<<"$LAST_OUT" && fail "sfb-plan printed predictions before refusing --csv"
expect bench-out-proc 2 60 "--out" -- "${SFB_MPIRUN[@]}" -np 1 "$BENCH" --out /proc/x/b.csv
expect run-restarts-huge 2 30 "--max-restarts '99999999999999999999'" -- "$SRC/apps/sfb-run" --max-restarts 99999999999999999999 -- true
expect run-min-ranks-0 2 30 "--min-ranks '0'" -- "$SRC/apps/sfb-run" --min-ranks 0 -- true
expect netns-period-0 2 30 "--cpu-period-us must be 1000..1000000 microseconds, got '0'" -- \
  "$SRC/scripts/netns-cluster.sh" up 2 --cpu-period-us 0
expect netns-cpus-nan 2 30 "--cpus must be cores per host" -- "$SRC/scripts/netns-cluster.sh" up 2 --cpus nan
expect plot-not-png 2 30 "-o x.txt: the output must be a .png file" -- "$SRC/apps/sfb-plot" -o x.txt "$OUT"

sfb_test_summary
