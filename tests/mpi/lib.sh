# Helpers the MPI test scripts share; sourcing this also sources scripts/common.sh.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/common.sh"

# sfb_test_scratch: the start of a test script without its own cleanup: a scratch directory $OUT,
# removed on exit, fail MESSAGE (prints FAIL: MESSAGE, exits 1), and one OpenMP thread per rank.
sfb_test_scratch() {
  export OMP_NUM_THREADS=1
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
  fail() { echo "FAIL: $*"; exit 1; }
}

# sfb_test_counting: fail and ok count into $failures and $passed instead of ending the script;
# sfb_test_summary prints the counts and returns non-zero when anything failed.
sfb_test_counting() {
  failures=0
  passed=0
  fail() { echo "FAIL $*"; failures=$((failures + 1)); }
  ok() { echo "ok   $*"; passed=$((passed + 1)); }
}
sfb_test_summary() {
  echo "$passed passed, $failures failed"
  [ "$failures" = 0 ]
}

# expect NAME CODE LIMIT_S PATTERN -- command...: exit CODE within LIMIT_S seconds, PATTERN in the
# output; counts into $passed / $failures and leaves the output in $LAST_OUT.
expect() {
  local name=$1 code=$2 limit=$3 pattern=$4
  shift 5
  local t0 got out
  t0=$(date +%s)
  out=$(timeout -k 5 "$limit" "$@" 2>&1)
  got=$?
  local took=$(($(date +%s) - t0))
  if [ "$got" != "$code" ] || ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $got (want $code) after ${took}s (limit ${limit}s), output:"
    echo "$out" | tail -6 | cut -c1-300
    echo "  wanted: $pattern"
    failures=$((failures + 1))
  else
    echo "ok   $name (${took}s): $(grep -F -- "$pattern" <<<"$out" | head -1 | cut -c1-200)"
    passed=$((passed + 1))
  fi
  LAST_OUT=$out
}

# kill_rank <rank> <clock|iteration> <N> <output dir> <attempt>: once the supervised job's attempt
# log says "checkpoint at <unit> N", SIGKILLs that rank's sfbd (the supervisor's pid in $sup; the
# test's `fail` is called when it ends first or the rank is not found).
kill_rank() {
  local rank=$1 unit=$2 n=$3 dir=$4 attempt=$5
  until grep -q "checkpoint at $unit $n " "$dir/sfb-run/attempt-$attempt.log" 2> /dev/null; do
    kill -0 "$sup" 2> /dev/null || fail "the supervisor ended before $unit $n"
    sleep 0.02
  done
  local victim=""
  for p in $(pgrep -f -- "output.dir=$dir "; pgrep -f -- "output.dir=$dir\$"); do
    [ "$(cat /proc/$p/comm 2> /dev/null)" = sfbd ] || continue
    # mpirun's ranks carry OMPI_COMM_WORLD_RANK from the start, srun's SLURM_PROCID.
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qxE "(OMPI_COMM_WORLD_RANK|SLURM_PROCID)=$rank"; then
      victim=$p
    fi
  done
  [ -n "$victim" ] || fail "no process of rank $rank"
  kill -9 "$victim"
  echo "killed rank $rank (pid $victim) after the checkpoint at $unit $n"
}
