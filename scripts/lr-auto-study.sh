#!/usr/bin/env bash
# optimizer.lr = "auto" against hand-set rates at equal clocks (the table in docs/models.md): for each
# job, one run with "auto" (its choice, the search's seconds, the accuracy) and one per hand-set
# rate of the half-decade grid around the best, 4 ranks, BSP; every number is the run's test accuracy
# from summary.json. Jobs: fashion (configs/fashion_mlr.toml, 3000 clocks), tfidf (a text-like
# sparse file from scripts/tfidf-like-data.py, 5 epochs), gauss (sfb-datagen's sparse Gaussian
# rows, 5 epochs), cnn (configs/fashion_cnn_mgwfbp.toml, 2000 iterations; about 15 minutes here).
#   scripts/lr-auto-study.sh [OUT_DIR] [JOB...]     (default: every job)
set -euo pipefail
source "$(dirname "$0")/common.sh"
OUT=${1:-runs/lr-auto-study}
shift || true
[ $# -gt 0 ] || set -- fashion tfidf gauss cnn
JOBS=("$@")
sfb_build sfbd sfb-datagen
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
B=$SFB_BUILD/apps
data() {
  [ -s "$OUT/tfidf_train.svm" ] || python3 "$SFB_ROOT/scripts/tfidf-like-data.py" "$OUT/tfidf_train.svm" "$OUT/tfidf_test.svm"
  [ -s "$OUT/gauss_train.svm" ] || {
    "$B/sfb-datagen" --samples 30000 --features 20000 --classes 50 --density 0.009 --out "$OUT/gauss_train.svm"
    "$B/sfb-datagen" --samples 10000 --features 20000 --classes 50 --density 0.009 --test --out "$OUT/gauss_test.svm"
  } > /dev/null
}
sparse_config() {  # name -> a config of the sparse job on that file pair
  cat > "$OUT/$1.toml" <<TOML
[job]
mode = "sfb"
seed = 42
[data]
format = "libsvm"
train = "$OUT/$1_train.svm"
test = "$OUT/$1_test.svm"
features = 20000
classes = 50
[model]
name = "mlr"
[optimizer]
minibatch = 64
[stop]
max_epochs = 5
TOML
}
run() {  # job config lr extra-args... -> prints "lr accuracy"
  local job=$1 cfg=$2 lr=$3; shift 3
  local v=$lr d="$OUT/$job/lr$lr"
  [ "$lr" = auto ] && v='"auto"'
  sfb_mpirun -np 4 "$B/sfbd" --config "$cfg" --set optimizer.lr="$v" --set output.dir="$d" "$@" > "$d.log" 2>&1 ||
    { echo "$job lr $lr failed: $(tail -3 "$d.log")" >&2; return 1; }
  jq -r '[.lr_search.chosen // "", .lr_search.seconds // "", (.final_accuracy // .test_accuracy)] | @tsv' "$d/summary.json"
}
study() {  # job config grid extra-args...
  local job=$1 cfg=$2 grid=$3; shift 3
  mkdir -p "$OUT/$job"
  read -r chosen secs acc < <(run "$job" "$cfg" auto "$@")
  local best=0 best_lr= row=""
  for lr in $grid; do
    a=$(run "$job" "$cfg" "$lr" "$@" | cut -f3)
    row+=" $lr: $(awk -v a="$a" 'BEGIN { printf "%.2f%%", 100 * a }'),"
    if awk -v a="$a" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$a best_lr=$lr; fi
  done
  printf '| %s | %.4g (%s s) | %.2f%% | %s best %s | %+.2f |\n' "$job" "$chosen" "$secs" \
    "$(awk -v a="$acc" 'BEGIN { print 100 * a }')" "${row%,}" "$best_lr" \
    "$(awk -v a="$acc" -v b="$best" 'BEGIN { print 100 * (a - b) }')"
}
echo "| job | auto chose (search) | accuracy with auto | hand-set rates | auto - best (points) |"
echo "|---|---|---|---|---|"
for job in "${JOBS[@]}"; do
  case $job in
    fashion) study fashion "$SFB_ROOT/configs/fashion_mlr.toml" "0.01 0.0316 0.0562 0.1 0.178 0.316 1" --set stop.max_clocks=3000 ;;
    tfidf) data; sparse_config tfidf; study tfidf "$OUT/tfidf.toml" "3.16 10 31.6 56.2 100 178 316 1000" ;;
    gauss) data; sparse_config gauss; study gauss "$OUT/gauss.toml" "0.0316 0.1 0.316 1 3.16 10" ;;
    cnn) study cnn "$SFB_ROOT/configs/fashion_cnn_mgwfbp.toml" "0.00316 0.01 0.02 0.0316 0.0562 0.1" --set output.trace='""' ;;
    *) echo "unknown job $job (fashion tfidf gauss cnn)" >&2; exit 2 ;;
  esac
done
