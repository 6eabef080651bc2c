#!/usr/bin/env bash
# Soak: ASP on RANKS ranks (default 8) for SECONDS (default 120), sampling every rank's resident
# memory once a second into runs/soak/rss.csv, then reporting the growth between the first and
# the last fifth of the run (after a 10% warm-up). Exits 1 when any rank grew by more than 5%.
#   scripts/soak.sh [SECONDS] [RANKS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build sfbd
SECS=${1:-120}
RANKS=${2:-8}
OUT="$SFB_ROOT/runs/soak"
mkdir -p "$OUT"
sfb_mpirun -np "$RANKS" "$SFB_BUILD/apps/sfbd" --config "$SFB_ROOT/configs/soak_asp.toml" \
  --set stop.max_seconds="$SECS" --set output.dir="$OUT" > "$OUT/log" 2>&1 &
job=$!
echo "t_s,rank_pid,rss_kib" > "$OUT/rss.csv"
start=$(date +%s)
while kill -0 "$job" 2> /dev/null; do
  t=$(( $(date +%s) - start ))
  for p in $(pgrep -f -- "--set output.dir=$OUT" || true); do
    case "$(cat /proc/$p/comm 2> /dev/null)" in sfbd) ;; *) continue ;; esac
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$p/status" 2> /dev/null || true)
    [ -n "$rss" ] && echo "$t,$p,$rss" >> "$OUT/rss.csv"
  done
  sleep 1
done
wait "$job"
tail -12 "$OUT/log"
awk -F, -v secs="$SECS" 'NR > 1 {
    warm = secs * 0.1; first_end = warm + (secs - warm) * 0.2; last_start = secs - (secs - warm) * 0.2;
    if ($1 >= warm && $1 <= first_end) { fs[$2] += $3; fn[$2]++ }
    if ($1 >= last_start) { ls[$2] += $3; ln[$2]++ }
  }
  END {
    bad = 0;
    printf "%8s %14s %14s %8s\n", "pid", "early RSS MiB", "late RSS MiB", "growth";
    for (p in fs) if (ln[p] > 0) {
      a = fs[p] / fn[p]; b = ls[p] / ln[p]; g = (b - a) / a * 100;
      printf "%8s %14.1f %14.1f %7.2f%%\n", p, a / 1024, b / 1024, g;
      if (g > 5) bad = 1;
    }
    exit bad
  }' "$OUT/rss.csv"
