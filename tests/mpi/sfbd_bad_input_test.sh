#!/usr/bin/env bash
# Bad input under mpirun -np 4: each case must exit with code 2, print a message naming the
# file and line (or field), and leave no output files behind.
set -uo pipefail
SFBD=$1
SRC=$2
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
source "$SRC/scripts/common.sh"
MPI=(sfb_mpirun)
failures=0
passed=0

expect() {  # expect NAME CODE PATTERN -- command...
  local name=$1 code=$2 pattern=$3
  shift 4
  local got
  out=$("$@" 2>&1)
  got=$?
  if [ "$got" != "$code" ] || ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $got (want $code), output:"; echo "$out" | tail -5; echo "  wanted: $pattern"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -F -- "$pattern" <<<"$out" | head -1)"
    passed=$((passed + 1))
  fi
}

base="$SRC/configs/synthetic_sparse.toml"
printf '[data]\nformat = "synthetic"\nfeatures = 10\nclasses = 3\n[sfb]\nstalenes = 2\n' > "$OUT/typo.toml"
printf '[data]\nformat = "synthetic"\nfeatures = 10\nclasses = 3\n[sfb]\nstaleness = -1\n' > "$OUT/neg.toml"
printf '[data]\nformat = "libsvm"\ntrain = "%s/missing.svm"\nfeatures = 10\nclasses = 3\n[output]\ndir = "%s/o1"\n' "$OUT" "$OUT" > "$OUT/missing.toml"
printf '0 1:1\n1 12:1\n' > "$OUT/bad.svm"
printf '[data]\nformat = "libsvm"\ntrain = "%s/bad.svm"\nfeatures = 10\nclasses = 3\n[output]\ndir = "%s/o2"\n' "$OUT" "$OUT" > "$OUT/badsvm.toml"
printf '[data]\nformat = "idx"\ntrain_images = "%s/bad.svm"\ntrain_labels = "%s/bad.svm"\n[output]\ndir = "%s/o3"\n' "$OUT" "$OUT" "$OUT" > "$OUT/badidx.toml"

expect unknown-key 2 "typo.toml:6: unknown key 'sfb.stalenes'" -- "${MPI[@]}" -np 4 "$SFBD" --config "$OUT/typo.toml"
expect bad-range 2 "neg.toml:6: sfb.staleness must be 0 to 2^53 or \"inf\", got -1" -- "${MPI[@]}" -np 4 "$SFBD" --config "$OUT/neg.toml"
expect bad-override 2 "--set optimizer.minibatch=0: optimizer.minibatch must be in [1," -- "${MPI[@]}" -np 4 "$SFBD" --config "$base" --set optimizer.minibatch=0
expect missing-config 2 "$OUT/nope.toml: cannot read config" -- "${MPI[@]}" -np 4 "$SFBD" --config "$OUT/nope.toml"
expect missing-data 2 "$OUT/missing.svm: cannot open" -- "${MPI[@]}" -np 4 "$SFBD" --config "$OUT/missing.toml"
expect bad-libsvm 2 "$OUT/bad.svm:2: feature index 12 (the file's largest) is above data.features = 10" -- "${MPI[@]}" -np 2 "$SFBD" --config "$OUT/badsvm.toml"
expect bad-idx 2 "bad.svm: not an IDX file" -- "${MPI[@]}" -np 4 "$SFBD" --config "$OUT/badidx.toml"
expect config-mismatch 2 "differs between ranks" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set output.dir="$OUT/o4" : \
  -np 2 "$SFBD" --config "$base" --set output.dir="$OUT/o4" --set sfb.staleness=1
FM=/usr/share/datasets/fashion-mnist
head -c 100000 "$FM/train-images-idx3-ubyte.gz" > "$OUT/trunc.gz"
printf '[data]\nformat = "idx"\ntrain_images = "%s"\ntrain_labels = "%s"\n[output]\ndir = "%s/o5"\n' "$OUT/trunc.gz" "$FM/train-labels-idx1-ubyte.gz" "$OUT" > "$OUT/truncidx.toml"
expect truncated-idx 2 "trunc.gz" -- "${MPI[@]}" -np 2 "$SFBD" --config "$OUT/truncidx.toml"
expect labels-out-of-range 2 "has label 9, outside [0, 5)" -- "${MPI[@]}" -np 2 "$SFBD" --config "$SRC/configs/test_fashion_small.toml" \
  --set data.classes=5 --set output.dir="$OUT/o6"
printf 'x 1:1\n' > "$OUT/badlabel.svm"
printf '[data]\nformat = "libsvm"\ntrain = "%s/badlabel.svm"\nfeatures = 10\nclasses = 3\n[output]\ndir = "%s/o7"\n' "$OUT" "$OUT" > "$OUT/badlabel.toml"
expect libsvm-bad-label 2 "badlabel.svm:1: label 'x' is not an integer" -- "${MPI[@]}" -np 2 "$SFBD" --config "$OUT/badlabel.toml"
expect empty-partition 2 "got an empty partition" -- "${MPI[@]}" -np 4 "$SFBD" --config "$base" --set data.synthetic_samples=2 \
  --set output.dir="$OUT/o8"
printf 'a secret of thirty-two bytes....' > "$OUT/shared.key" && chmod 644 "$OUT/shared.key"
expect secret-readable-by-others 2 "comm.secret_file = \"$OUT/shared.key\": readable or writable by group or others (mode 644)" -- \
  "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set comm.transport=tcp --set comm.secret_file="$OUT/shared.key" --set output.dir="$OUT/o9"
expect secret-missing 2 "comm.secret_file = \"$OUT/none.key\": No such file" -- \
  "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set comm.transport=tcp --set comm.secret_file="$OUT/none.key" --set output.dir="$OUT/o9"
[ ! -e "$OUT/o9" ] || { echo "FAIL secret: output.dir created by a refused job"; failures=$((failures + 1)); }
# The same secret on every rank: the job trains over TCP.
chmod 600 "$OUT/shared.key"
expect secret-ok 0 "transport: tcp over 2 ranks" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set comm.transport=tcp \
  --set comm.secret_file="$OUT/shared.key" --set stop.max_clocks=5 --set output.dir="$OUT/trained_with_secret"
# comm.tcp_congestion: a name this kernel lacks, or not a name, is refused before any work; reno
# (always built in) is what the connections then run.
expect congestion-unknown 2 "comm.tcp_congestion = \"nosuch_cc\": the kernel has no such congestion control loaded; this kernel has" -- \
  "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set comm.transport=tcp --set comm.tcp_congestion=nosuch_cc --set output.dir="$OUT/o9"
expect congestion-not-a-name 2 "comm.tcp_congestion = \"cu bic\": not a congestion control's name" -- \
  "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set comm.transport=tcp --set "comm.tcp_congestion=cu bic" --set output.dir="$OUT/o9"
[ ! -e "$OUT/o9" ] || { echo "FAIL congestion: output.dir created by a refused job"; failures=$((failures + 1)); }
expect congestion-reno 0 "transport: tcp over 2 ranks (TCP congestion control reno)" -- "${MPI[@]}" -np 2 "$SFBD" \
  --config "$base" --set comm.transport=tcp --set comm.tcp_congestion=reno --set stop.max_clocks=3 \
  --set output.log_level=info --set output.dir="$OUT/trained_with_reno"
expect unknown-section 2 "--set optimiser.lr=1: unknown section 'optimiser'" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" --set optimiser.lr=1

# Checkpoints: a good one first, then corrupted, foreign and finished ones.
"${MPI[@]}" -np 2 "$SFBD" --config "$base" --set stop.max_clocks=20 --set checkpoint.path=ck.bin \
  --set output.dir="$OUT/ck" --set output.log_level=warn > /dev/null 2>&1
cp "$OUT/ck/ck.bin" "$OUT/bad.ck"
# Flip every bit of one byte of W (writing a fixed value left it whole when the byte already held it).
byte=$(od -An -tu1 -j100 -N1 "$OUT/bad.ck" | tr -d ' ')
printf "\\$(printf '%03o' $((byte ^ 255)))" | dd of="$OUT/bad.ck" bs=1 seek=100 conv=notrunc 2> /dev/null
cmp -s "$OUT/ck/ck.bin" "$OUT/bad.ck" && { echo "FAIL corrupt-checkpoint: the copy was not changed"; failures=$((failures + 1)); }
expect corrupt-checkpoint 2 "checksum mismatch" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" --resume "$OUT/bad.ck" --set output.dir="$OUT/o9"
expect foreign-checkpoint 2 "other model, data or optimizer settings" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" \
  --set optimizer.lr=0.01 --resume "$OUT/ck/ck.bin" --set output.dir="$OUT/o9"
expect finished-checkpoint 2 "is at clock 20 and this run stops at clock 20 (stop.max_clocks)" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" \
  --set stop.max_clocks=20 --resume "$OUT/ck/ck.bin" --set output.dir="$OUT/o9"
expect missing-checkpoint 2 "none.ck: cannot read checkpoint: No such file" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" --resume "$OUT/none.ck" --set output.dir="$OUT/o9"
expect check-ok 0 "OK (SSP(s=2), 4 ranks)" -- "${MPI[@]}" -np 4 "$SFBD" --config "$base" --check
expect fms-too-few-ranks 2 "fms.servers = 1 needs more than 1 ranks, got 1" -- "${MPI[@]}" -np 1 "$SFBD" --config "$base" \
  --set comm.scheme=fms --set output.dir="$OUT/o10"
cnn="$SRC/configs/fashion_cnn_mgwfbp.toml"
expect cnn-input-mismatch 2 "needs 784 dense features (set data.bias = false)" -- "${MPI[@]}" -np 2 "$SFBD" --config "$cnn" \
  --set data.bias=true --set output.dir="$OUT/o10"
expect cnn-unknown-layer 2 "cnn.layers: unknown layer \"foo\"" -- "${MPI[@]}" -np 2 "$SFBD" --config "$cnn" \
  --set cnn.layers=conv:4:3,foo --set output.dir="$OUT/o10"
expect cnn-unknown-planner 2 'mgwfbp.planner: unknown planner "hybird"' -- "${MPI[@]}" \
  -np 2 "$SFBD" --config "$cnn" --set mgwfbp.planner=hybird --set output.dir="$OUT/o10"
expect plugin-param-typo 2 "unknown key model.params.lamda" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" \
  --set model.params.lamda=0.1 --set output.dir="$OUT/o10"
# --check finds what training would find before its first clock, and writes nothing.
small="$SRC/configs/test_fashion_small.toml"
touch "$OUT/a-file"
expect check-missing-plugin 2 "model.plugin: no such file: $OUT/none.so" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" \
  --check --set model.plugin="$OUT/none.so" --set output.dir="$OUT/o11"
expect check-param-typo 2 "unknown key model.params.lamda" -- "${MPI[@]}" -np 2 "$SFBD" --config "$base" --check \
  --set model.params.lamda=0.1 --set output.dir="$OUT/o11"
expect check-missing-data 2 "$OUT/none.gz: cannot open" -- "${MPI[@]}" -np 2 "$SFBD" --config "$small" --check \
  --set data.train_images="$OUT/none.gz" --set output.dir="$OUT/o11"
expect check-islands 2 "splits the workers into 2 islands that never exchange factors: {0, 2, 4, 6} {1, 3, 5, 7}" -- \
  "${MPI[@]}" -np 8 "$SFBD" --config "$base" --check --set sfb.broadcast=halton-static --set output.dir="$OUT/o11"
expect check-output-under-a-file 2 "output.dir: $OUT/a-file/x: $OUT/a-file is not a directory" -- "${MPI[@]}" -np 2 \
  "$SFBD" --config "$base" --check --set output.dir="$OUT/a-file/x"
expect check-cnn-layer 2 "cnn.layers: unknown layer \"foo\"" -- "${MPI[@]}" -np 2 "$SFBD" --config "$cnn" --check \
  --set cnn.layers=conv:4:3,foo --set output.dir="$OUT/o11"
expect check-ok-writes-nothing 0 "config, data, model, outputs and memory checked" -- "${MPI[@]}" -np 2 "$SFBD" \
  --config "$small" --check --set output.dir="$OUT/o11"
for d in o1 o2 o3 o4 o5 o6 o7 o8 o9 o10 o11; do
  if [ -n "$(ls -A "$OUT/$d" 2>/dev/null)" ]; then echo "FAIL: $d has files: $(ls "$OUT/$d")"; failures=$((failures + 1)); fi
done
echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
