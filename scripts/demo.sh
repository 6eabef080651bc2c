#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs the dependencies, builds sfbd, and trains
# multiclass logistic regression on Fashion-MNIST with 4 MPI ranks under BSP, full broadcast.
# Extra arguments go to sfbd (e.g. --set sfb.staleness=2).
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build sfbd
NP=${NP:-4}
echo "== mpirun -np $NP build/apps/sfbd --config configs/fashion_mlr.toml $*"
start=$(date +%s%N)
sfb_mpirun -np "$NP" "$SFB_BUILD/apps/sfbd" --config "$SFB_ROOT/configs/fashion_mlr.toml" \
  --set output.dir="$SFB_ROOT/runs/fashion_mlr" "$@"
end=$(date +%s%N)
ms=$(( (end - start) / 1000000 ))
printf '\n  demo wall time (mpirun, incl. data loading): %d.%03d s\n' $((ms / 1000)) $((ms % 1000))
"$SFB_ROOT/apps/sfb-plot" "$SFB_ROOT/runs/fashion_mlr" > /dev/null
echo "  outputs: runs/fashion_mlr/{metrics.jsonl,model.bin,summary.json,config.resolved.toml,plot.png}"
