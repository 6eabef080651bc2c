#!/usr/bin/env bash
# sfbd's MG-WFBP mode against the tool users would pick instead: PyTorch DistributedDataParallel
# (gloo, CPU) training the same CNN (configs/fashion_cnn_mgwfbp.toml) on the same ranks, per-rank
# batch, iterations, optimiser and evaluation schedule, one thread per rank; then the same sfbd job
# with the reference layers (cnn.kernels = "reference"). Prints the three side by side (median
# iteration time after warm-up, wall seconds, final test accuracy) and keeps them in
# runs/peer-bench/. Optional, not run by CI: PyTorch comes from Debian's python3-torch, which
# install-deps.sh installs only with SFB_PEER_DEPS=1 (it pulls in about 1 GB).
#   NP=4 ITERS=2000 scripts/peer-bench.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"
SFB_PEER_DEPS=1 sfb_deps
sfb_build sfbd
NP=${NP:-4}
ITERS=${ITERS:-2000}
OUT=$SFB_ROOT/runs/peer-bench
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
echo "== $(nproc --all) cores, $NP ranks x 1 thread, $ITERS iterations, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"

run_sfbd() {  # $1: cnn.kernels
  sfb_mpirun -np "$NP" "$SFB_BUILD/apps/sfbd" --config "$SFB_ROOT/configs/fashion_cnn_mgwfbp.toml" \
    --set output.dir="$OUT/sfbd-$1" --set stop.max_clocks="$ITERS" --set cnn.kernels="$1" >"$OUT/sfbd-$1.log" 2>&1
  jq -c '{iteration_us_median, iteration_us, seconds, final_accuracy}' "$OUT/sfbd-$1/summary.json"
}
echo "-- sfbd (oneDNN layers)"
run_sfbd onednn | tee "$OUT/sfbd-onednn.json"
echo "-- PyTorch DDP"
/usr/bin/python3 "$SFB_ROOT/bench/peer/ddp_cnn.py" --ranks "$NP" --iterations "$ITERS" | tee "$OUT/pytorch.json"
echo "-- sfbd (reference layers)"
run_sfbd reference | tee "$OUT/sfbd-reference.json"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [("sfbd, oneDNN layers", json.load(open(f"{out}/sfbd-onednn.json"))),
        ("PyTorch DDP (gloo)", json.load(open(f"{out}/pytorch.json"))),
        ("sfbd, reference layers", json.load(open(f"{out}/sfbd-reference.json")))]
torch = rows[1][1]["iteration_us_median"]
print(f"\n{'':24} {'iteration ms (median)':>22} {'vs PyTorch':>11} {'wall s':>8} {'test acc':>9}")
for name, r in rows:
    print(f"{name:24} {r['iteration_us_median'] / 1e3:22.2f} {r['iteration_us_median'] / torch:10.2f}x "
          f"{r['seconds']:8.1f} {100 * r['final_accuracy']:8.2f}%")
PY
