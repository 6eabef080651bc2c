#!/usr/bin/env bash
# An emulated multi-host cluster on one machine: N network namespaces ("hosts"), each with its own
# UTS hostname, joined by veth links to a bridge, with tc tbf rate limits both ways, so Open MPI
# sees N hosts and talks TCP between them through rate-limited links.
#
#   scripts/netns-cluster.sh up N [--rate 1gbit]   create hosts sfbh0..sfbh{N-1} (10.77.0.1..N)
#   scripts/netns-cluster.sh run [--ppn K] -- <mpirun args>   mpirun across them (K ranks per host)
#   scripts/netns-cluster.sh status                 hosts, addresses, qdiscs
#   scripts/netns-cluster.sh down                   remove everything it created
#
# mpirun runs in the root namespace (the bridge has 10.77.0.254) and starts its daemons with a
# launcher agent that runs `ip netns exec <ns> unshare --uts` instead of ssh; the hostfile holds the
# namespace addresses; btl/oob TCP are restricted to the namespace subnet. The kernel has no netem:
# latency is injected in sfb's transport (comm.inject_latency_us). Needs root. Only the addresses
# of namespaces made here are used.
set -euo pipefail
PREFIX=${SFB_NETNS_PREFIX:-sfb}
SUBNET=${SFB_NETNS_SUBNET:-10.77.0}
STATE=/tmp/${PREFIX}-netns-cluster
BR=${PREFIX}br0

die() { echo "netns-cluster: $*" >&2; exit 1; }
hosts() { cat "$STATE/hosts" 2>/dev/null || true; }

cmd_up() {
  local n=${1:-}; shift || true
  local rate=1gbit
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=$2; shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: N must be 1..200, got '$n'"
  [ "$(id -u)" = 0 ] || die "up needs root (ip netns, tc)"
  [ -d "$STATE" ] && die "a cluster is up already ($STATE); run 'down' first"
  mkdir -p "$STATE"
  echo "$rate" > "$STATE/rate"
  ip link add "$BR" type bridge
  ip addr add "$SUBNET.254/24" dev "$BR"
  ip link set "$BR" up
  : > "$STATE/hosts"
  for i in $(seq 0 $((n - 1))); do
    local ns=${PREFIX}h$i veth=${PREFIX}v$i addr=$SUBNET.$((i + 1))
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$BR" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # Rate limit both directions: the namespace's egress on eth0, its ingress as the bridge side's egress.
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
    tc qdisc add dev "$veth" root tbf rate "$rate" burst 256kb latency 100ms
    echo "$addr $ns h$i" >> "$STATE/hosts"
  done
  # The launcher agent Open MPI uses instead of ssh: <agent> <host address> <command...>.
  cat > "$STATE/agent" <<AGENT
#!/bin/sh
host=\$1; shift
line=\$(grep "^\$host " "$STATE/hosts") || { echo "netns agent: unknown host \$host" >&2; exit 255; }
ns=\$(echo "\$line" | cut -d' ' -f2); name=\$(echo "\$line" | cut -d' ' -f3)
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$name; \$*"
AGENT
  chmod +x "$STATE/agent"
  echo "up: $n hosts on $SUBNET.0/24 at $rate each way ($STATE)"
}

cmd_run() {
  [ -d "$STATE" ] || die "no cluster; run 'up N' first"
  local ppn=1
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
      --ppn) ppn=$2; shift 2 ;;
      *) die "run: unknown option $1 (mpirun arguments go after --)" ;;
    esac
  done
  [ "${1:-}" = "--" ] && shift
  awk -v k="$ppn" '{ print $1 " slots=" k }' "$STATE/hosts" > "$STATE/hostfile"
  # --map-by node: ranks go round-robin over the hosts (rank r on host r mod N), so with P workers
  # on N = P hosts the FMS server ranks P.. land next to workers 0.., as Bosen co-locates them
  # (Open MPI's default, by slot, would pack ranks 0 and 1 onto the first host).
  exec mpirun --allow-run-as-root --oversubscribe --bind-to none --map-by node \
    --hostfile "$STATE/hostfile" --mca plm_rsh_agent "$STATE/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca mpi_yield_when_idle 1 --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
    -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$@"
}

cmd_status() {
  [ -d "$STATE" ] || { echo "no cluster"; return 0; }
  echo "rate $(cat "$STATE/rate")"
  while read -r addr ns name; do
    echo "$name $ns $addr: $(ip netns exec "$ns" tc qdisc show dev eth0 | head -1)"
  done < "$STATE/hosts"
}

cmd_down() {
  if [ -f "$STATE/hosts" ]; then
    while read -r _ ns _; do ip netns del "$ns" 2>/dev/null || true; done < "$STATE/hosts"
  fi
  for l in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^${PREFIX}v" || true); do ip link del "$l" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$STATE"
  echo "down"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  run) shift; cmd_run "$@" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
