#!/usr/bin/env bash
# Hostile input and faults against the real daemon under mpirun (issue 18): every case ends with
# the documented exit code, a message naming the file or key, within a time limit, and with no
# good checkpoint or model lost.
#   hostile_test.sh <sfbd> <source dir> <hostile plugin> stop <rank>   kill -STOP one of 4 ranks mid-run
#   hostile_test.sh <sfbd> <source dir> <hostile plugin> cases         everything else
set -uo pipefail
SFBD=$1
SRC=$2
PLUGIN=$3
MODE=$4
source "$SRC/tests/mpi/lib.sh"
OUT=$(mktemp -d)
cleanup() {
  pkill -CONT -f -- "--set output.dir=$OUT" 2>/dev/null
  pkill -KILL -f -- "--set output.dir=$OUT" 2>/dev/null
  rm -rf "$OUT"
}
trap cleanup EXIT
SMALL="$SRC/configs/test_fashion_small.toml"
failures=0
passed=0

RUN2=("${SFB_MPIRUN[@]}" -np 2 "$SFBD" --config "$SMALL")
RUN1=("${SFB_MPIRUN[@]}" -np 1 "$SFBD")
finish() {
  echo "$passed passed, $failures failed"
  [ "$failures" = 0 ]
  exit $?
}

if [ "$MODE" = stop ]; then
  # Item 1: a frozen rank. The live ranks must notice within runtime.peer_timeout_s (3 s) plus
  # scheduling slack, name the stopped rank, and the job must end with exit code 3.
  victim_rank=$5
  "${SFB_MPIRUN[@]}" -np 4 "$SFBD" --config "$SMALL" --set stop.max_clocks=100000000 --set runtime.peer_timeout_s=3 \
    --set checkpoint.path=ck.bin --set checkpoint.every=100 --set eval.every=100 --set output.log_level=info \
    --set output.dir="$OUT" > "$OUT/log" 2>&1 &
  job=$!
  for _ in $(seq 1 300); do [ -s "$OUT/metrics.jsonl" ] && break; sleep 0.1; done
  sleep 1
  victim=""
  for p in $(pgrep -f -- "--set output.dir=$OUT"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim_rank" && victim=$p
  done
  [ -n "$victim" ] || { echo "FAIL: rank $victim_rank not found"; tail "$OUT/log"; exit 1; }
  t0=$(date +%s)
  kill -STOP "$victim"
  code=0
  for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    echo "FAIL: the job still runs 60 s after rank $victim_rank was stopped"; tail -5 "$OUT/log"; exit 1
  fi
  wait "$job" || code=$?
  took=$(($(date +%s) - t0))
  echo "job ended $took s after SIGSTOP of rank $victim_rank, exit $code"
  grep -E "no progress from rank $victim_rank|did not finish within|no .* message for" "$OUT/log" | head -3
  [ "$code" = 3 ] || { echo "FAIL: exit code $code, want 3"; tail -8 "$OUT/log"; exit 1; }
  [ "$took" -le 30 ] || { echo "FAIL: $took s, want <= 3 s timeout + slack"; exit 1; }
  grep -q "rank $victim_rank" "$OUT/log" || { echo "FAIL: rank $victim_rank is not named"; tail -8 "$OUT/log"; exit 1; }
  echo PASS
  exit 0
fi

# Item 2: a diverging DML: NaN never reaches the metric's sort; exit 4, no model written.
expect dml-diverges 4 120 "diverged" -- "${RUN1[@]}" --config "$SMALL" --set model.name=dml \
  --set model.dim=8 --set optimizer.lr=10 --set stop.max_clocks=100 --set eval.every=50 --set output.dir="$OUT/dml"
[ ! -e "$OUT/dml/model.bin" ] || { echo "FAIL: a diverged model.bin was written"; failures=$((failures + 1)); }
jq -e '.stop_reason == "diverged" and .final_objective == null' "$OUT/dml/summary.json" > /dev/null \
  || { echo "FAIL: summary.json is not valid JSON with null for NaN"; failures=$((failures + 1)); }
if grep -q "nan" "$OUT/dml/metrics.jsonl" "$OUT/dml/summary.json"; then
  echo "FAIL: a bare nan in the JSON files"; failures=$((failures + 1))
fi

# Item 3: durations the code cannot honour are refused.
expect huge-timeout 2 60 "runtime.peer_timeout_s must be in [0.001, 31536000]" -- "${RUN2[@]}" --set runtime.peer_timeout_s=1e300 \
  --set output.dir="$OUT/o3"

# Item 4: a run that turns NaN at clock 25 keeps its last good checkpoint (clock 20), which resumes.
nan=(--set model.plugin="$PLUGIN" --set 'model.params.fault="nan_from_25"' --set checkpoint.path=ck.bin
     --set checkpoint.every=10 --set eval.every=10 --set stop.max_clocks=200 --set output.dir="$OUT/nan")
expect nan-run 4 120 "not written: the run stopped as \"diverged\"" -- "${RUN2[@]}" "${nan[@]}"
expect nan-checkpoint-resumes 0 120 "resuming from $OUT/nan/ck.bin at clock 20" -- "${RUN2[@]}" "${nan[@]}" \
  --set stop.max_clocks=22 --set output.log_level=info --resume "$OUT/nan/ck.bin"

# Item 5: output paths are proven before training.
expect model-in-subdir 0 120 "stop reason" -- "${RUN2[@]}" --set stop.max_clocks=20 --set output.dir="$OUT/o5" \
  --set output.model=models/final.bin
[ -s "$OUT/o5/models/final.bin" ] || { echo "FAIL: models/final.bin missing"; failures=$((failures + 1)); }
touch "$OUT/plain"
expect output-under-a-file 2 60 "output.dir: $OUT/plain/x: cannot create directory" -- "${RUN2[@]}" --set output.dir="$OUT/plain/x"
mkdir -p "$OUT/o5b" && touch "$OUT/o5b/f"
expect checkpoint-under-a-file 2 60 "checkpoint.path: $OUT/o5b/f: cannot create directory" -- "${RUN2[@]}" \
  --set output.dir="$OUT/o5b" --set checkpoint.path=f/ck.bin

# Item 6: two jobs on one output.dir.
"${RUN2[@]}" --set stop.max_clocks=100000000 --set output.dir="$OUT/shared" > "$OUT/first.log" 2>&1 &
first=$!
for _ in $(seq 1 300); do [ -e "$OUT/shared/.sfbd.lock" ] && [ -s "$OUT/shared/metrics.jsonl" ] && break; sleep 0.1; done
expect second-job-same-dir 2 60 "is in use by another sfbd job" -- "${RUN2[@]}" --set output.dir="$OUT/shared"
kill -TERM "$first" 2>/dev/null
wait "$first" 2>/dev/null

# Item 7: temporaries a killed writer left are removed.
mkdir -p "$OUT/o7" && head -c 100000 /dev/zero > "$OUT/o7/ck.bin.tmp.424242"
expect stale-temporaries 0 120 "stop reason" -- "${RUN2[@]}" --set stop.max_clocks=20 --set checkpoint.path=ck.bin \
  --set output.dir="$OUT/o7"
[ ! -e "$OUT/o7/ck.bin.tmp.424242" ] || { echo "FAIL: stale temporary kept"; failures=$((failures + 1)); }

# Item 8: IDX headers whose sizes overflow.
printf '\x00\x00\x08\x03\x00\x00\x00\x64\x80\x00\x00\x00\x80\x00\x00\x00' > "$OUT/wrap.idx"
printf '\x00\x00\x08\x01\x00\x00\x00\x64' > "$OUT/lab.idx"
head -c 100 /dev/zero >> "$OUT/lab.idx"
expect idx-overflow 2 60 "wrap.idx: IDX dimensions 100 x 2147483648 x 2147483648 describe more than 2^40 bytes" -- \
  "${RUN2[@]}" --set data.train_images="$OUT/wrap.idx" --set data.train_labels="$OUT/lab.idx" --set output.dir="$OUT/o8"

# Item 9: CNN layer numbers.
expect pool-zero 2 60 "pool size must be in [1, 1024], got 0" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" \
  --config "$SRC/configs/fashion_cnn_mgwfbp.toml" --set cnn.layers=pool:0,fc:10 --set output.dir="$OUT/o9"

# Item 10: the plugin boundary.
expect plugin-throws-int 3 60 "compute_sf() threw an exception that is not a std::exception" -- "${RUN2[@]}" \
  --set model.plugin="$PLUGIN" --set 'model.params.fault="throw_int"' --set output.dir="$OUT/o10"
expect plugin-config-error 2 60 "fault = \"config_error\" is not a setting I accept" -- "${RUN2[@]}" \
  --set model.plugin="$PLUGIN" --set 'model.params.fault="config_error"' --set output.dir="$OUT/o10b"

# Item 11: bad input found before the ranks start, reported once, exit 2.
expect resume-a-directory 2 60 "$OUT: cannot read checkpoint: it is a directory" -- "${RUN2[@]}" --resume "$OUT" \
  --set output.dir="$OUT/o11"
expect long-plugin-name 2 60 "model.plugin: a file name of 303 characters" -- "${RUN2[@]}" \
  --set model.plugin="$OUT/$(head -c 300 /dev/zero | tr '\0' p).so" --set output.dir="$OUT/o11b"
[ "$(wc -c <<<"$LAST_OUT")" -lt 3000 ] || { echo "FAIL: the long name was echoed in full"; failures=$((failures + 1)); }
[ "$(grep -c "a file name of 303" <<<"$LAST_OUT")" = 1 ] || { echo "FAIL: reported more than once"; failures=$((failures + 1)); }
# A checkpoint whose CRC and fingerprint are right but whose data file changed shape under it.
mk_idx() {  # <path> <n> <side>: n images of side x side, labels i % 2
  { printf '\x00\x00\x08\x03'; printf "\\x$(printf %02x $(($2 >> 24 & 255)))\\x$(printf %02x $(($2 >> 16 & 255)))\\x$(printf %02x $(($2 >> 8 & 255)))\\x$(printf %02x $(($2 & 255)))";
    for _ in 1 2; do printf "\\x00\\x00\\x00\\x$(printf %02x "$3")"; done
    head -c $(($2 * $3 * $3)) /dev/urandom; } > "$1.img"
  { printf '\x00\x00\x08\x01'; printf "\\x$(printf %02x $(($2 >> 24 & 255)))\\x$(printf %02x $(($2 >> 16 & 255)))\\x$(printf %02x $(($2 >> 8 & 255)))\\x$(printf %02x $(($2 & 255)))";
    for i in $(seq 1 "$2"); do printf "\\x0$((i % 2))"; done; } > "$1.lab"
}
mk_idx "$OUT/d" 200 4
shape=(--set data.train_images="$OUT/d.img" --set data.train_labels="$OUT/d.lab" --set data.test_images=""
       --set data.test_labels="" --set checkpoint.path=ck.bin --set stop.max_clocks=20 --set output.dir="$OUT/o11c")
"${RUN2[@]}" "${shape[@]}" > /dev/null 2>&1
mk_idx "$OUT/d" 200 5
expect checkpoint-shape 2 60 "ck.bin: the checkpoint's W is 2 x 17 but model \"mlr\" on this data is 2 x 26" -- "${RUN2[@]}" \
  "${shape[@]}" --set stop.max_clocks=30 --resume "$OUT/o11c/ck.bin"

# Item 12: configs that cannot fit are refused at start-up, naming the keys.
expect huge-minibatch 2 60 "optimizer.minibatch" -- "${RUN2[@]}" --set optimizer.minibatch=1048576 --set output.dir="$OUT/o12"
expect huge-dml 2 60 "the model's shape" -- "${RUN2[@]}" --set model.name=dml --set model.dim=16777216 --set output.dir="$OUT/o12b"
expect huge-features 2 60 "data.features" -- "${RUN2[@]}" --set data.format=synthetic --set data.features=2147483648 \
  --set data.classes=2 --set output.dir="$OUT/o12c"
expect ulimit-v 2 60 "needs about" -- bash -c 'ulimit -v 3000000; exec "$@"' _ "${RUN1[@]}" --config "$SMALL" \
  --set data.format=synthetic --set data.features=200000 --set data.classes=100 --set data.synthetic_samples=20000 \
  --set output.dir="$OUT/o12d"

# Item 13: messages that say what is actually wrong, and short.
token="$(head -c 10000000 /dev/zero | tr '\0' 9)x"
printf '1 1:%s\n0 1:%s\n' "$token" "$token" > "$OUT/long.svm"
lib=(--set data.format=libsvm --set data.features=10 --set data.classes=2)
expect long-token 2 60 "(10000001 bytes)" -- "${RUN2[@]}" "${lib[@]}" --set data.train="$OUT/long.svm" --set output.dir="$OUT/o13"
[ "$(wc -c <<<"$LAST_OUT")" -lt 5000 ] || { echo "FAIL: the token was echoed in full"; failures=$((failures + 1)); }
: > "$OUT/empty.svm"
expect empty-data 2 60 "empty.svm: no data rows" -- "${RUN2[@]}" "${lib[@]}" --set data.train="$OUT/empty.svm" --set output.dir="$OUT/o13b"
expect data-is-a-directory 2 60 "is a directory, not a libsvm file" -- "${RUN2[@]}" "${lib[@]}" --set data.train="$OUT" \
  --set output.dir="$OUT/o13c"
expect config-is-a-directory 2 60 "$OUT: is a directory, not a config file" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" --config "$OUT"
printf '+1 1:1e-50 2:1\n0 3:1\n+1 1:1\n0 4:1\n' > "$OUT/plus.svm"
expect plus-labels 0 60 "stop reason" -- "${RUN2[@]}" "${lib[@]}" --set data.train="$OUT/plus.svm" --set data.test="" \
  --set optimizer.minibatch=1 --set stop.max_clocks=5 --set output.dir="$OUT/o13d"
expect empty-output-dir 2 60 "output.dir is empty" -- "${RUN2[@]}" --set output.dir=""
finish
