#!/usr/bin/env bash
# Hostile input and faults, round 5 (issue 69), against the installed tools: files that change
# between their check and their use (an LD_PRELOAD shim replaces the path at its N-th open), a
# corrupted header, outputs that are FIFOs or device nodes (made in a scratch directory), a resumed
# CNN trace named like the checkpoint, an lr = "auto" job restarted by sfb-run in both modes, a rate
# search with nothing to hold out, differing secret files, and the scripts' hostile arguments and
# environment. Each case: the documented exit code and message within a time limit, no crash, no
# hang, nothing replaced.
#   hostile5_test.sh <sfbd> <source dir> <swap_on_open shim> <sfb-datagen> [files|outputs|resume|outcomes|scripts]
# (one part, as ctest runs them side by side; all of them without the fifth argument)
set -uo pipefail
SFBD=$1
SRC=$2
SHIM=$3
DATAGEN=$4
PART=${5:-all}
part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
source "$SRC/tests/mpi/lib.sh"
export OMP_NUM_THREADS=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
sfb_test_counting
SMALL=(--config "$SRC/configs/synthetic_sparse.toml" --set data.synthetic_samples=4000 --set data.features=200
       --set data.synthetic_test_samples=200 --set eval.train_sample=200 --set sfb.staleness=0)
CNN=(--config "$SRC/configs/fashion_cnn_mgwfbp.toml" --set data.max_train_samples=2000 --set eval.every=20
     --set mgwfbp.profile_iters=5 --set output.trace='""')
RUN="$SRC/apps/sfb-run"

# reshape IN OUT: a checkpoint or model file of W's transpose shape (rows and columns swapped; the
# same length), its CRC made valid: a file that passes every check but does not fit the job.
reshape() {
  python3 - "$1" "$2" << 'PY'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], 'rb').read())
if b[:8] == b'SFBCKPT1':
    r, c = struct.unpack_from('<qq', b, 48); struct.pack_into('<qq', b, 48, c, r)
    h = bytearray(b[:72]); h[64:68] = bytes(4)
    struct.pack_into('<I', b, 64, zlib.crc32(bytes(b[72:]), zlib.crc32(bytes(h))))
else:
    r, c = struct.unpack_from('<qq', b, 16); struct.pack_into('<qq', b, 16, c, r)
open(sys.argv[2], 'wb').write(b)
PY
}

if part files; then
echo "== 1. a checkpoint or model.init replaced between its check and its use is refused (exit 2), no crash"
sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set stop.max_clocks=40 --set eval.every=20 --set checkpoint.path=ck.bin \
  --set checkpoint.every=20 --set output.dir="$OUT/base" > "$OUT/base.log" 2>&1 || fail "base run: $(tail -3 "$OUT/base.log")"
[ -s "$OUT/base/ck.bin" ] && [ -s "$OUT/base/model.bin" ] || fail "base run wrote no checkpoint or model"
# Open 2 is every rank's re-check before training, open 3 the stream itself (rank 0).
for case in rename:2 inplace:3; do
  mode=${case%:*} at=${case#*:}
  {
    cp "$OUT/base/ck.bin" "$OUT/ck-$mode$at.bin"
    reshape "$OUT/base/ck.bin" "$OUT/other-$mode$at.bin"
    expect "checkpoint-swapped-$mode-at-open-$at" 2 60 "$OUT/ck-$mode$at.bin: the checkpoint changed after it was verified" -- \
      "${SFB_MPIRUN[@]}" -np 2 env LD_PRELOAD="$SHIM" SFB_SWAP_PATH="$OUT/ck-$mode$at.bin" SFB_SWAP_AT=$at \
      SFB_SWAP_MODE=$mode SFB_SWAP_WITH="$OUT/other-$mode$at.bin" "$SFBD" "${SMALL[@]}" --set stop.max_clocks=60 \
      --set eval.every=20 --set checkpoint.path=ck.bin --set output.dir="$OUT/swap$mode$at" --resume "$OUT/ck-$mode$at.bin"
    grep -q "swap_on_open: .* before open $at" <<<"$LAST_OUT" || fail "checkpoint $mode $at: the shim did not swap"
    [ -e "$OUT/swap$mode$at/model.bin" ] || [ -e "$OUT/swap$mode$at/ck.bin" ] && fail "checkpoint $mode $at: a file was written"
  }
done
reshape "$OUT/base/model.bin" "$OUT/init-other.bin"
cp "$OUT/base/model.bin" "$OUT/init.bin"
expect model-init-swapped 2 60 "$OUT/init.bin: the model file changed after it was verified" -- \
  "${SFB_MPIRUN[@]}" -np 1 env LD_PRELOAD="$SHIM" SFB_SWAP_PATH="$OUT/init.bin" SFB_SWAP_AT=2 \
  SFB_SWAP_WITH="$OUT/init-other.bin" "$SFBD" "${SMALL[@]}" --set stop.max_clocks=20 --set model.init="$OUT/init.bin" \
  --set output.dir="$OUT/initswap"
[ -e "$OUT/initswap/model.bin" ] && fail "model-init-swapped: a model was written"
# Untouched, the same checkpoint resumes as before (the seal holds what was verified).
expect checkpoint-untouched 0 60 "" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${SMALL[@]}" --set stop.max_clocks=60 \
  --set eval.every=20 --set output.dir="$OUT/resumed" --resume "$OUT/base/ck.bin"

echo "== 2. a bit flipped in a checkpoint's header is reported as corruption, not by the field it changed"
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[33] ^= 1; open(sys.argv[2], 'wb').write(b)" \
  "$OUT/base/ck.bin" "$OUT/flipped.bin"
expect header-bit-flip 2 60 "$OUT/flipped.bin: checksum mismatch" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${SMALL[@]}" \
  --set stop.max_clocks=60 --set output.dir="$OUT/flip" --resume "$OUT/flipped.bin"
grep -q "this run stops at clock" <<<"$LAST_OUT" && fail "header-bit-flip: a corrupted field was trusted"

fi

if part outputs; then
echo "== 3. outputs that are not regular files are refused naming the key, never opened or replaced"
mkfifo "$OUT/trace.fifo" "$OUT/metrics.fifo"
expect trace-fifo 2 30 "output.trace: $OUT/trace.fifo is a FIFO" -- \
  "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${CNN[@]}" --set stop.max_clocks=20 --set output.trace="$OUT/trace.fifo" \
  --set output.dir="$OUT/tf"
expect metrics-fifo-one-rank 2 30 "output.metrics: $OUT/metrics.fifo is a FIFO" -- \
  "$SFBD" "${SMALL[@]}" --set stop.max_clocks=20 --set output.metrics="$OUT/metrics.fifo" --set output.dir="$OUT/mf"
[ -p "$OUT/trace.fifo" ] && [ -p "$OUT/metrics.fifo" ] || fail "a FIFO was replaced"
if mknod "$OUT/null" c 1 3 2> /dev/null; then
  expect model-device 2 30 "output.model: $OUT/null is a character device" -- \
    "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${SMALL[@]}" --set stop.max_clocks=20 --set output.model="$OUT/null" \
    --set output.dir="$OUT/md"
  expect datagen-device 2 30 "--out: $OUT/null is a character device" -- \
    "$DATAGEN" --samples 10 --features 5 --classes 2 --out "$OUT/null"
  [ -c "$OUT/null" ] && ok "the device node is still a device" || fail "the device node was replaced"
else
  echo "skip model-device, datagen-device: mknod needs root"
fi
mkdir -p "$OUT/lrf" && mkfifo "$OUT/lrf/lr_search.gp"
expect find-lr-script-fifo 2 30 "--find-lr's gnuplot script: $OUT/lrf/lr_search.gp is a FIFO" -- \
  "$SFBD" "${SMALL[@]}" --find-lr --set output.dir="$OUT/lrf"
[ -p "$OUT/lrf/lr_search.gp" ] || fail "find-lr-script-fifo: the FIFO was replaced"
mkdir -p "$OUT/sumdir"
expect summary-directory 2 30 "output.summary: $OUT/sumdir is a directory" -- \
  "$SFBD" "${SMALL[@]}" --set stop.max_clocks=20 --set output.summary="$OUT/sumdir" --set output.dir="$OUT/sd"

echo "== 4. a resumed CNN run's trace (<trace>.from-F.json) is claimed: never the checkpoint it resumes from"
sfb_mpirun -np 2 "$SFBD" "${CNN[@]}" --set stop.max_clocks=20 --set checkpoint.path=t.from-20.json \
  --set checkpoint.every=20 --set output.trace=t.json --set output.dir="$OUT/cnn" > "$OUT/cnn.log" 2>&1 ||
  fail "CNN run: $(tail -3 "$OUT/cnn.log")"
cp "$OUT/cnn/t.from-20.json" "$OUT/cnn-ck.copy"
expect cnn-trace-is-the-checkpoint 2 60 "output.trace (this resumed run's trace, $OUT/cnn/t.from-20.json)" -- \
  "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${CNN[@]}" --set stop.max_clocks=40 --set checkpoint.path=t.from-20.json \
  --set checkpoint.every=20 --set output.trace=t.json --set output.dir="$OUT/cnn" --resume "$OUT/cnn/t.from-20.json"
cmp -s "$OUT/cnn/t.from-20.json" "$OUT/cnn-ck.copy" && ok "the checkpoint is intact" || fail "the checkpoint was touched"

fi

if part resume; then
echo "== 5. an lr = \"auto\" job resumes from its own command: sfb-run's restart reuses the rate"
"$RUN" --max-restarts 2 -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${SMALL[@]}" --set optimizer.lr='"auto"' \
  --set optimizer.lr_search_clocks=10 --set stop.max_clocks=3000 --set eval.every=20 --set checkpoint.path=ck.bin \
  --set checkpoint.every=20 --set output.log_level=info --set output.dir="$OUT/auto" 2> "$OUT/auto.log" &
sup=$!
kill_rank 1 clock 100 "$OUT/auto" 1
rc=0
wait "$sup" || rc=$?
first=$(grep -o 'optimizer.lr = "auto": [0-9.e+-]* (' "$OUT/auto/sfb-run/attempt-1.log" | head -1 | cut -d' ' -f4)
again=$(grep -o 'optimizer.lr = "auto": [0-9.e+-]*, the rate the job that wrote' "$OUT/auto/sfb-run/attempt-2.log" | cut -d' ' -f4 | tr -d ,)
[ $rc = 0 ] && [ -n "$first" ] && [ "$first" = "$again" ] &&
  jq -e '.lr_search.from_checkpoint != null and (.lr_search.tried | length) == 0' "$OUT/auto/summary.json" > /dev/null &&
  ok "sfb mode: restarted, resumed with the rate $first without searching" ||
  fail "sfb mode: exit $rc, rate '$first' then '$again': $(tail -3 "$OUT/auto.log")"
"$RUN" --max-restarts 2 -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${CNN[@]}" --set optimizer.lr='"auto"' \
  --set optimizer.lr_search_clocks=5 --set stop.max_clocks=2000 --set checkpoint.path=ck.bin \
  --set checkpoint.every=20 --set output.log_level=info --set output.dir="$OUT/cauto" 2> "$OUT/cauto.log" &
sup=$!
kill_rank 1 iteration 40 "$OUT/cauto" 1
# The resumed attempt need not train 2000 iterations: stopped (exit 6) once it has chosen its rate.
for _ in $(seq 1 1500); do
  grep -q "not searched again\|searching the learning rate" "$OUT/cauto/sfb-run/attempt-2.log" 2> /dev/null && break
  kill -0 "$sup" 2> /dev/null || break
  sleep 0.1
done
kill -TERM "$sup" 2> /dev/null
rc=0
wait "$sup" || rc=$?
again=$(grep -c 'the rate the job that wrote .* chose (not searched again)' "$OUT/cauto/sfb-run/attempt-2.log" 2> /dev/null)
[ "${again:-0}" -ge 1 ] && ! grep -q "Resume with the config that wrote it\|resume with the config that wrote it" \
  "$OUT/cauto/sfb-run/attempt-2.log" && ok "CNN mode: restarted, resumed with the checkpoint's rate" ||
  fail "CNN mode: exit $rc: $(tail -3 "$OUT/cauto/sfb-run/attempt-2.log" 2> /dev/null)"

fi

if part outcomes; then
echo "== 6. a rate search with nothing to hold out says it judged on training rows"
expect lr-no-holdout 0 60 "judged on rows they train on" -- "${SFB_MPIRUN[@]}" -np 2 "$SFBD" "${SMALL[@]}" \
  --set data.synthetic_samples=6 --set optimizer.minibatch=1 --set optimizer.lr_search_clocks=4 --find-lr \
  --set output.dir="$OUT/noheld"
grep -q "judged by training objective (no rows could be held out)" <<<"$LAST_OUT" || fail "lr-no-holdout: the table says otherwise"

echo "== 7. ranks whose comm.secret_file differs are named before connecting (exit 2)"
mkdir -p "$OUT/ra" "$OUT/rb"
printf 'secret-a-0123456789' > "$OUT/ra/job.key"
printf 'secret-b-0123456789' > "$OUT/rb/job.key"
chmod 600 "$OUT/ra/job.key" "$OUT/rb/job.key"
expect secret-differs 2 60 "comm.secret_file = \"job.key\": rank(s) 1 read another secret" -- \
  "${SFB_MPIRUN[@]}" -np 1 -wdir "$OUT/ra" "$SFBD" "${SMALL[@]}" --set comm.transport=tcp --set comm.secret_file=job.key \
  --set stop.max_clocks=10 --set output.dir="$OUT/sec" : -np 1 -wdir "$OUT/rb" "$SFBD" "${SMALL[@]}" \
  --set comm.transport=tcp --set comm.secret_file=job.key --set stop.max_clocks=10 --set output.dir="$OUT/sec"

fi

if part scripts; then
echo "== 8. the scripts: sfb-run's flags, the netns and Slurm scripts' environment"
expect sfb-run-np-last 2 10 "the launcher's -np '': a rank count" -- "$RUN" -- mpirun -np
expect sfb-run-np-word 2 10 "the launcher's -n 'sfbd'" -- "$RUN" -- mpirun -n sfbd --config x.toml
expect sfb-run-restarts 2 10 "--max-restarts 'x'" -- "$RUN" --max-restarts x -- mpirun -np 2 sfbd
expect sfb-run-resume-last 2 10 "--resume needs a checkpoint" -- "$RUN" -- mpirun -np 2 "$SFBD" "${SMALL[@]}" --resume
# Checked through commands that change nothing (status, env): were the check ever lost, `down`
# with a prefix of .* would delete every link its old grep matched.
for prefix in '.*' 'sfb|lo' 'a b' 'x/../y' 'UPPER' 'waytoolongprefix' '-sfb'; do
  expect "netns-prefix '$prefix'" 2 10 "SFB_NETNS_PREFIX '$prefix'" -- env SFB_NETNS_PREFIX="$prefix" "$SRC/scripts/netns-cluster.sh" status
  expect "slurm-prefix '$prefix'" 2 10 "SFB_NETNS_PREFIX '$prefix'" -- env SFB_NETNS_PREFIX="$prefix" "$SRC/scripts/slurm-cluster.sh" env
done
for subnet in '8.8.8' '10.77' '10.77.0.0' '10.256.0' '10.77.0/8' '192.168.1;id'; do
  expect "netns-subnet '$subnet'" 2 10 "SFB_NETNS_SUBNET '$subnet'" -- env SFB_NETNS_SUBNET="$subnet" "$SRC/scripts/netns-cluster.sh" status
done
for port in 0 80 65536 '6917;id' ' 6918' '06918'; do
  expect "slurm-port '$port'" 2 10 "SFB_SLURMD_PORT '$port'" -- env SFB_SLURMD_PORT="$port" "$SRC/scripts/slurm-cluster.sh" env
done
# down deletes only what its own state file records, and only names of its pattern: a link named
# like its veths that it did not make (once deleted by `grep "^${PREFIX}v"`) stays.
prefix=sfbz$$
prefix=${prefix:0:10}
state=/tmp/$prefix-netns-cluster
mkdir -p "$state"
printf 'lo\neth0\n%sv1x\n' "$prefix" > "$state/links"
printf 'lo\n' > "$state/namespaces"
if ip link add "${prefix}v7" type dummy 2> /dev/null; then
  SFB_NETNS_PREFIX=$prefix "$SRC/scripts/netns-cluster.sh" down > /dev/null 2>&1
  ip link show "${prefix}v7" > /dev/null 2>&1 && ip link show lo > /dev/null 2>&1 &&
    ok "netns down deleted nothing its state file does not record" || fail "netns down deleted a link it did not make"
  ip link del "${prefix}v7" 2> /dev/null
else
  echo "skip netns-down-state: cannot add a dummy link here"
fi
rm -rf "$state"

fi

sfb_test_summary
