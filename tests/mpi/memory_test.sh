#!/usr/bin/env bash
# One W per rank: a 64 MiB W (J = 2048 classes x D = 8192 sparse features + bias, just over the
# 64 MiB below which rank 0 keeps one snapshot) trained on 4 ranks with evaluations, checkpoints and
# partial broadcast with reconciliation, then under the all-reduce, under
# FMS (4 workers + 1 server), and resumed from a checkpoint. For every rank, summary.json's measured
# peak RSS (getrusage) less what the process held before training must stay within 1.25 x its W
# (a server: its shard) plus the estimate's bounded parts (batches, workspaces, blocks), and the
# estimate must be within 10% of the peak. A W-sized copy coming back (a snapshot queue, a
# materialised checksum copy, a dense update of W) breaks the first bound by 0.75 W; the control run
# with eval.snapshot = "copy" shows that the measurement sees one.
#   memory_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
CFG="$SRC/configs/synthetic_sparse.toml"
COMMON=(--set data.features=8192 --set data.classes=2048 --set data.synthetic_samples=3000
  --set data.synthetic_test_samples=300 --set data.synthetic_density=0.01 --set optimizer.minibatch=16
  --set sfb.staleness=0 --set stop.max_clocks=6 --set eval.every=2 --set eval.train_sample=300
  --set checkpoint.every=3)
W=$((2048 * 8193 * 4))
run() {
  local dir=$1 np=$2
  shift 2
  sfb_mpirun -np "$np" "$SFBD" --config "$CFG" "${COMMON[@]}" --set "output.dir=\"$OUT/$dir\"" \
    --set "checkpoint.path=\"$OUT/$dir/ckpt.bin\"" "$@" > "$OUT/$dir.log" 2>&1 || { cat "$OUT/$dir.log"; fail "run $dir"; }
}
# check DIR SERVERS: every rank's peak within its bound, the estimate within 10% of the peak.
check() {
  local s="$OUT/$1/summary.json" servers=$2
  jq -e --argjson w "$W" --argjson S "$servers" '
    .memory.ranks | all(
      (if .role == "server" then $w / $S else $w end) as $mine
      | (.peak_rss_bytes - .before_training_bytes) <= 1.25 * $mine + (.estimate_bytes - .before_training_bytes - $mine)
        and (.peak_rss_bytes / .estimate_bytes) > 0.9 and (.peak_rss_bytes / .estimate_bytes) < 1.1)' "$s" > /dev/null ||
    fail "$1: a rank holds more than one W (or its share) beyond its bounded parts, or the estimate is off by more than 10%: $(jq -c '.memory' "$s")"
  jq -r --argjson w "$W" '.memory.ranks[] | "  \(.role) \(.rank): peak \(.peak_rss_bytes / 1048576 | floor) MiB, before training \(.before_training_bytes / 1048576 | floor) MiB, (peak - before) / W = \((.peak_rss_bytes - .before_training_bytes) / $w * 100 | floor / 100), peak / estimate = \(.peak_over_estimate)"' "$s"
}

echo "== SFB, Halton broadcast to 1 peer, reconciled every 3 clocks; evaluations and checkpoints in place"
run halton 4 --set 'sfb.broadcast="halton"' --set sfb.halton_q=1 --set sfb.reconcile_every=3
[ "$(jq -r .reconcile.count "$OUT/halton/summary.json")" -ge 2 ] || fail "no reconciliation ran"
[ "$(jq -r .checksums_equal "$OUT/halton/summary.json")" = true ] || fail "the replicas differ after the final consensus"
check halton 1
echo "== the all-reduce baseline"
run allreduce 4 --set 'comm.scheme="allreduce"'
check allreduce 1
echo "== FMS: 4 workers and 1 parameter server"
run fms 5 --set 'comm.scheme="fms"' --set fms.servers=1
check fms 1
echo "== resumed from the Halton run's checkpoint (streamed into every replica)"
run resumed 4 --resume "$OUT/halton/ckpt.bin" --set stop.max_clocks=8
check resumed 1
echo "== control: eval.snapshot = \"copy\" keeps one more W on rank 0, and the measurement sees it"
run copy 4 --set 'eval.snapshot="copy"'
jq -e --argjson w "$W" '.memory.ranks[0] | (.peak_rss_bytes - .before_training_bytes) >= 1.8 * $w' \
  "$OUT/copy/summary.json" > /dev/null || fail "rank 0's snapshot copy is not visible in its peak RSS: $(jq -c '.memory.ranks[0]' "$OUT/copy/summary.json")"
echo "PASS"
