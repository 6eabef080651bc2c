#!/usr/bin/env bash
# The links and every collective sfb's schemes run on, measured in one run on the emulated cluster
# (scripts/netns-cluster.sh: N network namespaces at a tc rate), each as time and as a fraction of
# the bound the links allow, computed from iperf3 in the same run:
#
#  1. iperf3 (Debian's iperf3): one flow h0 -> h1; a ring of N flows at once (h_i -> h_i+1, every
#     host sending and receiving one flow: the per-host rate R the bounds use); all-to-all (every
#     host to every other at once).
#  2. sfb-commbench, one rank per host, sizes --min..--max bytes: MPI_Allreduce (Open MPI's tuned
#     choice over its TCP BTL), sfb's all-reduce, SF all-gather and SFB broadcast, then FMS push+pull
#     with 1 and with N parameter servers (rank N + s on host s, as sfbd places them).
#
# Bounds at R bits/s per host, each direction (full duplex), M bytes:
#   all-reduce     2 (P - 1) / P x M x 8 / R    (bytes a rank must send and receive)
#   all-gather     (P - 1) x M x 8 / R          (every rank's M to every other rank; SFB broadcast alike)
#   FMS            the busiest host's bytes in or out x 8 / R (S = 1: (P - 1) M on the server's host)
#
#   scripts/comm-bench.sh [--hosts 4] [--rate 1gbit] [--min-bytes 65536] [--max-bytes 268435456]
#                         [--repeats 3] [--out runs/comm-bench-4] [--reuse] [--table-only]
#
# Writes OUT/iperf.json, OUT/bench.csv, OUT/table.md (also printed) and OUT/fraction.png. With
# --reuse a cluster that is already up is used as it is (it must have --hosts hosts); otherwise
# the script brings one up and takes it down at the end. Needs root (network namespaces).
# The hosts share this machine's cores: with little compute the links are what is measured, but
# the kernel's TCP work of N hosts runs on the same cores (say so when quoting the numbers).
set -euo pipefail
source "$(dirname "$0")/common.sh"
hosts=4 rate=1gbit min_bytes=65536 max_bytes=268435456 repeats=3 out="" reuse=0 table_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --min-bytes) min_bytes=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --reuse) reuse=1; shift ;;
    --table-only) table_only=1; shift ;;
    *) echo "comm-bench: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$SFB_ROOT/runs/comm-bench-$hosts}
NETNS=$SFB_ROOT/scripts/netns-cluster.sh
BENCH=$SFB_BUILD/apps/sfb-commbench
PREFIX=${SFB_NETNS_PREFIX:-sfb}
SUBNET=${SFB_NETNS_SUBNET:-10.77.0}

iperf_pair() {  # iperf_pair FROM TO PORT SECONDS -> JSON on stdout
  ip netns exec "${PREFIX}h$2" iperf3 -s -1 -p "$3" > /dev/null 2>&1 &
  sleep 0.3
  ip netns exec "${PREFIX}h$1" iperf3 -c "$SUBNET.$(($2 + 1))" -p "$3" -t "$4" -J
}

measure_links() {
  command -v iperf3 > /dev/null || { echo "comm-bench: iperf3 is not installed (SFB_BENCH_DEPS=1 scripts/install-deps.sh)" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d)
  echo "comm-bench: iperf3 one flow, ring, all-to-all ($hosts hosts)" >&2
  iperf_pair 0 1 5201 5 > "$tmp/one.json"
  for i in $(seq 0 $((hosts - 1))); do iperf_pair "$i" $(((i + 1) % hosts)) $((5300 + i)) 5 > "$tmp/ring$i.json" & done
  wait
  for i in $(seq 0 $((hosts - 1))); do
    for j in $(seq 0 $((hosts - 1))); do
      [ "$i" = "$j" ] || iperf_pair "$i" "$j" $((5400 + i * hosts + j)) 5 > "$tmp/a2a_${i}_$j.json" &
    done
  done
  wait
  /usr/bin/python3 - "$tmp" "$hosts" "$rate" > "$out/iperf.json" <<'PY'
import json, sys, os
tmp, n, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rx = lambda f: json.load(open(os.path.join(tmp, f)))["end"]["sum_received"]["bits_per_second"]
ring = [rx(f"ring{i}.json") for i in range(n)]
a2a = [sum(rx(f"a2a_{i}_{j}.json") for j in range(n) if j != i) for i in range(n)]
print(json.dumps({"hosts": n, "rate": rate, "one_flow_bps": rx("one.json"), "ring_bps": ring,
                  "ring_min_bps": min(ring), "all_to_all_per_host_bps": a2a, "all_to_all_min_bps": min(a2a)}, indent=1))
PY
  rm -rf "$tmp"
}

run_bench() {
  local csv=$out/bench.csv
  echo "comm-bench: collectives, $hosts ranks" >&2
  "$NETNS" run -- -np "$hosts" "$BENCH" --ops mpi_allreduce,allreduce,allgather,broadcast --min-bytes "$min_bytes" \
    --max-bytes "$max_bytes" --repeats "$repeats" --out "$out/collectives.csv" > "$out/collectives.log" 2>&1
  for s in 1 "$hosts"; do
    echo "comm-bench: FMS, $hosts workers + $s servers" >&2
    "$NETNS" run -- -np $((hosts + s)) "$BENCH" --ops fms --fms-servers "$s" --min-bytes "$min_bytes" \
      --max-bytes "$max_bytes" --repeats "$repeats" --out "$out/fms$s.csv" > "$out/fms$s.log" 2>&1
  done
  { cat "$out/collectives.csv"; tail -n +2 "$out/fms1.csv"; tail -n +2 "$out/fms$hosts.csv"; } > "$csv"
}

mkdir -p "$out"
if [ "$table_only" = 0 ]; then
  [ -x "$BENCH" ] || sfb_build sfb-commbench
  if [ "$reuse" = 0 ]; then
    "$NETNS" up "$hosts" --rate "$rate"
    trap '"$NETNS" down > /dev/null' EXIT
  fi
  measure_links
  run_bench
fi

/usr/bin/python3 - "$out" <<'PY'
import csv, json, os, sys
out = sys.argv[1]
links = json.load(open(os.path.join(out, "iperf.json")))
R = links["ring_min_bps"]
n = links["hosts"]
rows = list(csv.DictReader(open(os.path.join(out, "bench.csv"))))
mpi = {int(r["bytes"]): float(r["median_us"]) for r in rows if r["op"] == "mpi_allreduce"}

def fms_host_bytes(P, S, M):
    # Rank r on host r mod n; server s (rank P + s) holds M / S of W; local pairs cost no link.
    inb, outb = [0.0] * n, [0.0] * n
    for w in range(P):
        for s in range(S):
            hw, hs = w % n, (P + s) % n
            if hw != hs:
                outb[hw] += M / S; inb[hs] += M / S   # push
                outb[hs] += M / S; inb[hw] += M / S   # pull
    return max(max(inb), max(outb))

def bound_s(r):
    P, S, M = int(r["workers"]), int(r["servers"]), int(r["bytes"])
    op = r["op"]
    if op in ("allreduce", "mpi_allreduce"): b = 2 * (P - 1) / P * M
    elif op in ("allgather", "broadcast"): b = (P - 1) * M
    elif op == "fms": b = fms_host_bytes(P, S, M)
    else: return None
    return b * 8 / R

def human(b):
    for u in ("B", "KiB", "MiB", "GiB"):
        if b < 1024: return f"{b:g} {u}"
        b /= 1024
    return f"{b:g} TiB"

lines = [f"# sfb comm-bench: {n} netns hosts at {links['rate']}",
         "",
         f"iperf3: one flow {links['one_flow_bps']/1e6:.0f} Mbit/s; ring of {n} flows at once: "
         f"{', '.join(f'{x/1e6:.0f}' for x in links['ring_bps'])} Mbit/s (R = {R/1e6:.0f} Mbit/s, the slowest, "
         f"used for every bound); all-to-all: {', '.join(f'{x/1e6:.0f}' for x in links['all_to_all_per_host_bps'])} "
         "Mbit/s sent per host.",
         "",
         "Medians of the slowest rank per call. tc tbf lets a burst of 256 KiB per link through at "
         "memory speed, so below about 1 MiB a call can beat the rate bound (over 100 %): there the "
         "latency and the comparison with MPI_Allreduce are what count.",
         "",
         "| op | servers | size | median | bound | of bound | vs MPI_Allreduce |",
         "|---|---|---|---|---|---|---|"]
for r in rows:
    b = bound_s(r)
    t = float(r["median_us"]) / 1e6
    M = int(r["bytes"])
    vs = ""
    if r["op"] == "allreduce" and M in mpi: vs = f"{mpi[M] / float(r['median_us']):.2f}x faster" if mpi[M] >= float(r['median_us']) else f"{float(r['median_us']) / mpi[M]:.2f}x slower"
    frac = f"{100 * b / t:.0f} %" if b else ""
    lines.append(f"| {r['op']} | {r['servers'] if r['op'] == 'fms' else ''} | {human(M)} | {t*1e3:.2f} ms | "
                 f"{b*1e3:.2f} ms | {frac} | {vs} |")
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text)
# Fraction of the bound per op and size, for the plot.
series = {}
for r in rows:
    b = bound_s(r)
    key = r["op"] + (f" S={r['servers']}" if r["op"] == "fms" else "")
    series.setdefault(key, []).append((int(r["bytes"]), 100 * b / (float(r["median_us"]) / 1e6)))
with open(os.path.join(out, "fraction.dat"), "w") as f:
    for k, pts in series.items():
        f.write(f'"{k}"\n')
        for x, y in pts: f.write(f"{x} {y:.2f}\n")
        f.write("\n\n")
open(os.path.join(out, "series.txt"), "w").write("\n".join(series) + "\n")
PY

if command -v gnuplot > /dev/null; then
  k=$(wc -l < "$out/series.txt")
  gnuplot <<GP
set terminal pngcairo size 900,540
set output "$out/fraction.png"
set logscale x 2
set format x "2^{%L}"
set xlabel "message size (bytes)"
set ylabel "% of the link bound (iperf3 ring rate)"
set yrange [0:*]
set key outside right noenhanced
set grid
set title "sfb collectives on $hosts netns hosts at $rate"
plot for [i=0:$((k - 1))] "$out/fraction.dat" index i using 1:2 with linespoints title columnheader(1)
GP
fi
