#!/usr/bin/env bash
# Data sorted by label, as many public libsvm files come: the Fashion-MNIST training set written
# as libsvm in original and in label order, MLR with the demo's settings on P = 8 ranks for 2,000
# clocks, under full broadcast and partial broadcast (rotating Halton, with and without the
# replicas' reconciliation), with contiguous and shuffled partitions. Prints one line per run
# (test accuracy, objective on the global sample, bytes per clock, drift, reconciliations) and
# writes table.md. The numbers in docs/compare.md ("Partitions that differ") come from it.
# Needs /usr/bin/python3 (to write the libsvm files once); 8 ranks share this machine's cores.
#   scripts/sorted-data-study.sh [--out runs/sorted] [--np 8] [--clocks 2000]
set -euo pipefail
source "$(dirname "$0")/common.sh"
OUT=runs/sorted
NP=8
CLOCKS=2000
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --clocks) CLOCKS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
sfb_build sfbd
mkdir -p "$OUT"
FM=/usr/share/datasets/fashion-mnist
if [ ! -s "$OUT/train_sorted.svm" ]; then
  echo "== writing $OUT/{train,train_sorted,test}.svm"
  /usr/bin/python3 - "$FM" "$OUT" <<'PY'
import gzip, struct, sys
fm, out = sys.argv[1], sys.argv[2]
def load(img, lab):
    with gzip.open(f"{fm}/{img}") as f:
        _, n, r, c = struct.unpack(">IIII", f.read(16)); px = f.read()
    with gzip.open(f"{fm}/{lab}") as f:
        f.read(8); ys = f.read()
    d = r * c
    return [(ys[i], px[i * d:(i + 1) * d]) for i in range(n)]
def write(rows, path):
    with open(path, "w") as o:
        for y, p in rows:
            o.write(str(y) + "".join(" %d:%.6g" % (j + 1, v / 255.0) for j, v in enumerate(p) if v) + "\n")
tr = load("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
write(tr, f"{out}/train.svm")
write(sorted(tr, key=lambda t: t[0]), f"{out}/train_sorted.svm")
write(load("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"), f"{out}/test.svm")
PY
fi
TABLE="$OUT/table.md"
echo "| file | partition | broadcast | reconcile | test acc | objective | MB/clock | drift (last) | reconciled |" > "$TABLE"
echo "|---|---|---|---|---|---|---|---|---|" >> "$TABLE"
run() {  # file partition broadcast reconcile
  local name="$1-$2-$3-$4" sum
  sfb_mpirun -np "$NP" --oversubscribe "$SFB_BUILD/apps/sfbd" --config "$SFB_ROOT/configs/fashion_mlr.toml" \
    --set data.format='"libsvm"' --set "data.train=\"$OUT/$1.svm\"" --set "data.test=\"$OUT/test.svm\"" \
    --set data.features=784 --set data.classes=10 --set "data.partition=\"$2\"" --set "sfb.broadcast=\"$3\"" \
    --set "sfb.reconcile=\"$4\"" --set stop.max_clocks="$CLOCKS" --set eval.every=250 \
    --set "output.dir=\"$OUT/$name\"" > "$OUT/$name.log" 2>&1 || { tail -5 "$OUT/$name.log"; return 1; }
  sum="$OUT/$name/summary.json"
  local line
  line="| $1 | $2 | $3 | $4 | $(jq -r .final_accuracy "$sum") | $(jq -r .final_objective "$sum") | $(jq -r '.bytes_per_clock / 1e6 | . * 1000 | round / 1000' "$sum") | $(jq -r .replica_drift.last "$sum") | $(jq -r 'if .reconcile then "\(.reconcile.count) x every \(.reconcile.every)" else "-" end' "$sum") |"
  echo "$line" | tee -a "$TABLE"
}
for file in train_sorted train; do
  for part in contiguous shuffled; do
    run "$file" "$part" full auto
    run "$file" "$part" halton off
    run "$file" "$part" halton auto
  done
done
echo "table: $TABLE"
