#!/usr/bin/env bash
# scripts/netns-cluster.sh, what it leaves behind: one check per argument.
#   setpgid  `run` drops Open MPI's benign setpgid race warning (errno 13) from mpirun's stderr and
#            nothing else; mpirun keeps the script's stdin, its status is the script's, and a TERM
#            to the script reaches it. A stand-in mpirun on PATH and a stand-in cluster state:
#            needs neither root nor MPI.
#   tcp_cc   `up --tcp-cc NAME` with a name the machine does not allow yet adds it to
#            net.ipv4.tcp_allowed_congestion_control and `down` puts the value back. Skipped (77)
#            without root and network namespaces, or where every congestion control is allowed.
#   netns_launch_test.sh <source dir> setpgid|tcp_cc
set -euo pipefail
SRC=$1
NC="$SRC/scripts/netns-cluster.sh"
OUT=$(mktemp -d)
fail() { echo "FAIL: $*"; exit 1; }

setpgid() {
  export SFB_NETNS_PREFIX=sfbtl SFB_NETNS_SUBNET=10.81.0
  state=/tmp/sfbtl-netns-cluster
  [ ! -e "$state" ] || fail "$state exists: a cluster of this test's prefix is up"
  trap 'rm -rf "$OUT" "$state"' EXIT
  mkdir -p "$state" "$OUT/bin"
  echo "10.81.0.1 sfbtlh0 h0" > "$state/hosts"
  cat > "$OUT/bin/mpirun" <<'FAKE'
#!/usr/bin/env bash
trap 'echo term > "$MARK"; kill "$nap" 2> /dev/null; exit 143' TERM
echo "[vm:17359] plm:rsh: Warning: setpgid(17377,17377) failed in parent with errno=Permission denied(13)" >&2
echo "[vm:17359] plm:rsh: Warning: setpgid(17378,17378) failed in parent with errno=Operation not permitted(1)" >&2
echo "plm:rsh: Warning: setpgid(5,5) failed in parent with errno=Permission denied(13)" >&2
echo "a rank's own error" >&2
read -r line || true
echo "stdin: $line"
[ "${*: -1}" = sleep ] && { sleep 30 & nap=$!; wait; }
exit 3
FAKE
  chmod +x "$OUT/bin/mpirun"
  local rc=0
  echo hello | PATH="$OUT/bin:$PATH" "$NC" run -- > "$OUT/out" 2> "$OUT/err" || rc=$?
  cat "$OUT/out" "$OUT/err"
  [ "$rc" = 3 ] || fail "run's status $rc, not mpirun's 3"
  grep -q "^stdin: hello$" "$OUT/out" || fail "mpirun did not get run's stdin"
  ! grep -q "Permission denied(13)" "$OUT/err" || fail "the setpgid warning of errno 13 is still there"
  grep -q "Operation not permitted(1)" "$OUT/err" || fail "another setpgid failure was dropped"
  grep -q "^a rank's own error$" "$OUT/err" || fail "another line was dropped"
  # A TERM to run reaches mpirun (run does not exec it any more).
  PATH="$OUT/bin:$PATH" MARK="$OUT/mark" "$NC" run -- sleep < /dev/null > /dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 50); do pgrep -f "$OUT/bin/mpirun" > /dev/null && break; sleep 0.1; done
  sleep 0.3
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  [ -f "$OUT/mark" ] || fail "mpirun never got the TERM sent to run (run's status $rc)"
  [ "$rc" = 143 ] || fail "run's status after TERM: $rc, expected mpirun's 143"
  echo "setpgid check passed"
}

tcp_cc() {
  export SFB_NETNS_PREFIX=sfbtc SFB_NETNS_SUBNET=10.82.0
  if [ "$(id -u)" != 0 ] || ! ip netns add sfbtc-probe 2> /dev/null; then
    echo "SKIP: cannot create network namespaces here (needs root and iproute2)"; exit 77
  fi
  ip netns del sfbtc-probe
  knob=/proc/sys/net/ipv4/tcp_allowed_congestion_control cc=""
  before=$(cat "$knob")
  for c in $(cat /proc/sys/net/ipv4/tcp_available_congestion_control); do
    [[ " $before " == *" $c "* ]] || { cc=$c; break; }
  done
  [ -n "$cc" ] || { echo "SKIP: every congestion control is allowed already ($before)"; exit 77; }
  # Whatever happens, the machine's setting as found.
  trap '"$NC" down > /dev/null 2>&1 || true; [ "$(cat "$knob")" = "$before" ] || sysctl -qw net.ipv4.tcp_allowed_congestion_control="$before"; rm -rf "$OUT"' EXIT
  "$NC" up 1 --rate 100mbit --tcp-cc "$cc"
  local during after
  during=$(cat "$knob")
  [[ " $during " == *" $cc "* ]] || fail "up --tcp-cc $cc: the allowed list is '$during'"
  [ "$(ip netns exec sfbtch0 cat /proc/sys/net/ipv4/tcp_congestion_control)" = "$cc" ] || fail "the host's default is not $cc"
  "$NC" down
  after=$(cat "$knob")
  [ "$after" = "$before" ] || fail "down left tcp_allowed_congestion_control '$after', up found '$before'"
  echo "tcp_cc check passed: '$before' -> '$during' -> '$after'"
}

case "${2:-}" in
  setpgid) setpgid ;;
  tcp_cc) tcp_cc ;;
  *) echo "usage: $0 <source dir> setpgid|tcp_cc" >&2; exit 2 ;;
esac
