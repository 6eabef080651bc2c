#!/usr/bin/env bash
# sfb-plan's output on recorded profiles (tests/data), one check per argument:
#   one_host   --one-host states the cores a rank computes with at each N (the host's cores / N), and
#              the compute term scales once with them: 4x the cores, a quarter of the compute.
#   fms        FMS's servers where the profile's ran (beside the workers: a server's link carries
#              (N + S - 2) / S of W, not N / S), or where --fms-placement says; the row says where.
#   memory     the memory of every scheme at the user's shape (200,000 x 50,000 floats: W is 37.25
#              GiB) and, with --node-memory, which fit and how many ranks a node holds.
#   partial    a profile that skipped engine runs (SchemeProfile::skipped) says so at the top, and
#              one taken on a noisy machine (steal, or an engine's clocks spread) says that.
#   plan_test.sh <sfb-plan> <source dir> one_host|fms|memory|partial
set -euo pipefail
plan=$1
data=$2/tests/data
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# The CSV cell of column `name` in the row of scheme $2 at N = $3 (the first link's).
cell() {  # <csv> <scheme> <nodes> <column>
  awk -F, -v s="$2" -v n="$3" -v name="$4" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $3 == s && $2 == n { print $c[name]; exit }' "$1"
}
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * b) }'; }
expect2() {  # <what the error names> <sfb-plan args...>
  local want=$1 rc=0 err
  shift
  err=$("$plan" "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 2 ] || fail "sfb-plan $*: exit $rc, expected 2 ($err)"
  grep -qF -- "$want" <<< "$err" || fail "sfb-plan $*: '$err' does not name '$want'"
}

# A profile that skipped engine runs says so before anything else.
partial() {
  jq '.skipped = ["the two-rank SFB engine", "the all-reduce engine"]' "$data/scheme_profile_mlr512_k1024_4h_cpus.json" > "$dir/p.json"
  "$plan" --profile "$dir/p.json" --nodes 4 --links fitted > "$dir/p.md"
  "$plan" --profile "$data/scheme_profile_mlr512_k1024_4h_cpus.json" --nodes 4 --links fitted > "$dir/full.md"
  sed -n 2p "$dir/p.md"
  sed -n 2p "$dir/p.md" | grep -q "^# PARTIAL PROFILE: not measured: the two-rank SFB engine, the all-reduce engine" ||
    fail "the partial profile is not said on the second line"
  ! grep -q "PARTIAL" "$dir/full.md" || fail "a whole profile said partial"
  # A noisy machine: 20% stolen, the SFB engine's clocks +- 15%; the recorded profile is neither.
  jq '.cpu_stolen_share = 0.2 | .engine_clock_se_s = (.engine_clock_s * 0.15)' \
    "$data/scheme_profile_mlr512_k1024_4h_cpus.json" > "$dir/noisy.json"
  "$plan" --profile "$dir/noisy.json" --nodes 4 --links fitted > "$dir/noisy.md"
  grep "NOISY" "$dir/noisy.md"
  grep -q "^# NOISY PROFILE: the hypervisor gave 20.0% of the CPU time .*; the engines' clocks spread by a tenth or more: SFB's .* (15%)" \
    "$dir/noisy.md" || fail "a noisy profile is not said"
  ! grep -q "NOISY" "$dir/full.md" "$dir/p.md" || fail "a quiet profile said noisy"
}

one_host() {
  # Profiled with two ranks sharing a host's 0.25 cores: 0.125 cores a rank.
  jq '.cores = 0.25 | .ranks_on_host = 2' "$data/scheme_profile_mlr512_k1024_4h_cpus.json" > "$dir/p.json"
  "$plan" --profile "$dir/p.json" --nodes 4,8 --links fitted --schemes sfb --one-host --csv "$dir/one.csv" > "$dir/one.md"
  "$plan" --profile "$dir/p.json" --nodes 4,8 --links fitted --schemes sfb --csv "$dir/node.csv" > "$dir/node.md"
  grep "^# compute" "$dir/one.md" "$dir/node.md"
  grep -q "^# compute .*0.25 cores, a rank computing with 0.0625 at N = 4, 0.0312 at N = 8 (profiled: 0.125)" "$dir/one.md" ||
    fail "--one-host does not state a rank's cores at each N"
  grep -q "^# compute and update at one rank per node, a rank computing with 0.25 cores (profiled: 0.125)" "$dir/node.md" ||
    fail "a node each: not 0.25 cores a rank"
  local one node
  one=$(cell "$dir/one.csv" sfb 4 compute_s) node=$(cell "$dir/node.csv" sfb 4 compute_s)
  echo "compute at N = 4: $one s sharing the host (0.0625 cores), $node s a node each (0.25)"
  awk -v a="$one" -v b="$node" 'BEGIN { r = a / b; exit !(r > 3.96 && r < 4.04) }' ||
    fail "compute $one against $node: not the cores' ratio 4"
}

fms() {
  local p=$data/scheme_profile_mlr512_k1024_4h_fms4_300mbit.json W=1048576
  jq '.engine_fms_servers_beside = 4' "$p" > "$dir/beside.json"
  "$plan" --profile "$dir/beside.json" --nodes 4 --links 1gbe --schemes fms:1,fms:2 --csv "$dir/b.csv" > "$dir/b.md"
  "$plan" --profile "$dir/beside.json" --nodes 4 --links 1gbe --schemes fms:1 --fms-placement own --csv "$dir/o.csv" > "$dir/o.md"
  "$plan" --profile "$p" --nodes 4 --links 1gbe --schemes fms:1 --csv "$dir/e.csv" > "$dir/e.md"
  grep "FMS's servers\|^| 4 | fms" "$dir/b.md" "$dir/o.md" "$dir/e.md"
  grep -q "^# FMS's servers beside the workers: .*the profile's ran beside workers (4 of 4)" "$dir/b.md" || fail "b.md: where"
  grep -q "^| 4 | fms:s1 (beside worker 0)" "$dir/b.md" || fail "b.md: the row does not say where the server runs"
  grep -q "^| 4 | fms:s2 (beside workers 0-1)" "$dir/b.md" || fail "b.md: fms:s2's row"
  grep -q "^| 4 | fms:s1 (on a host of its own)" "$dir/o.md" || fail "o.md: the row does not say where"
  grep -q "^# FMS's servers on hosts of their own.*the profile's ran on hosts of their own" "$dir/e.md" || fail "e.md: where"
  near "$(cell "$dir/b.csv" fms:s1 4 link_bytes)" $((3 * W)) || fail "beside: busiest link $(cell "$dir/b.csv" fms:s1 4 link_bytes), not 3 W"
  near "$(cell "$dir/b.csv" fms:s2 4 link_bytes)" $((2 * W)) || fail "beside, 2 servers: not (4 + 2 - 2) / 2 W"
  [ "$(cell "$dir/b.csv" fms:s1 4 servers_on)" = workers ] || fail "b.csv servers_on"
  near "$(cell "$dir/o.csv" fms:s1 4 link_bytes)" $((4 * W)) || fail "own host: busiest link not 4 W"
  [ "$(cell "$dir/e.csv" fms:s1 4 servers_on)" = own ] || fail "an earlier profile: not on a host of its own"
  expect2 "--fms-placement must be own or workers, got \"next\"" --profile "$p" --fms-placement next
}

memory() {
  # The user's job: sparse features, about 40 nonzeros a sample (a profile of sparse data).
  jq '.sparse_v = true | .v_nonzeros = 40' "$data/scheme_profile_mlr512_k1024_4h_cpus.json" > "$dir/p.json"
  local p=$dir/p.json
  local shape=(--rows 200000 --cols 50000 --minibatch 64 --nodes 16 --links 10gbe --schemes sfb,halton,fms:1,allreduce)
  "$plan" --profile "$p" "${shape[@]}" --node-memory 64GiB --csv "$dir/m64.csv" > "$dir/m64.md"
  "$plan" --profile "$p" "${shape[@]}" --node-memory 34359738368 --csv "$dir/m32.csv" > "$dir/m32.md"
  "$plan" --profile "$p" "${shape[@]}" --node-memory 1TiB --csv "$dir/m1t.csv" > /dev/null
  sed -n '/^## memory/,/^$/p;/^| N | scheme | rank 0/,/^$/p' "$dir/m64.md" | head -12
  local w=40000000000 s
  for s in sfb halton fms:s1 allreduce; do
    local r0 r1 fit32 fit64 fit1t
    r0=$(cell "$dir/m64.csv" "$s" 16 rank0_bytes) r1=$(cell "$dir/m64.csv" "$s" 16 rank_bytes)
    fit64=$(cell "$dir/m64.csv" "$s" 16 ranks_fit) fit32=$(cell "$dir/m32.csv" "$s" 16 ranks_fit)
    fit1t=$(cell "$dir/m1t.csv" "$s" 16 ranks_fit)
    echo "$s: rank 0 $r0 bytes, the others $r1; ranks a node holds: 32 GiB $fit32, 64 GiB $fit64, 1 TiB $fit1t"
    # W and its batches and workspaces beside it (K = 64 of 200,000 floats: a few GB at 16 workers).
    awk -v r="$r0" -v w="$w" 'BEGIN { exit !(r >= w && r < 1.15 * w) }' || fail "$s: rank 0 holds $r0 bytes, not W and a little"
    [ "$fit64" = 1 ] || fail "$s: 64 GiB holds $fit64 ranks, expected 1 (two copies of W are 80 GB)"
    [ "$fit32" = 0 ] || fail "$s: 32 GiB holds $fit32 ranks, expected none (W alone is 37.25 GiB)"
    # Rank 0 and as many more as fit beside it.
    awk -v f="$fit1t" -v r0="$r0" -v r1="$r1" 'BEGIN { exit !(f == 1 + int((2^40 - r0) / r1)) }' ||
      fail "$s: 1 TiB holds $fit1t ranks, not 1 + (1 TiB - $r0) / $r1"
  done
  grep -Eq '^\| 16 \| sfb \| [0-9.]+ \| [0-9.]+ \| - \| [0-9.]+ \(1\) \| yes \| 1 \|' "$dir/m64.md" || fail "m64.md: sfb's memory row"
  grep -Eq '^\| 16 \| fms:s1 \| [0-9.]+ \| [0-9.]+ \| 37\.[0-9]+ \| [0-9.]+ \(1\) \| yes \| 1 \|' "$dir/m64.md" ||
    fail "m64.md: fms:s1's row: its server holds W on a host of its own"
  grep -Eq '^\| 16 \| sfb \| .* \| \*\*no\*\* \| none \|' "$dir/m32.md" || fail "m32.md: sfb fits 32 GiB"
  expect2 "--node-memory must be a node's memory in bytes or with a unit" --profile "$p" --node-memory 64XB
  expect2 'got "-1GiB"' --profile "$p" --node-memory -1GiB
}

case "${3:-}" in
  one_host) one_host ;;
  partial) partial ;;
  fms) fms ;;
  memory) memory ;;
  *) echo "usage: $0 <sfb-plan> <source dir> one_host|fms|memory|partial" >&2; exit 2 ;;
esac
echo "plan test $3 passed"
