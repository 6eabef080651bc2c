#!/usr/bin/env bash
# One W per rank (issue 36): every rank's peak RSS measured by /usr/bin/time -f %M around it, for a
# 512 MiB W (sparse MLR, J = 16,384 classes x D = 8,192 features, 1% non-zero, feature-major) on 4
# ranks with evaluations every 10 clocks and a checkpoint every 10, under
#   halton    SFB, Halton broadcast to 1 peer, reconciled (mean) every 5 clocks
#   full      SFB, full broadcast
#   allreduce the dense all-reduce baseline
#   fms       FMS, 4 workers + 1 parameter server (mpirun -np 5)
#   resumed   full, resumed from the full run's checkpoint
# and the process's fixed cost: the same job at a tiny W (J = 2 classes). Prints per rank the peak,
# (peak - the tiny-W peak) / W, (peak - what the process held before training) / W, the estimate
# sfbd made before training and peak / estimate. SFBD=path runs another build's sfbd (it needs
# summary.json's "memory" only for the estimate columns); RUNS="halton full" picks runs. A run that
# fails or is refused (an older build's estimate may refuse one) prints its last log lines and the
# table goes on without it.
#   scripts/memory-bench.sh [clocks]     (default 30)
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
[ -n "${SFBD:-}" ] || sfb_build sfbd
SFBD=${SFBD:-$SFB_BUILD/apps/sfbd}
export OMP_NUM_THREADS=1
CLOCKS=${1:-30}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
J=16384
D=8192
W=$((J * (D + 1) * 4))
COMMON=(--set data.features=$D --set data.synthetic_samples=20000 --set data.synthetic_test_samples=1000
  --set data.synthetic_density=0.01 --set optimizer.minibatch=32 --set sfb.staleness=0
  --set "stop.max_clocks=$CLOCKS" --set eval.every=10 --set eval.train_sample=1000 --set checkpoint.every=10)
run() {
  local name=$1 np=$2
  shift 2
  sfb_mpirun -np "$np" sh -c 'exec /usr/bin/time -f "rank $OMPI_COMM_WORLD_RANK maxrss_kb %M" "$@"' sh \
    "$SFBD" --config "$SFB_ROOT/configs/synthetic_sparse.toml" "${COMMON[@]}" --set "output.dir=\"$OUT/$name\"" \
    --set "checkpoint.path=\"$OUT/$name/ckpt.bin\"" "$@" > "$OUT/$name.log" 2>&1 && return 0
  echo "== $name failed:"
  grep -m3 'error' "$OUT/$name.log" || tail -5 "$OUT/$name.log"
  failed+=("$name")
}
RUNS=${RUNS:-halton full allreduce fms resumed}
failed=()
wanted() { [[ " $RUNS " == *" $1 "* ]]; }
peak() { awk -v r="$2" '$1 == "rank" && $2 == r {print $4 * 1024}' "$OUT/$1.log"; }

run tiny 4 --set data.classes=2
[[ " ${failed[*]} " != *" tiny "* ]] || exit 1
fixed=$(peak tiny 0)
wanted halton && run halton 4 --set data.classes=$J --set 'sfb.broadcast="halton"' --set sfb.halton_q=1 --set sfb.reconcile_every=5
wanted full && run full 4 --set data.classes=$J
wanted allreduce && run allreduce 4 --set data.classes=$J --set 'comm.scheme="allreduce"'
wanted fms && run fms 5 --set data.classes=$J --set 'comm.scheme="fms"' --set fms.servers=1
wanted resumed && run resumed 4 --set data.classes=$J --resume "$OUT/full/ckpt.bin" --set "stop.max_clocks=$((CLOCKS + 10))"

echo "W = $J x $((D + 1)) floats = $((W >> 20)) MiB; fixed cost (rank 0 at J = 2) $((fixed >> 20)) MiB; $CLOCKS clocks"
printf '%-10s %4s %-7s %10s %16s %18s %12s %14s %12s\n' run rank role peak_MiB "(peak-tiny)/W" "(peak-before)/W" \
  estimate_MiB peak/estimate s/clock
for name in $RUNS; do
  [[ " ${failed[*]} " == *" $name "* ]] && { echo "$name: failed or refused (above)"; continue; }
  s=$OUT/$name/summary.json
  np=$(grep -c '^rank .* maxrss_kb' "$OUT/$name.log")
  for r in $(seq 0 $((np - 1))); do
    p=$(peak "$name" "$r")
    role=$(jq -r --argjson r "$r" '.memory.ranks[$r].role // (if $r < .ranks then "worker" else "server" end)' "$s")
    mine=$W  # FMS with one server: its shard is W
    est=$(jq -r --argjson r "$r" '.memory.ranks[$r].estimate_bytes // 0' "$s")
    before=$(jq -r --argjson r "$r" '.memory.ranks[$r].before_training_bytes // 0' "$s")
    clocks=$CLOCKS
    [ "$name" = resumed ] && clocks=10
    spc=$(jq -r --argjson c "$clocks" '.seconds / $c' "$s")
    awk -v n="$name" -v r="$r" -v role="$role" -v p="$p" -v f="$fixed" -v w="$mine" -v e="$est" -v b="$before" -v t="$spc" \
      'BEGIN { pb = "-"; em = "-"; pe = "-"
               if (b > 0) pb = sprintf("%.3f", (p - b) / w)
               if (e > 0) { em = sprintf("%.0f", e / 1048576); pe = sprintf("%.3f", p / e) }
               printf "%-10s %4d %-7s %10.0f %16.3f %18s %12s %14s %12.3f\n", n, r, role, p / 1048576, (p - f) / w, pb, em, pe, t }'
  done
done
