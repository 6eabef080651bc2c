#!/usr/bin/env bash
# An emulated multi-host cluster on one machine: N network namespaces ("hosts"), each with its own
# UTS hostname, joined by veth links to a bridge, with tc tbf rate limits both ways, so Open MPI
# sees N hosts and talks TCP between them through rate-limited links.
#
#   scripts/netns-cluster.sh up N [--rate 1gbit] [--cpus C] [--cpu-period-us P] [--tcp-cc cubic]
#                                                   create hosts sfbh0..sfbh{N-1} (10.77.0.1..N)
#   scripts/netns-cluster.sh run [--ppn K] -- <mpirun args>   mpirun across them (K ranks per host)
#   scripts/netns-cluster.sh status                 hosts, addresses, qdiscs
#   scripts/netns-cluster.sh down                   remove everything it created
#
# mpirun runs in the root namespace (the bridge has 10.77.0.254) and starts its daemons with a
# launcher agent that runs `ip netns exec <ns> unshare --uts` instead of ssh; the hostfile holds the
# namespace addresses; btl/oob TCP are restricted to the namespace subnet. The kernel has no netem:
# latency is injected in sfb's transport (comm.inject_latency_us). Needs root. Only the addresses
# of namespaces made here are used.
#
# --cpus C gives every host a CPU budget of its own: a cgroup (v1 cpu controller, or v2 cpu.max)
# whose quota is C cores per period, so that N hosts on one machine compute like N nodes of C cores
# instead of interleaving freely on the shared ones (sfbd's profiler reads the budget: core/
# machine.h). The period is 5 ms by default: with the kernel's 100 ms a throttled host stalls up
# to 75 ms at a time, which turns latency-bound phases into noise (measured in docs/compare.md).
# N C should not exceed the machine's cores, or the hosts still contend (up warns).
#
# --tcp-cc NAME is every host's default TCP congestion control (default cubic, Linux's own; "host"
# keeps this machine's, which a namespace inherits). A machine whose default is bbr (v1) otherwise
# turns its stalls (holds of 100-200 ms) into the hosts' all-reduce and FMS times: measured 4-7x on sfb's
# all-reduce at 8 hosts (docs/compare.md). A name the kernel restricts to the root namespace is
# added to net.ipv4.tcp_allowed_congestion_control first (a machine-wide setting, said when done);
# up records the value it found in its state and `down` puts it back (unless something else changed
# the setting since: then it says so and leaves it).
#
# SFB_NETNS_PREFIX (default sfb: a lower-case letter, then up to 9 letters or digits) names every
# object; SFB_NETNS_SUBNET (default 10.77.0) is the hosts' /24, three octets of a private range
# (10/8, 172.16/12, 192.168/16). Anything else is refused (exit 2) before any command. `down`
# deletes only the namespaces, links and bridge its own state file records, each matching the prefix.
set -euo pipefail
PREFIX=${SFB_NETNS_PREFIX:-sfb}
SUBNET=${SFB_NETNS_SUBNET:-10.77.0}

die() { echo "netns-cluster: $*" >&2; exit 1; }
bad() { echo "netns-cluster: $*" >&2; exit 2; }  # a bad argument: nothing was done
# Both are used in names, paths and addresses (and once were grep patterns): strict patterns only.
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
  bad "SFB_NETNS_PREFIX '$PREFIX': a lower-case letter, then up to 9 lower-case letters or digits"
octet='(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])'
[[ $SUBNET =~ ^(10\.$octet|172\.(1[6-9]|2[0-9]|3[01])|192\.168)\.$octet$ ]] ||
  bad "SFB_NETNS_SUBNET '$SUBNET': the first three octets of a private /24 (10.a.b, 172.16-31.b, 192.168.b)"
STATE=/tmp/${PREFIX}-netns-cluster
BR=${PREFIX}br0
hosts() { cat "$STATE/hosts" 2>/dev/null || true; }

cmd_up() {
  local n=${1:-}; shift || true
  local rate=1gbit cpus="" period=5000 cc=cubic
  while [ $# -gt 0 ]; do
    case "$1" in
      --tcp-cc) cc=${2:-}; shift 2 || bad "up: --tcp-cc needs a value" ;;
      --rate) rate=${2:-}; shift 2 || bad "up: --rate needs a value" ;;
      --cpus) cpus=${2:-}; shift 2 || bad "up: --cpus needs a value" ;;
      --cpu-period-us) period=${2:-}; shift 2 || bad "up: --cpu-period-us needs a value" ;;
      *) bad "up: unknown option $1" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]{1,3}$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || bad "up: N must be 1..200, got '$n'"
  [[ "$rate" =~ ^[0-9]{1,6}(\.[0-9]{1,6})?[kmg]?bit$ ]] || bad "up: --rate must be like 1gbit, 300mbit or 500kbit, got '$rate'"
  [[ "$period" =~ ^[0-9]{1,7}$ ]] && [ "$((10#$period))" -ge 1000 ] && [ "$((10#$period))" -le 1000000 ] ||
    bad "up: --cpu-period-us must be 1000..1000000 microseconds, got '$period'"
  period=$((10#$period))
  if [ -n "$cpus" ]; then
    [[ "$cpus" =~ ^[0-9]{1,4}(\.[0-9]{1,6})?$ ]] && awk -v c="$cpus" 'BEGIN { exit !(c > 0 && c <= 1024) }' ||
      bad "up: --cpus must be cores per host, above 0 (e.g. 0.25), got '$cpus'"
    local quota
    quota=$(awk -v c="$cpus" -v p="$period" 'BEGIN { printf "%d", c * p }')
    [ "$quota" -ge 1000 ] || bad "up: --cpus $cpus x --cpu-period-us $period is a quota of $quota us; the kernel's least is 1000"
  fi
  local have
  have=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null || true)
  [ "$cc" = host ] || { [[ "$cc" =~ ^[a-z0-9_]{1,15}$ ]] && [[ " $have " == *" $cc "* ]]; } ||
    bad "up: --tcp-cc must be host or one of this kernel's congestion controls ($have), got '$cc'"
  [ "$(id -u)" = 0 ] || die "up needs root (ip netns, tc)"
  [ -d "$STATE" ] && die "a cluster is up already ($STATE); run 'down' first"
  mkdir -p "$STATE"
  echo "$rate" > "$STATE/rate"
  [ -z "$cpus" ] || make_cpu_budgets "$n" "$cpus" "$period"
  ip link add "$BR" type bridge
  echo "$BR" > "$STATE/links"
  ip addr add "$SUBNET.254/24" dev "$BR"
  ip link set "$BR" up
  : > "$STATE/hosts"
  for i in $(seq 0 $((n - 1))); do
    local ns=${PREFIX}h$i veth=${PREFIX}v$i addr=$SUBNET.$((i + 1))
    ip netns add "$ns"
    echo "$ns" >> "$STATE/namespaces"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    echo "$veth" >> "$STATE/links"
    ip link set "$veth" master "$BR" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # Rate limit both directions: the namespace's egress on eth0, its ingress as the bridge side's egress.
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
    tc qdisc add dev "$veth" root tbf rate "$rate" burst 256kb latency 100ms
    [ "$cc" = host ] || set_tcp_cc "$ns" "$cc"
    echo "$addr $ns h$i" >> "$STATE/hosts"
  done
  [ "$cc" = host ] && cc="$(cat /proc/sys/net/ipv4/tcp_congestion_control) (the machine's)"
  echo "$cc" > "$STATE/tcp_cc"
  # The launcher agent Open MPI uses instead of ssh: <agent> <host address> <command...>.
  # With --cpus it first moves itself into the host's cgroup: the daemon and every rank it starts
  # inherit the budget.
  cat > "$STATE/agent" <<AGENT
#!/bin/sh
host=\$1; shift
line=\$(grep "^\$host " "$STATE/hosts") || { echo "netns agent: unknown host \$host" >&2; exit 255; }
ns=\$(echo "\$line" | cut -d' ' -f2); name=\$(echo "\$line" | cut -d' ' -f3)
mounts=
if [ -f "$STATE/cgroup" ]; then
  echo \$\$ > "\$(cat "$STATE/cgroup")/\$name/cgroup.procs" || exit 255
  # ip netns exec mounts a fresh /sys without the cgroup file systems: mount the budget's again, so
  # that the ranks can read it.
  case "\$(cat "$STATE/cgroup")" in
    /sys/fs/cgroup/cpu/*) mounts="mount -t tmpfs cgroups /sys/fs/cgroup && mkdir /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu;" ;;
    *) mounts="mount -t cgroup2 cgroup2 /sys/fs/cgroup;" ;;
  esac
fi
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$name; \$mounts \$*"
AGENT
  chmod +x "$STATE/agent"
  echo "up: $n hosts on $SUBNET.0/24 at $rate each way${cpus:+, $cpus cores each (a ${period} us CFS period)}, TCP congestion control $cc ($STATE)"
}

# A namespace's default congestion control. Outside the root namespace the kernel lets a default be
# only one of tcp_allowed_congestion_control: the name is allowed first when it is not.
set_tcp_cc() {
  local ns=$1 cc=$2 allowed
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc" 2>/dev/null && return 0
  allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
  if [[ " $allowed " != *" $cc "* ]]; then
    # The value found and the one set, for down (written first: a failure below still restores).
    [ -f "$STATE/tcp_allowed_before" ] || echo "$allowed" > "$STATE/tcp_allowed_before"
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $cc" ||
      die "up: cannot allow $cc in net.ipv4.tcp_allowed_congestion_control"
    cat /proc/sys/net/ipv4/tcp_allowed_congestion_control > "$STATE/tcp_allowed_set"
    echo "netns-cluster: net.ipv4.tcp_allowed_congestion_control is now '$allowed $cc' (machine-wide; down restores '$allowed')" >&2
  fi
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc" ||
    die "up: cannot set $ns's TCP congestion control to $cc"
}

# One cgroup per host under the cpu controller (v1) or the unified hierarchy (v2), quota C x period.
make_cpu_budgets() {
  local n=$1 cpus=$2 period=$3 root quota
  quota=$(awk -v c="$cpus" -v p="$period" 'BEGIN { printf "%d", c * p }')
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control ||
      die "up: cannot enable the cpu controller in /sys/fs/cgroup (cgroup v2)"
    root=/sys/fs/cgroup/${PREFIX}-netns
    mkdir -p "$root"
    echo +cpu > "$root/cgroup.subtree_control"
  elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    root=/sys/fs/cgroup/cpu/${PREFIX}-netns
    mkdir -p "$root"
  else
    bad "up: --cpus needs the cgroup cpu controller (v1 /sys/fs/cgroup/cpu or v2 cpu.max); neither is mounted"
  fi
  echo "$root" > "$STATE/cgroup"
  for i in $(seq 0 $((n - 1))); do
    mkdir -p "$root/h$i"
    if [ -f "$root/h$i/cpu.max" ]; then
      echo "$quota $period" > "$root/h$i/cpu.max"
    else
      echo "$period" > "$root/h$i/cpu.cfs_period_us"
      echo "$quota" > "$root/h$i/cpu.cfs_quota_us"
    fi
  done
  echo "$cpus $period" > "$STATE/cpus"
  awk -v n="$n" -v c="$cpus" -v m="$(nproc)" 'BEGIN { exit !(n * c > m) }' &&
    echo "netns-cluster: warning: $n hosts x $cpus cores > the machine's $(nproc): the hosts still contend" >&2
  return 0
}

cmd_run() {
  [ -d "$STATE" ] || die "no cluster; run 'up N' first"
  local ppn=1
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
      --ppn) ppn=$2; shift 2 ;;
      *) bad "run: unknown option $1 (mpirun arguments go after --)" ;;
    esac
  done
  [ "${1:-}" = "--" ] && shift
  awk -v k="$ppn" '{ print $1 " slots=" k }' "$STATE/hosts" > "$STATE/hostfile"
  # --map-by node: ranks go round-robin over the hosts (rank r on host r mod N), so with P workers
  # on N = P hosts the FMS server ranks P.. land next to workers 0.., as Bosen co-locates them
  # (Open MPI's default, by slot, would pack ranks 0 and 1 onto the first host).
  # mpirun's stderr goes through quiet_setpgid; it runs in the background so that a signal to this
  # script reaches it (TERM, INT and HUP are passed on), with this script's stdin, and its status is
  # this script's.
  local err filter pid rc=0
  exec {err}> >(quiet_setpgid >&2)
  filter=$!
  mpirun --allow-run-as-root --oversubscribe --bind-to none --map-by node \
    --hostfile "$STATE/hostfile" --mca plm_rsh_agent "$STATE/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca mpi_yield_when_idle 1 --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
    -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$@" 0<&0 2>&"$err" &
  pid=$!
  exec {err}>&-
  trap 'kill -s TERM "$pid" 2>/dev/null || true' TERM INT HUP
  while :; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break  # ended (not a signal to this script that cut the wait short)
  done
  wait "$filter" 2>/dev/null || true  # its last lines out before this script's status
  return "$rc"
}

# Drops one line of Open MPI's from stderr, passing every other on as it comes: "[host:pid]
# plm:rsh: Warning: setpgid(P,P) failed in parent with errno=...(13)". Its rsh launcher forks each
# daemon's agent, and the child puts itself in a process group of its own (setpgid(0, 0)) before it
# execs the agent, while the parent makes the same call for it (plm_rsh_module.c). When the child
# has exec'd first, the parent's call fails with EACCES (13), which mpirun reports and ignores: the
# child had done it. The child closes every descriptor up to the open-files limit before its exec,
# so the lower the limit the more often it wins: under `ulimit -n 1024` or 64 the warning came on
# one run in four, under this machine's 20000 on none of twelve. Any other setpgid failure (another
# errno) passes.
quiet_setpgid() {
  grep --line-buffered -Ev '^(\[[^]]*\] )?plm:rsh: Warning: setpgid\(([0-9]+),\2\) failed in parent with errno=.*\(13\)$' || true
}

cmd_status() {
  [ -d "$STATE" ] || { echo "no cluster"; return 0; }
  echo "rate $(cat "$STATE/rate")"
  [ ! -f "$STATE/cpus" ] || echo "cpus per host, CFS period us: $(cat "$STATE/cpus") ($(cat "$STATE/cgroup"))"
  [ ! -f "$STATE/tcp_cc" ] || echo "TCP congestion control $(cat "$STATE/tcp_cc")"
  while read -r addr ns name; do
    echo "$name $ns $addr: $(ip netns exec "$ns" tc qdisc show dev eth0 | head -1)"
  done < "$STATE/hosts"
}

cmd_down() {
  # Only what this script's state file records, and only names it could have made: a state
  # directory someone else planted (not root's) or a line out of pattern deletes nothing.
  [ -d "$STATE" ] || { echo "down (no cluster: $STATE)"; return 0; }
  [ -O "$STATE" ] && [ ! -L "$STATE" ] || die "down: $STATE is not this user's own directory: nothing deleted"
  local name
  if [ -f "$STATE/namespaces" ]; then
    while read -r name; do
      [[ $name =~ ^${PREFIX}h[0-9]{1,3}$ ]] && ip netns del "$name" 2>/dev/null || true
    done < "$STATE/namespaces"
  elif [ -f "$STATE/hosts" ]; then  # a cluster brought up before the namespaces file
    while read -r _ name _; do
      [[ $name =~ ^${PREFIX}h[0-9]{1,3}$ ]] && ip netns del "$name" 2>/dev/null || true
    done < "$STATE/hosts"
  fi
  if [ -f "$STATE/links" ]; then
    while read -r name; do
      [[ $name =~ ^${PREFIX}(v[0-9]{1,3}|br0)$ ]] && ip link del "$name" 2>/dev/null || true
    done < "$STATE/links"
  else
    ip link del "$BR" 2>/dev/null || true  # its veths went with their namespaces
  fi
  if [ -f "$STATE/cgroup" ]; then
    local root
    root=$(cat "$STATE/cgroup")
    for g in "$root"/h*; do [ -d "$g" ] && rmdir "$g" 2>/dev/null || true; done
    rmdir "$root" 2>/dev/null || echo "netns-cluster: $root still has processes; it stays" >&2
  fi
  restore_tcp_allowed
  rm -rf "$STATE"
  echo "down"
}

# net.ipv4.tcp_allowed_congestion_control as up found it, when up changed it (set_tcp_cc) and
# nothing changed it since. The namespaces' defaults are gone with them; another cluster's keep
# theirs (the kernel checks the list when a default is set, not when a socket takes it).
restore_tcp_allowed() {
  [ -f "$STATE/tcp_allowed_before" ] || return 0
  local before now set
  before=$(cat "$STATE/tcp_allowed_before")
  now=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
  set=$(cat "$STATE/tcp_allowed_set" 2>/dev/null || echo "$now")
  if [ "$now" != "$set" ]; then
    echo "netns-cluster: net.ipv4.tcp_allowed_congestion_control is '$now', not the '$set' up set: left as it is (up found '$before')" >&2
  elif sysctl -qw net.ipv4.tcp_allowed_congestion_control="$before"; then
    echo "netns-cluster: net.ipv4.tcp_allowed_congestion_control restored to '$before'" >&2
  else
    echo "netns-cluster: cannot restore net.ipv4.tcp_allowed_congestion_control to '$before' (it is '$now')" >&2
  fi
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  run) shift; cmd_run "$@" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) sed -n '2,26p' "$0"; exit 2 ;;
esac
