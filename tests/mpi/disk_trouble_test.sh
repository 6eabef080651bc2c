#!/usr/bin/env bash
# Disk trouble loses nothing: sfbd on a tiny tmpfs (needs root; skipped with 77 otherwise).
#  1. full disk while checkpointing: the failed checkpoints are reported and training goes on, the
#     previous checkpoint stays whole and resumable, the model that cannot be written is reported
#     with exit code 3, and no temporary or truncated file is left under any name;
#  2. full disk while writing metrics: the file keeps only complete JSON lines, training goes on;
#  3. the output directory becomes unwritable mid-run (replaced by a file): the same.
#   disk_trouble_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
source "$SRC/scripts/common.sh"
export OMP_NUM_THREADS=1
CFG="$SRC/configs/test_fashion_small.toml"
WORK=$(mktemp -d)
MNT="$WORK/mnt"
mkdir -p "$MNT"
cleanup() { umount "$MNT" 2> /dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
mount_tmpfs() {  # <size>
  umount "$MNT" 2> /dev/null || true
  mount -t tmpfs -o "size=$1" tmpfs "$MNT" 2> "$WORK/mount.err"
}
if [ "$(id -u)" != 0 ] || ! mount_tmpfs 64k; then
  echo "SKIP: cannot mount a tmpfs here ($(cat "$WORK/mount.err" 2> /dev/null))"
  exit 77
fi
run() {  # <log> <args...>: sfbd on 2 ranks, output in $MNT/run; sets rc
  local log=$1; shift
  set +e
  sfb_mpirun -np 2 "$SFBD" --config "$CFG" --set output.dir="\"$MNT/run\"" "$@" > "$log" 2>&1
  rc=$?
  set -e
}
no_partial_files() {
  if ls "$MNT/run" | grep -q "\.tmp\."; then ls -la "$MNT/run"; fail "$1: a temporary file was left"; fi
}
resumable() {  # the checkpoint left behind continues the run to its end
  mkdir -p "$WORK/resume"
  sfb_mpirun -np 2 "$SFBD" --config "$CFG" --set stop.max_clocks=600 --set output.log_level=info \
    --set output.dir="\"$WORK/resume/$1\"" \
    --resume "$MNT/run/ck.bin" > "$WORK/resume-$1.log" 2>&1 || { cat "$WORK/resume-$1.log"; fail "$1: resume"; }
  grep -q "resuming from $MNT/run/ck.bin at clock $2" "$WORK/resume-$1.log" || { cat "$WORK/resume-$1.log"; fail "$1: resumed elsewhere"; }
}

echo "== 1. full disk while checkpointing (64 KiB: one 31 KiB checkpoint fits, a second beside it does not)"
run "$WORK/1.log" --set checkpoint.path=ck.bin --set checkpoint.every=100 --set stop.max_clocks=500 --set eval.every=100
[ $rc = 3 ] || { cat "$WORK/1.log"; fail "exit code $rc, expected 3"; }
grep -q "checkpoint at clock 200 not written: .*No space left on device; $MNT/run/ck.bin keeps clock 100; training continues" "$WORK/1.log" \
  || { cat "$WORK/1.log"; fail "no checkpoint error"; }
grep -q "$MNT/run/model.bin not written: .*No space left on device; the last checkpoint written, $MNT/run/ck.bin, is intact" "$WORK/1.log" \
  || { cat "$WORK/1.log"; fail "no model error"; }
[ "$(jq -r .clock "$MNT/run/metrics.jsonl" | tail -1)" = 500 ] || fail "training did not go on to clock 500"
[ ! -e "$MNT/run/model.bin" ] || fail "a model.bin appeared"
no_partial_files 1
resumable 1 100

echo "== 2. full disk while writing metrics (16 KiB: the resolved config, plan.json and one page of metrics)"
mount_tmpfs 16k
run "$WORK/2.log" --set stop.max_clocks=500 --set eval.every=5 --set output.log_level=info --set output.model='""' --set output.summary='""'
grep -q "metrics.jsonl: write failed: No space left on device; no more metrics lines are written" "$WORK/2.log" \
  || { cat "$WORK/2.log"; fail "no metrics error"; }
[ "$(wc -l < "$MNT/run/metrics.jsonl")" -ge 2 ] || fail "metrics.jsonl has fewer than 2 lines"
jq -e . "$MNT/run/metrics.jsonl" > /dev/null || fail "metrics.jsonl has a broken line"
[ "$(tail -c 1 "$MNT/run/metrics.jsonl" | od -An -c | tr -d ' ')" = '\n' ] || fail "metrics.jsonl ends in half a line"
grep -q "done at clock 500" "$WORK/2.log" || { cat "$WORK/2.log"; fail "training did not go on"; }
[ $rc = 0 ] || { cat "$WORK/2.log"; fail "exit code $rc with nothing else to write"; }
no_partial_files 2

echo "== 3. the output directory is replaced by a file mid-run"
# (A read-only remount is refused while sfbd has files open for writing, so the unwritable
# directory is made this way: every later write fails with "Not a directory".)
run_bg() {
  sfb_mpirun -np 2 "$SFBD" --config "$CFG" --set output.dir="\"$MNT/run\"" --set checkpoint.path=ck.bin \
    --set checkpoint.every=50 --set stop.max_clocks=30000 --set eval.every=500 > "$WORK/3.log" 2>&1
}
mount_tmpfs 4m
run_bg &
job=$!
for _ in $(seq 1 200); do [ -s "$MNT/run/ck.bin" ] && break; sleep 0.05; done
[ -s "$MNT/run/ck.bin" ] || fail "no first checkpoint"
mv "$MNT/run" "$MNT/moved"
echo "not a directory" > "$MNT/run"
set +e
wait $job
rc=$?
set -e
[ $rc = 3 ] || { cat "$WORK/3.log"; fail "exit code $rc, expected 3"; }
grep -q "checkpoint at clock [0-9]* not written: .*Not a directory" "$WORK/3.log" || { cat "$WORK/3.log"; fail "no checkpoint error"; }
grep -q "model.bin not written: .*Not a directory" "$WORK/3.log" || { cat "$WORK/3.log"; fail "no model error"; }
ck_clock=$(grep -o "keeps clock [0-9]*" "$WORK/3.log" | tail -1 | awk '{ print $3 }')
[ -n "$ck_clock" ] || { cat "$WORK/3.log"; fail "no clock kept"; }
rm "$MNT/run"
mv "$MNT/moved" "$MNT/run"
no_partial_files 3
resumable 3 "$ck_clock"
echo PASS
