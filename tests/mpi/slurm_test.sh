#!/usr/bin/env bash
# sfbd under a real Slurm (issue 40): scripts/slurm-cluster.sh starts munged, slurmctld and two
# slurmd "nodes" in network namespaces of their own; the examples/slurm scripts run as a user
# would run them. Each must end as mpirun's run of the same BSP job does (bitwise the same W):
#  1. sbatch --wait examples/slurm/sfb-nodes.sbatch (srun --mpi=pmix, 4 ranks on 2 nodes);
#  2. sbatch --wait examples/slurm/sfb-mpirun.sbatch (mpirun inside the allocation);
#  3. an uneven layout, 3 ranks on h0 and 1 on h1 (their automatic thread counts differ);
#  4. more ranks than CPUs: refused at once without --overcommit, trained with it;
#  5. a rank killed: the job ends with exit 3 within runtime.peer_timeout_s;
#  6. sfb-run inside sbatch resumes from the checkpoint after a rank is killed, and finishes;
#  7. FMS with its server (--ntasks P+S) and the CNN mode, as under mpirun.
# Skipped (77) only where Slurm cannot start: not root, no slurm-wlm/munge, no network namespaces.
#   slurm_test.sh <sfbd> <source dir>
set -uo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, Slurm's daemons)"
for b in slurmctld slurmd munged sbatch srun nsenter; do
  command -v "$b" > /dev/null || skip "$b is missing (scripts/install-deps.sh installs slurm-wlm and munge)"
done
# Namespaces, state and ports of its own: the netns test may run beside it.
export SFB_NETNS_PREFIX=sfbs SFB_NETNS_SUBNET=10.78.0 SFB_SLURMCTLD_PORT=6927 SFB_SLURMD_PORT=6928
ip netns add sfbsprobe 2> /dev/null && ip netns del sfbsprobe || skip "cannot create network namespaces"
OUT=$(mktemp -d)
cleanup() {
  "$SRC/scripts/slurm-cluster.sh" down > /dev/null 2>&1
  rm -rf "$OUT"
}
trap cleanup EXIT
sfb_test_counting
export OMP_NUM_THREADS=1 SFBD
C="$SRC/configs/synthetic_sparse.toml"
BSP=(--set sfb.staleness=0 --set stop.max_clocks=60)
sum() {  # the replicas' one checksum (SFB and FMS: rank_checksums; the CNN mode: checksum)
  jq -r '(.rank_checksums // [.checksum]) | if (unique | length) == 1 then .[0] else "replicas differ: \(.)" end' \
    "$1/summary.json" 2> /dev/null
}

"$SRC/scripts/slurm-cluster.sh" up 2 --node-cpus 4 || { echo "FAIL: the Slurm cluster did not start"; exit 1; }
eval "$("$SRC/scripts/slurm-cluster.sh" env)"
sfb_mpirun -np 4 "$SFBD" --config "$C" "${BSP[@]}" --set output.dir="$OUT/ref" > "$OUT/ref.log" 2>&1 ||
  { tail -5 "$OUT/ref.log"; echo "FAIL: the mpirun reference run"; exit 1; }
ref=$(sum "$OUT/ref")
echo "mpirun -np 4: checksum $ref"

same() {  # same NAME DIR LOG [REF]: the run in DIR trained to the reference's bits, across both nodes
  local s ref=${4:-$ref}
  s=$(sum "$2")
  if [ "$s" = "$ref" ] && grep -q "transport: tcp over" "$3"; then ok "$1: checksum $s over TCP between the nodes"
  else fail "$1: checksum '$s' (want $ref); $(grep -m1 -E "error|transport" "$3")"; fi
}

echo "== 1-2. the examples, srun --mpi=pmix and mpirun inside sbatch"
expect sbatch-srun 0 120 "" -- sbatch --wait --output="$OUT/srun.log" "$SRC/examples/slurm/sfb-nodes.sbatch" "$C" \
  "${BSP[@]}" --set output.dir="$OUT/srun"
same "sbatch + srun" "$OUT/srun" "$OUT/srun.log"
expect sbatch-mpirun 0 120 "" -- sbatch --wait --output="$OUT/mpirun.log" "$SRC/examples/slurm/sfb-mpirun.sbatch" "$C" \
  "${BSP[@]}" --set output.dir="$OUT/mpirun"
same "sbatch + mpirun" "$OUT/mpirun" "$OUT/mpirun.log"

echo "== 3. uneven: 3 ranks on h0, 1 on h1"
printf 'h0\nh0\nh0\nh1\n' > "$OUT/hosts"
SLURM_HOSTFILE="$OUT/hosts" timeout 120 srun --mpi=pmix -n 4 --distribution=arbitrary "$SFBD" --config "$C" "${BSP[@]}" \
  --set output.dir="$OUT/uneven" > "$OUT/uneven.log" 2>&1 || fail "uneven: exit $?: $(grep -m1 error "$OUT/uneven.log")"
same "3 + 1 ranks" "$OUT/uneven" "$OUT/uneven.log"
grep -q "the least any host gives its ranks" "$OUT/uneven.log" && ok "the ranks agreed on one thread count" ||
  fail "uneven: no agreement on threads logged"

echo "== 4. more ranks than the 8 CPUs"
expect too-many-refused 1 30 "More processors requested than permitted" -- sbatch --wait -N 2 -n 10 \
  "$SRC/examples/slurm/sfb-nodes.sbatch" "$C"
expect overcommit-runs 0 180 "" -- sbatch --wait --overcommit -n 10 --output="$OUT/over.log" \
  "$SRC/examples/slurm/sfb-nodes.sbatch" "$C" "${BSP[@]}" --set output.dir="$OUT/over"
s=$(sum "$OUT/over")
if [[ $s =~ ^[0-9a-f]{16}$ ]]; then ok "10 ranks overcommitted: every replica $s"
else
  tail -25 "$OUT/over.log" 2> /dev/null  # the job's own output: which rank stopped, and how
  fail "overcommitted: $s"
fi

echo "== 5. a rank killed: exit 3 within runtime.peer_timeout_s (10 s)"
(timeout 120 srun --mpi=pmix -N 2 -n 4 "$SFBD" --config "$C" --set sfb.staleness=0 --set stop.max_clocks=1000000 \
  --set runtime.peer_timeout_s=10 --set output.dir="$OUT/killed" > "$OUT/killed.log" 2>&1
echo $? > "$OUT/killed.rc") &
job=$!
until [ -s "$OUT/killed/metrics.jsonl" ] || ! kill -0 $job 2> /dev/null; do sleep 0.1; done
victim=""
for p in $(pgrep -x sfbd); do
  tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx SLURM_PROCID=3 && grep -q "$OUT/killed" "/proc/$p/cmdline" &&
    victim=$p
done
if [ -n "$victim" ]; then
  t0=$(date +%s)
  kill -9 "$victim"
  wait $job
  took=$(($(date +%s) - t0)) rc=$(cat "$OUT/killed.rc")
  [ "$rc" = 3 ] && [ "$took" -le 25 ] && ok "killed rank 3: srun exit 3 after ${took}s" ||
    fail "killed rank 3: exit $rc after ${took}s; $(grep -m1 fatal "$OUT/killed.log")"
else
  fail "no rank 3 to kill"; wait $job
fi

echo "== 6. sfb-run in sbatch resumes after a rank dies"
cat > "$OUT/supervised.sbatch" << JOB
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
export OMP_NUM_THREADS=1
exec "$SRC/apps/sfb-run" --max-restarts 2 -- srun --mpi=pmix "$SFBD" --config "$C" --set sfb.staleness=0 \\
  --set stop.max_clocks=4000 --set checkpoint.path=ck.bin --set checkpoint.every=500 --set runtime.peer_timeout_s=5 \\
  --set output.dir=$OUT/sup
JOB
sbatch --wait --output="$OUT/sup.log" "$OUT/supervised.sbatch" > /dev/null 2>&1 &
sup=$!
kill_rank 2 clock 500 "$OUT/sup" 1
wait $sup
rc=$?
if [ "$rc" = 0 ] && grep -q "attempt 2" "$OUT/sup.log" && [ "$(jq -r .final_clock "$OUT/sup/summary.json")" = 4000 ]; then
  ok "sfb-run resumed under Slurm and finished at clock 4000"
else
  fail "supervised: sbatch exit $rc; $(grep "sfb-run:" "$OUT/sup.log" | tail -3 | tr '\n' ' ')"
fi

echo "== 7. FMS (4 workers + 1 server) and the CNN mode through the example"
FMS=(--set comm.scheme=fms --set fms.servers=1)
sfb_mpirun -np 5 "$SFBD" --config "$C" "${BSP[@]}" "${FMS[@]}" --set output.dir="$OUT/fms_ref" > "$OUT/fms_ref.log" 2>&1
expect sbatch-fms 0 120 "" -- sbatch --wait -n 5 --output="$OUT/fms.log" "$SRC/examples/slurm/sfb-nodes.sbatch" "$C" \
  "${BSP[@]}" "${FMS[@]}" --set output.dir="$OUT/fms"
same "FMS 4 + 1" "$OUT/fms" "$OUT/fms.log" "$(sum "$OUT/fms_ref")"
CNN=("$SRC/configs/fashion_cnn_mgwfbp.toml" --set stop.max_clocks=30 --set eval.every=30)
sfb_mpirun -np 4 "$SFBD" --config "${CNN[@]}" --set output.dir="$OUT/cnn_ref" > "$OUT/cnn_ref.log" 2>&1
expect sbatch-cnn 0 180 "" -- sbatch --wait --output="$OUT/cnn.log" "$SRC/examples/slurm/sfb-nodes.sbatch" "${CNN[@]}" \
  --set output.dir="$OUT/cnn"
same "CNN (mgwfbp)" "$OUT/cnn" "$OUT/cnn.log" "$(sum "$OUT/cnn_ref")"

sfb_test_summary
