#!/usr/bin/env bash
# A real Slurm on one machine, for tests and trials: munged, slurmctld and one slurmd per emulated
# node of scripts/netns-cluster.sh (each node a network namespace with its own address, hostname,
# rate-limited link and, with --cpus, CPU budget), all run from a state directory without systemd.
#
#   scripts/slurm-cluster.sh up N [--node-cpus K] [netns-cluster options: --rate R --cpus C ...]
#                          nodes h0..h{N-1} at 10.77.0.1..N, partition "sfb", K CPUs each (default 4)
#   scripts/slurm-cluster.sh env        the environment a client needs (eval "$(... env)")
#   scripts/slurm-cluster.sh status     sinfo
#   scripts/slurm-cluster.sh down       stops every daemon it started (by pid), then the namespaces
#
# slurmctld runs in the root namespace on the bridge's address (10.77.0.254); clients (sbatch,
# srun, squeue) need SLURM_CONF, which `env` prints. Slurm's own choices here: proctrack/linuxproc
# and task/none (no cgroups, no systemd), select/cons_tres with CR_Core, MpiDefault=pmix (srun
# --mpi=pmix starts Open MPI's ranks through Slurm's PMIx plugin), SlurmdParameters=config_overrides
# (K CPUs per node whatever the machine has: with --node-cpus above the real cores the nodes
# oversubscribe, as the netns hosts do anyway). Needs root and the packages slurm-wlm and munge
# (scripts/install-deps.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=${SFB_NETNS_PREFIX:-sfb}
NETNS_STATE=/tmp/${PREFIX}-netns-cluster
STATE=/tmp/${PREFIX}-slurm-cluster
CTLD_PORT=${SFB_SLURMCTLD_PORT:-6917}
SLURMD_PORT=${SFB_SLURMD_PORT:-6918}

die() { echo "slurm-cluster: $*" >&2; exit 1; }
bad() { echo "slurm-cluster: $*" >&2; exit 2; }
# Used in paths, slurm.conf and a pkill pattern: strict patterns, before any command (exit 2).
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
  bad "SFB_NETNS_PREFIX '$PREFIX': a lower-case letter, then up to 9 lower-case letters or digits"
for port in "SFB_SLURMCTLD_PORT=$CTLD_PORT" "SFB_SLURMD_PORT=$SLURMD_PORT"; do
  [[ ${port#*=} =~ ^[1-9][0-9]{3,4}$ ]] && [ "${port#*=}" -le 65535 ] ||
    bad "${port%%=*} '${port#*=}': a TCP port from 1024 to 65535"
done
[ "$CTLD_PORT" != "$SLURMD_PORT" ] || bad "SFB_SLURMCTLD_PORT and SFB_SLURMD_PORT are both $CTLD_PORT: give each its own"
# A pid from the state file, signalled only when it is a number and its process one this script started.
kill_recorded() {  # kill_recorded SIGNAL PIDFILE
  local pid
  pid=$(cat "$2" 2> /dev/null) || return 0
  [[ $pid =~ ^[1-9][0-9]{0,9}$ ]] || return 0
  case "$(cat "/proc/$pid/comm" 2> /dev/null)" in slurmd | slurmctld | munged) kill "$1" "$pid" 2> /dev/null || true ;; esac
}

write_conf() {  # write_conf N K
  local n=$1 k=$2 last=$(($1 - 1))
  cat > "$STATE/slurm.conf" <<CONF
# Written by scripts/slurm-cluster.sh: $n emulated nodes of scripts/netns-cluster.sh.
ClusterName=sfb
SlurmctldHost=$(hostname)(${SUBNET}.254)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.%n.log
TmpFS=$STATE/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=pmix
SlurmdParameters=config_overrides
ReturnToService=2
EnforcePartLimits=ALL
KillWait=5
InactiveLimit=0
MinJobAge=300
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=h[0-$last] NodeAddr=${SUBNET}.[1-$n] CPUs=$k State=UNKNOWN
PartitionName=sfb Nodes=h[0-$last] Default=YES MaxTime=INFINITE State=UP
CONF
}

cmd_up() {
  local n=${1:-} k=4 pass=()
  shift || true
  [[ "$n" =~ ^[0-9]{1,2}$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || bad "up: N must be 1..32 nodes, got '$n'"
  while [ $# -gt 0 ]; do
    case "$1" in
      --node-cpus) [[ ${2:-} =~ ^[0-9]{1,3}$ ]] && [ "$2" -ge 1 ] || bad "up: --node-cpus '${2:-}': 1..999"
        k=$2; shift 2 ;;
      *) pass+=("$1"); shift ;;
    esac
  done
  [ "$(id -u)" = 0 ] || die "up needs root"
  for b in munged slurmctld slurmd srun sbatch; do
    command -v "$b" > /dev/null || die "up: $b is missing (scripts/install-deps.sh installs slurm-wlm and munge)"
  done
  [ -d "$STATE" ] && die "a Slurm cluster is up already ($STATE); run 'down' first"
  "$HERE/netns-cluster.sh" up "$n" "${pass[@]}"
  mkdir -p "$STATE"/{munge,ctld,spool,log}
  SUBNET=$(cut -d' ' -f1 "$NETNS_STATE/hosts" | head -1 | cut -d. -f1-3)
  write_conf "$n" "$k"
  # munge: a fresh key, the daemon's socket in the state directory (reachable from every namespace).
  dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$STATE/munge/munge.key"
  munged --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/seed" ||
    die "up: munged did not start ($STATE/log/munged.log)"
  SLURM_CONF="$STATE/slurm.conf" slurmctld -i || die "up: slurmctld did not start ($STATE/log/slurmctld.log)"
  local i ns cg=""
  [ -f "$NETNS_STATE/cgroup" ] && cg=$(cat "$NETNS_STATE/cgroup")
  for i in $(seq 0 $((n - 1))); do
    ns=$(sed -n "$((i + 1))p" "$NETNS_STATE/hosts" | cut -d' ' -f2)
    mkdir -p "$STATE/spool/h$i" "$STATE/tmp/h$i"
    # The node's network namespace (nsenter keeps the mounts: slurmd wants /sys/fs/cgroup, which
    # `ip netns exec` would hide), its own hostname, and its CPU budget: slurmd's steps inherit all.
    [ -z "$cg" ] || echo $$ > "$cg/h$i/cgroup.procs"
    nsenter --net="/run/netns/$ns" unshare --uts /bin/sh -c \
      "hostname h$i && SLURM_CONF='$STATE/slurm.conf' exec slurmd -N h$i" ||
      die "up: slurmd on h$i did not start ($STATE/log/slurmd.h$i.log)"
  done
  [ -z "$cg" ] || echo $$ > "$(dirname "$cg")/cgroup.procs"
  # Up when every node is idle (slurmd registered).
  local t
  for t in $(seq 1 100); do
    [ "$(SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -t idle -o %N 2> /dev/null | wc -l)" -ge "$n" ] && break
    sleep 0.2
  done
  [ "$t" -lt 100 ] || { SLURM_CONF="$STATE/slurm.conf" sinfo -N >&2 || true; die "up: the nodes did not register within 20 s"; }
  echo "up: Slurm with $n nodes (h0..h$((n - 1)), $k CPUs each, partition sfb); eval \"\$($0 env)\" for sbatch/srun"
}

cmd_down() {
  local f
  [ -d "$STATE" ] || { "$HERE/netns-cluster.sh" down > /dev/null 2>&1 || true; echo "down"; return 0; }
  [ -O "$STATE" ] && [ ! -L "$STATE" ] || die "down: $STATE is not this user's own directory: nothing stopped"
  for f in "$STATE"/slurmd.*.pid "$STATE/slurmctld.pid" "$STATE/munge/munged.pid"; do
    if [ -f "$f" ]; then kill_recorded -TERM "$f"; fi
  done
  sleep 0.5
  for f in "$STATE"/slurmd.*.pid "$STATE/slurmctld.pid" "$STATE/munge/munged.pid"; do
    if [ -f "$f" ]; then kill_recorded -KILL "$f"; fi
  done
  # Steps a killed slurmd left behind (slurmstepd and its tasks).
  pkill -9 -f "slurmstepd.*$STATE" 2> /dev/null || true
  rm -rf "$STATE"
  "$HERE/netns-cluster.sh" down > /dev/null 2>&1 || true
  echo "down"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  env) [ -f "$STATE/slurm.conf" ] || die "no Slurm cluster is up"; echo "export SLURM_CONF=$STATE/slurm.conf" ;;
  status) SLURM_CONF="$STATE/slurm.conf" sinfo -N ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] || exit 2 ;;
esac
