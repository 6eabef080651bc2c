#!/usr/bin/env bash
# Scaling of every scheme on emulated hosts (issue 64's benchmark, docs/performance.md "Sharded W"):
# for each host count N, scripts/netns-cluster.sh makes N hosts with a CPU budget and a rate-limited
# link each, sfb-compare runs the job under every scheme with one rank per host until it reaches the
# target objective (stop.target_objective), and the table gives each scheme's time to the target,
# its steady seconds per clock and clocks, its speedup over its own run on one host, and how much
# faster the sharded scheme is.
#
#   scripts/sharded-scaling.sh [--hosts "1 2 4 8"] [--cpus 0.25] [--rate 1gbit]
#        [--schemes sfb,allreduce,sharded] [--target 2.0] [--config configs/scaling_mlr_1024.toml]
#        [--repeats R] [--reuse] [--out runs/scaling]
#
# --reuse keeps the host counts OUT already holds (OUT/hN/median_runs.txt) and runs the others.
#
# Needs root (network namespaces, cgroups). Writes OUT/hN/ (sfb-compare's directories) and
# OUT/scaling.md. The CPU budget is each host's: N x cpus above the machine's cores contend.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
hosts="1 2 4 8" cpus=0.25 rate=1gbit schemes=sfb,allreduce,sharded target=2.0 repeats=1 reuse=0
config="$SFB_ROOT/configs/scaling_mlr_1024.toml" out=runs/scaling
bad() { echo "sharded-scaling: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=${2:-}; shift 2 || bad "--hosts needs a value" ;;
    --cpus) cpus=${2:-}; shift 2 || bad "--cpus needs a value" ;;
    --rate) rate=${2:-}; shift 2 || bad "--rate needs a value" ;;
    --schemes) schemes=${2:-}; shift 2 || bad "--schemes needs a value" ;;
    --target) target=${2:-}; shift 2 || bad "--target needs a value" ;;
    --config) config=${2:-}; shift 2 || bad "--config needs a value" ;;
    --repeats) repeats=${2:-}; shift 2 || bad "--repeats needs a value" ;;
    --out) out=${2:-}; shift 2 || bad "--out needs a value" ;;
    --reuse) reuse=1; shift ;;
    *) bad "unknown option $1" ;;
  esac
done
for n in $hosts; do [[ "$n" =~ ^[1-9][0-9]?$ ]] || bad "--hosts: '$n' is not a host count 1..99"; done
[[ "$target" =~ ^[0-9]+(\.[0-9]+)?$ ]] || bad "--target must be a number, got '$target'"
[[ "$repeats" =~ ^[1-9]$ ]] || bad "--repeats must be 1..9, got '$repeats'"
[ -f "$config" ] || bad "--config: no such file: $config"
[ -n "${SFB_NO_BUILD:-}" ] || sfb_build sfbd sfb-plan >&2
export SFB_NO_BUILD=1
mkdir -p "$out"
netns=$here/netns-cluster.sh
trap '"$netns" down > /dev/null 2>&1 || true' EXIT
for n in $hosts; do
  [ "$reuse" = 1 ] && [ -f "$out/h$n/median_runs.txt" ] && continue
  "$netns" down > /dev/null 2>&1 || true
  "$netns" up "$n" --cpus "$cpus" --rate "$rate" > "$out/netns-$n.log" 2>&1 || { cat "$out/netns-$n.log"; exit 1; }
  "$here/sfb-compare.sh" --config "$config" --netns --np "$n" --schemes "$schemes" --no-predict --repeats "$repeats" \
    --target "$target" --set stop.target_objective="$target" --set stop.max_clocks=100000 --out "$out/h$n" \
    > "$out/h$n.log" 2>&1 || { tail -30 "$out/h$n.log"; exit 1; }
done
"$netns" down > /dev/null 2>&1 || true

# One row per scheme and host count from each run's median repeat (sfb-compare's median_runs.txt).
ttt() { awk -v t="$target" '$3 <= t { print $1; found = 1; exit } END { if (!found) print "-" }' "$1/curve.dat"; }
{
  echo "# Scaling to objective $target: $(basename "$config"), hosts of $cpus core and $rate, one rank each"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| scheme | hosts | clocks to target | s/clock | time to target (s) | speedup over 1 host | sharded's lead |"
  echo "|---|---|---|---|---|---|---|"
  for scheme in ${schemes//,/ }; do
    for n in $hosts; do
      dir=$(awk -v r="$scheme-s0" '$1 == r { print $2 }' "$out/h$n/median_runs.txt")
      [ -n "$dir" ] || continue
      t=$(ttt "$dir")
      c=$(awk -v t="$target" '$3 <= t { print $2; exit }' "$dir/curve.dat")
      d1=$(awk -v r="$scheme-s0" '$1 == r { print $2 }' "$out/h${hosts%% *}/median_runs.txt")
      t1=$(ttt "$d1")
      ds=$(awk '$1 == "sharded-s0" { print $2 }' "$out/h$n/median_runs.txt")
      ts=$([ -n "$ds" ] && ttt "$ds" || echo -)
      awk -v s="$scheme" -v n="$n" -v c="${c:--}" -v t="$t" -v t1="$t1" -v ts="$ts" 'BEGIN {
        spc = (c != "-" && c > 0) ? sprintf("%.4f", t / c) : "-"
        up = (t != "-" && t1 != "-" && t > 0) ? sprintf("%.2fx", t1 / t) : "-"
        lead = (t != "-" && ts != "-" && ts > 0) ? sprintf("%.2fx", t / ts) : "-"
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", s, n, c, spc, t, up, lead }'
    done
  done
} > "$out/scaling.md"
cat "$out/scaling.md"
