#!/usr/bin/env bash
# The emulated cluster: 3 network namespaces at 200 Mbit/s, sfbd across them under FMS (3 workers,
# the server sharing host 0) and SFB; both finish, agree on the BSP objective, and each rank ran in
# its own namespace. Then with a CPU budget per host (--cpus): each rank's profile says it shares
# that budget with no other rank, and the hosts were throttled to it. Skipped (exit 77) where
# network namespaces cannot be made (not root); the budget part where no cgroup cpu controller is.
#   netns_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
export SFB_NETNS_PREFIX=sfbt SFB_NETNS_SUBNET=10.78.0  # apart from a cluster a user may have up
source "$SRC/scripts/common.sh"
OUT=$(mktemp -d)
NC="$SRC/scripts/netns-cluster.sh"
cleanup() { "$NC" down > /dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ] || ! ip netns add sfbt-probe 2> /dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root and iproute2)"; exit 77
fi
ip netns del sfbt-probe
"$NC" down > /dev/null 2>&1 || true
"$NC" up 3 --rate 200mbit
common=(--config "$SRC/configs/test_fashion_small.toml" --set stop.max_clocks=300 --set runtime.threads=1)
timeout 300 "$NC" run -- -np 3 "$SFBD" "${common[@]}" --set output.dir="$OUT/sfb" || fail "sfb run"
timeout 300 "$NC" run -- -np 4 "$SFBD" "${common[@]}" --set comm.scheme=fms --set output.dir="$OUT/fms" || fail "fms run"
a=$(sfb_field final_objective "$OUT/sfb/summary.json"); b=$(sfb_field final_objective "$OUT/fms/summary.json")
echo "final objective: sfb $a, fms $b"
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * a) }' || fail "objectives differ"
# Each rank in its own namespace: the hostnames the ranks report are the namespaces' own.
names=$(timeout 60 "$NC" run -- -np 3 hostname | sort | tr '\n' ' ')
[ "$names" = "h0 h1 h2 " ] || fail "hostnames: $names"
# A CPU budget per host: sfbd's profile reads it (cores 0.5, one rank per budget) and the kernel
# enforced it (throttled periods).
"$NC" down > /dev/null
if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  "$NC" up 3 --rate 200mbit --cpus 0.5
  timeout 300 "$NC" run -- -np 3 "$SFBD" "${common[@]}" --set output.dir="$OUT/prof" --profile "$OUT/p.json" --partial-profile ||
    fail "profile under a CPU budget"
  got=$(jq -c '[.cores, .ranks_on_host]' "$OUT/p.json")
  [ "$got" = "[0.5,1]" ] || fail "profile under --cpus 0.5: [cores, ranks_on_host] = $got, expected [0.5,1]"
  root=$(cat /tmp/sfbt-netns-cluster/cgroup)
  throttled=$(cat "$root"/h*/cpu.stat 2> /dev/null | awk '$1 == "nr_throttled" { n += $2 } END { print n + 0 }')
  [ -f "$root/h0/cpu.stat" ] && [ "$throttled" -eq 0 ] && fail "no host was ever throttled under --cpus 0.5"
  echo "under --cpus 0.5: profile [cores, ranks_on_host] = $got, $throttled throttled periods"
else
  echo "no cgroup cpu controller: the CPU budget part is skipped"
fi
echo "netns test passed"
