#!/usr/bin/env bash
# Hostile input and faults, round 3 (issue 29), against the installed tools: each case ends with the
# documented exit code and message within a time limit, nothing good is replaced, nothing a run
# directory holds can execute.
#   hostile3_test.sh <sfbd> <source dir> <sfb-gradcheck> <mgwfbp-plan> <sfb-datagen> <hostile plugin>
set -uo pipefail
SFBD=$1
SRC=$2
GRADCHECK=$3
PLAN=$4
DATAGEN=$5
PLUGIN=$6
source "$SRC/tests/mpi/lib.sh"
export OMP_NUM_THREADS=1
OUT=$(mktemp -d)
cleanup() {
  pkill -KILL -f -- "$OUT" 2> /dev/null
  rm -rf "$OUT" /tmp/sfb-hostile3-pwned.$$
}
trap cleanup EXIT
SMALL="$SRC/configs/test_fashion_small.toml"
CNN="$SRC/configs/fashion_cnn_mgwfbp.toml"
RUN2=("${SFB_MPIRUN[@]}" -np 2 "$SFBD" --config "$SMALL")
failures=0
passed=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; passed=$((passed + 1)); }


echo "== 1. sfb-plot: nothing in a metrics file executes; a plot with nothing on it replaces nothing"
pwned=/tmp/sfb-hostile3-pwned.$$
evil="$OUT/it's a run"
mkdir -p "$evil"
key="x';print(system(\"touch\${IFS}$pwned\"));#"
for c in 10 20; do
  jq -cn --arg k "$key" --argjson c $c '{clock: $c, seconds: ($c / 10), objective: (3 - $c / 10), accuracy: 0.5} + {($k): 1, "ok_metric": 2}'
done > "$evil/metrics.jsonl"
expect plot-injection 0 60 "skipped" -- "$SRC/apps/sfb-plot" "$evil"
[ -e "$pwned" ] && fail "plot-injection: the metric name ran a command"
[ -s "$evil/plot.png" ] && [ -s "$evil/plot-metrics.png" ] || fail "plot-injection: no plots"
cp "$evil/plot.png" "$OUT/good.png"
echo '{"clock":10,"seconds":1,"objective":null,"accuracy":null}' > "$OUT/nulls.jsonl"
expect plot-blank 2 60 "nothing to plot" -- "$SRC/apps/sfb-plot" -o "$evil/plot.png" "$OUT/nulls.jsonl"
cmp -s "$OUT/good.png" "$evil/plot.png" || fail "plot-blank: the good plot was replaced"

echo "== 2. a run whose weights diverge writes no checkpoint or model with them"
expect diverged-checkpoints 4 120 "not written" -- "${RUN2[@]}" --set optimizer.lr=5 --set stop.max_clocks=60 \
  --set eval.every=10 --set stop.divergence_factor=12 --set checkpoint.path=ck.bin --set checkpoint.every=1 \
  --set output.log_level=info --set output.dir="$OUT/dv"
[ -e "$OUT/dv/ck.bin" ] && fail "diverged-checkpoints: a checkpoint of judged-bad weights was written"
[ -e "$OUT/dv/model.bin" ] && fail "diverged-checkpoints: a model was written"

echo "== 3. outputs never overwrite each other or a live job's"
expect same-file-profile 2 60 "output.summary and output.profile are the same file" -- \
  "$SFBD" --config "$CNN" --set output.dir="$OUT/o1" --set output.profile=summary.json --check
expect same-file-trace 2 60 "output.metrics and output.trace are the same file" -- \
  "$SFBD" --config "$CNN" --set output.dir="$OUT/o1" --set output.trace=metrics.jsonl
"${RUN2[@]}" --set stop.max_clocks=100000000 --set eval.every=100 --set output.dir="$OUT/live" > "$OUT/live.log" 2>&1 &
live=$!
for _ in $(seq 1 300); do [ -s "$OUT/live/metrics.jsonl" ] && break; sleep 0.1; done
expect live-metrics 2 60 "is in use by another sfbd job" -- "${RUN2[@]}" --set output.dir="$OUT/other" \
  --set output.metrics="$OUT/live/metrics.jsonl"
tr -d '\000' < "$OUT/live/metrics.jsonl" | cmp -s - "$OUT/live/metrics.jsonl" || fail "live-metrics: NUL bytes in the live job's metrics"
jq -c . "$OUT/live/metrics.jsonl" > /dev/null || fail "live-metrics: the live job's metrics are not JSON lines"
kill -TERM $live; wait $live

echo "== 4. the job dies with its supervisor; a stop request is latched; one supervisor per job"
SUP=(--set stop.max_clocks=100000000 --set eval.every=100 --set checkpoint.path=ck.bin --set checkpoint.every=100
     --set output.log_level=info)
"$SRC/apps/sfb-run" -- "${RUN2[@]}" "${SUP[@]}" --set output.dir="$OUT/s1" 2> "$OUT/s1.log" &
sup=$!
for _ in $(seq 1 300); do grep -q "checkpoint at clock 100 " "$OUT/s1/sfb-run/attempt-1.log" 2> /dev/null && break; sleep 0.1; done
expect second-supervisor 2 30 "another sfb-run supervises this job" -- "$SRC/apps/sfb-run" -- "${RUN2[@]}" "${SUP[@]}" \
  --set output.dir="$OUT/s1"
grep -q "checkpoint at clock 100 " "$OUT/s1/sfb-run/attempt-1.log" || fail "second-supervisor: attempt-1.log was truncated"
kill -9 $sup
t0=$(date +%s)
while pgrep -f -- "output.dir=$OUT/s1" > /dev/null; do
  [ $(($(date +%s) - t0)) -lt 30 ] || break
  sleep 0.2
done
if pgrep -f -- "output.dir=$OUT/s1" > /dev/null; then fail "kill -9 of sfb-run: the job still runs after 30 s"; else
  ok "kill -9 of sfb-run: the job ended $(($(date +%s) - t0)) s later"; fi
# A signal while sfb-run waits between attempts (a killed rank, then --restart-delay).
"$SRC/apps/sfb-run" --restart-delay 60 -- "${RUN2[@]}" "${SUP[@]}" --set output.dir="$OUT/s2" 2> "$OUT/s2.log" &
sup=$!
for _ in $(seq 1 300); do grep -q "checkpoint at clock 100 " "$OUT/s2/sfb-run/attempt-1.log" 2> /dev/null && break; sleep 0.1; done
for p in $(pgrep -f -- "output.dir=$OUT/s2"); do
  [ "$(cat /proc/$p/comm 2> /dev/null)" = sfbd ] && tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null \
    | grep -qx "OMPI_COMM_WORLD_RANK=1" && kill -9 "$p"
done
for _ in $(seq 1 300); do grep -q "waiting 60 s" "$OUT/s2.log" 2> /dev/null && break; sleep 0.1; done
grep -q "waiting 60 s" "$OUT/s2.log" || fail "stop between attempts: sfb-run never reached the restart delay"
kill -TERM $sup
rc=0
timeout 30 tail --pid=$sup -f /dev/null || rc=$?
wait $sup
got=$?
if [ $rc = 0 ] && [ $got = 6 ] && [ ! -e "$OUT/s2/sfb-run/attempt-2.log" ]; then ok "stop between attempts: exit 6, no attempt 2"; else
  fail "stop between attempts: exit $got (wanted 6), attempt 2 $( [ -e "$OUT/s2/sfb-run/attempt-2.log" ] && echo started || echo 'not started')"
  tail -5 "$OUT/s2.log"
fi

echo "== 5. the CNN's empty layers and a model too large for gradcheck"
for layers in "conv:4:5,,fc:10" ",conv:4:5,fc:10" "conv:4:5, ,fc:10" "conv:4:5,fc:10,"; do
  expect "cnn-layers '$layers'" 2 60 "cnn.layers: an empty layer" -- "$SFBD" --config "$CNN" --set output.dir="$OUT/c" \
    --set cnn.layers="$layers" --check
done
expect cnn-layers-run 2 60 "cnn.layers: an empty layer" -- "$SFBD" --config "$CNN" --set output.dir="$OUT/c" \
  --set cnn.layers="conv:4:5,,fc:10"
expect gradcheck-too-large 2 60 "reduce those keys" -- "$GRADCHECK" --config "$SRC/configs/synthetic_l2mlr_large.toml" \
  --set data.features=2000000000 --set data.classes=1000000

echo "== 6. clocks are bounded: nothing can overflow"
expect max-clocks-2-63 2 30 "stop.max_clocks" -- "$SFBD" --config "$SMALL" --set output.dir="$OUT/c" \
  --set stop.max_clocks=9223372036854775807 --check
expect staleness-huge 2 30 "sfb.staleness must be 0 to 2^53" -- "$SFBD" --config "$SMALL" --set output.dir="$OUT/c" \
  --set sfb.staleness=9223372036854775000 --check

echo "== 7. refused at --check, not later"
expect show-empty 2 30 "no such config key" -- "$SFBD" --config "$SMALL" --set output.dir="$OUT/show" --show ""
[ -e "$OUT/show" ] && fail "show-empty: --show \"\" created the output directory"
"${RUN2[@]}" --set stop.max_clocks=100 --set checkpoint.path=ck.bin --set output.dir="$OUT/ck" > /dev/null 2>&1 || fail "a checkpoint to work with"
# The same checkpoint with every weight NaN and a valid CRC (the CRC-32 of gzip's trailer is zlib's).
ck="$OUT/ck/ck.bin" nan="$OUT/nan.bin"
size=$(stat -c %s "$ck")
{ head -c 64 "$ck"; printf '\0\0\0\0'; head -c 72 "$ck" | tail -c 4
  head -c $((size - 72)) /dev/zero | tr '\0' '\377'; } > "$nan.zero"  # 0xffffffff: NaN
crc=$(gzip -c < "$nan.zero" | tail -c 8 | head -c 4 | od -An -t x1 | tr -d ' \n')
{ head -c 64 "$nan.zero"; printf "\\x${crc:0:2}\\x${crc:2:2}\\x${crc:4:2}\\x${crc:6:2}"; tail -c +69 "$nan.zero"; } > "$nan"
expect check-nan-resume 2 60 "non-finite values" -- "$SFBD" --config "$SMALL" --set output.dir="$OUT/r" --resume "$nan" --check
expect check-epochs-resume 2 60 "stop.max_epochs = 0.001" -- "$SFBD" --config "$SMALL" --set output.dir="$OUT/r" \
  --set stop.max_epochs=0.001 --resume "$ck" --check
if "$SFBD" --version | grep -q "built without CUDA" || ! command -v nvidia-smi > /dev/null || ! nvidia-smi > /dev/null 2>&1; then
  expect check-cuda 2 60 'device = "cuda"' -- "$SFBD" --config "$CNN" --set output.dir="$OUT/cu" --set device=cuda --check
  expect run-cuda 2 60 'device = "cuda"' -- "$SFBD" --config "$CNN" --set output.dir="$OUT/cu" --set device=cuda
  [ -e "$OUT/cu" ] && fail "run-cuda: the refused run left $OUT/cu behind"
fi

echo "== 8. a file too large to read is refused by its size or its shape, before anything is allocated"
# A model file is streamed, never read whole: a 64 GiB file of zeros is refused by its magic, and one
# whose valid header claims a 2^20 x 2^14 W (64 GiB of data) by its shape, both in a second.
truncate -s 64G "$OUT/huge.bin"
expect evaluate-huge 2 30 "bad magic: not an sfb model file" -- "$SFBD" --config "$SMALL" --set output.dir="$OUT/e" \
  --evaluate "$OUT/huge.bin"
{ printf 'SFBMODEL\x01\x00\x00\x00\x01\x00\x00\x00'; printf '\x00\x00\x10\x00\x00\x00\x00\x00'
  printf '\x00\x40\x00\x00\x00\x00\x00\x00'; printf '\x00\x00\x00\x00\x00\x00\x00\x00'; } > "$OUT/huge_model.bin"
truncate -s $((40 + (1 << 36))) "$OUT/huge_model.bin"
expect evaluate-huge-shape 2 30 "the file's W is 1048576 x 16384 but model" -- "$SFBD" --config "$SMALL" \
  --set output.dir="$OUT/e" --evaluate "$OUT/huge_model.bin"
rm -f "$OUT/huge_model.bin"
expect resume-huge 2 30 "more than this process can allocate" -- "$SFBD" --config "$CNN" --set output.dir="$OUT/e" \
  --resume "$OUT/huge.bin" --check
rm -f "$OUT/huge.bin"
# A network too large is estimated from cnn.layers before it is built, naming the key.
expect cnn-too-large 2 60 "cnn.layers" -- "$SFBD" --config "$CNN" --set output.dir="$OUT/e" \
  --set cnn.layers=fc:2000000,relu,fc:1000 --check
expect cnn-too-large-evaluate 2 60 "cnn.layers" -- "$SFBD" --config "$CNN" --set output.dir="$OUT/e" \
  --set cnn.layers=fc:2000000,relu,fc:1000 --evaluate "$OUT/ck/ck.bin"

echo "== 9. every installed tool exits 2 on bad arguments"
expect gradcheck-args 2 30 "--config is required" -- "$GRADCHECK"
expect gradcheck-range 2 30 "--samples: '0' is not an integer in [1, 1048576]" -- "$GRADCHECK" --config "$SMALL" --samples 0
expect plan-args 2 30 "" -- "$PLAN" --no-such-option
expect datagen-args 2 30 "is required" -- "$DATAGEN" --features 10

echo "== 11. a plugin's contract error names the plugin and the call, once; the summary's settings are typed"
expect contract-error 3 60 'model "hostile" (plugin '"$PLUGIN"'): compute_sf() at clock 0: write_v(0): v has length 784' -- \
  "${SFB_MPIRUN[@]}" -np 4 "$SFBD" --config "$SMALL" --set model.plugin="$PLUGIN" --set 'model.params.fault="short_v"' \
  --set output.dir="$OUT/cv"
n=$(grep -c "fatal" <<< "$LAST_OUT")
[ "$n" = 1 ] && ok "contract-error printed once" || fail "contract-error printed $n times"
"${RUN2[@]}" --set sfb.broadcast=halton --set stop.max_clocks=20 --set output.dir="$OUT/typed" > /dev/null 2>&1 || fail "typed run"
# (Halton at P = 2 reaches the one other worker: it trains, and is recorded, as full broadcast.)
jq -e '.settings["sfb.staleness"] == 0 and .settings["sfb.broadcast"] == "full" and .settings["optimizer.lr"] == 0.1
       and .receivers_per_clock == 1' "$OUT/typed/summary.json" > /dev/null && ok "typed settings, receivers_per_clock" \
  || fail "settings not typed: $(jq -c '[.settings["sfb.staleness"], .settings["sfb.broadcast"], .receivers_per_clock]' "$OUT/typed/summary.json")"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
