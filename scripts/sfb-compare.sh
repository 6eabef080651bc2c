#!/usr/bin/env bash
# sfb-compare: runs one job config under several communication schemes and settings and compares
# them: time to a target objective, seconds per clock measured and predicted (sfb-plan, from a
# profile sfbd measures first on the same ranks), throughput, bytes per clock (measured and
# theory), where the wall time went, and a verdict (the winner, by how much, its bytes against the
# next scheme's, and SFB's break-even for this job). A Markdown table, PNG plots (gnuplot) and every
# run's raw metrics.
#
#   sfb-compare --config x.toml [options] [-- extra sfbd args]
#     --schemes LIST     comma list of sfb, halton, halton-static, fms, allreduce, sharded
#                        (default: sfb,halton,fms,allreduce)
#     --np P             workers                                            (default 4)
#     --servers S        FMS parameter-server ranks, added to the P workers (default 1)
#     --staleness LIST   comma list of staleness values (0, 2, inf, ...)    (default 0)
#     --q LIST           Halton peers per worker, a comma list runs one job per Q (the paper's Q
#                        sweep)                                             (default: ceil(log2 P))
#     --k K              minibatch K                                        (default: the config's)
#     --set KEY=VALUE    any config override (repeatable; e.g. data.features=8192)
#     --target OBJ       target objective (default: the worst final objective over the runs)
#     --repeats R        run every variant R times: medians, and min-max   (default 1)
#     --no-predict       skip the profile and the predictions
#     --partial-profile  keep a profile that skipped an engine run (sfbd --partial-profile; without
#                        it such a profile is an error); predictions.md and table.md then say so
#     --table-only       run nothing: rebuild the predictions (from DIR/profile.json), the table and
#                        the plots from the runs already in DIR (the same options otherwise)
#     --netns            run on the cluster of sfb-netns-cluster / scripts/netns-cluster.sh (up it first)
#     --out DIR          output directory                                   (default ./runs/compare)
#
# Which sfbd: $SFBD when set; else the sfbd installed beside this script (an installed
# sfb-compare); else, in a source tree, build/apps/sfbd ($SFB_BUILD), built first unless
# SFB_NO_BUILD=1. sfb-plan is found the same way ($SFB_PLAN). Every rank runs with
# OMP_NUM_THREADS=1 and runtime.threads = 1 (the ranks share this machine's cores).
#
# Writes DIR/table.md, DIR/objective_vs_time.png, DIR/objective_vs_clock.png,
# DIR/bytes_per_clock.png, DIR/time_breakdown.png (compute, waiting, other: they add up to the wall
# time), DIR/drift_vs_clock.png (replica drift), DIR/profile.json, DIR/predictions.csv and
# DIR/median_runs.txt (each run's median repeat directory: the repeat nearest its median seconds per
# clock) and
# DIR/<run>[-rN]/{metrics.jsonl,summary.json,log}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${SFBD:-}" ]; then
  sfbd=$SFBD
elif [ -x "$here/sfbd" ]; then
  sfbd=$here/sfbd  # installed: bin/sfb-compare beside bin/sfbd
else
  source "$here/common.sh"
  [ -n "${SFB_NO_BUILD:-}" ] || sfb_build sfbd sfb-plan >&2
  sfbd=$SFB_BUILD/apps/sfbd
fi
plan=${SFB_PLAN:-$(dirname "$sfbd")/sfb-plan}
netns_script=$here/sfb-netns-cluster
[ -x "$netns_script" ] || netns_script=$here/netns-cluster.sh
mpirun_local=(env OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none)
field() { jq -r --arg k "$1" '.[$k] | if type == "string" then . else tojson end' "$2"; }

config="" schemes="sfb,halton,fms,allreduce" np=4 servers=1 stales="0" q="" k="" target="" netns=0 repeats=1 predict=1
partial=()
table_only=0
out="runs/compare"
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --schemes) schemes=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --staleness) stales=$2; shift 2 ;;
    --q) q=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --target) target=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --no-predict) predict=0; shift ;;
    --partial-profile) partial=(--partial-profile); shift ;;
    --table-only) table_only=1; shift ;;
    --netns) netns=1; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; sets+=("$@"); break ;;
    *) echo "sfb-compare: unknown option $1 (sfb-compare --help)" >&2; exit 2 ;;
  esac
done
[ -n "$config" ] || { echo "sfb-compare: --config is required" >&2; exit 2; }
[ -f "$config" ] || { echo "sfb-compare: no such config: $config" >&2; exit 2; }
# Every number is checked before any work: exit 2 naming the option and the value.
need_int() {  # <option> <value> <min>
  [[ "$2" =~ ^[0-9]+$ ]] && [ "${#2}" -le 9 ] && [ "$2" -ge "$3" ] ||
    { echo "sfb-compare: $1 must be an integer >= $3, got '$2'" >&2; exit 2; }
}
need_int --repeats "$repeats" 1
need_int --np "$np" 1
need_int --servers "$servers" 1
if [ -n "$q" ]; then  # a comma list: every element a count
  IFS=, read -r -a q_list <<< "$q"
  [ "${#q_list[@]}" -gt 0 ] && [[ "$q" != *, ]] || { echo "sfb-compare: --q must be a comma list of integers >= 1, got '$q'" >&2; exit 2; }
  for qv in "${q_list[@]}"; do need_int --q "$qv" 1; done
fi
[ -z "$k" ] || need_int --k "$k" 1
IFS=, read -r -a stale_list <<< "$stales"
for st in "${stale_list[@]}"; do
  [ "$st" = inf ] || need_int --staleness "$st" 0
done
[ -z "$target" ] || [[ "$target" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] ||
  { echo "sfb-compare: --target must be a finite number >= 0, got '$target'" >&2; exit 2; }
[ -x "$sfbd" ] || { echo "sfb-compare: no sfbd at $sfbd (set SFBD)" >&2; exit 2; }
command -v gnuplot > /dev/null || { echo "sfb-compare: gnuplot is missing (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 2; }
command -v jq > /dev/null || { echo "sfb-compare: jq is missing" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

launch() {  # <ranks> <log> sfbd-args...
  local ranks=$1 log=$2
  shift 2
  if [ "$netns" = 1 ]; then
    "$netns_script" run -- -np "$ranks" "$sfbd" "$@" > "$log" 2>&1
  else
    "${mpirun_local[@]}" -np "$ranks" "$sfbd" "$@" > "$log" 2>&1
  fi
}
base=(--config "$config" --set output.log_level=warn --set runtime.threads=1)
[ -n "$k" ] && base+=(--set optimizer.minibatch="$k")

# The profile on the P workers (with FMS among the schemes, its S servers launched too: the profile
# then has the FMS engine's clock with them), and every scheme's prediction at P on the fitted link.
if [ "$predict" = 1 ] && [ "$table_only" = 0 ]; then
  [ -x "$plan" ] || { echo "sfb-compare: no sfb-plan at $plan (set SFB_PLAN, or --no-predict)" >&2; exit 2; }
  pranks=$np pscheme=(--set comm.scheme=sfb)
  [[ ",$schemes," == *,fms,* ]] && pranks=$((np + servers)) pscheme=(--set comm.scheme=fms --set fms.servers="$servers")
  echo "== profile: $pranks ranks: sfbd --profile $out/profile.json"
  mkdir -p "$out/profile"
  launch "$pranks" "$out/profile/log" "${base[@]}" --set output.dir="$out/profile" "${pscheme[@]}" "${sets[@]}" \
    --profile "$out/profile.json" "${partial[@]}" || { tail -20 "$out/profile/log"; exit 1; }
fi

# Every (scheme, Q) to run: Halton schemes once per Q of --q, the others once.
q=${q//,/ }
variants=()
for scheme in ${schemes//,/ }; do
  case "$scheme" in
    halton|halton-static) for qv in ${q:-default}; do variants+=("$scheme:$qv"); done ;;
    sfb|fms|allreduce|sharded) variants+=("$scheme:-") ;;
    *) echo "sfb-compare: unknown scheme $scheme" >&2; exit 2 ;;
  esac
done
plan_schemes=() runs=()
declare -A plan_of
for variant in "${variants[@]}"; do
  scheme=${variant%%:*} qv=${variant#*:}
  case "$scheme" in  # the sfb-plan scheme of this run (none for static Halton)
    sfb|allreduce|sharded) ps=$scheme ;;
    halton) ps=halton; [ "$qv" != "default" ] && ps="halton:$qv" ;;
    fms) ps="fms:$servers" ;;
    *) ps="" ;;
  esac
  [ -n "$ps" ] && plan_schemes+=("$ps")
  for s in ${stales//,/ }; do
    if [ "$scheme" = sharded ] && [ "$s" != 0 ]; then
      echo "sfb-compare: sharded runs BSP only: no sharded run at staleness $s" >&2
      continue
    fi
    name="$scheme-s$s"
    [[ "$qv" != "-" && "$qv" != "default" ]] && name="$scheme-q$qv-s$s"
    plan_of[$name]=$ps
    args=(--set sfb.staleness="$s")
    ranks=$np
    case "$scheme" in
      sfb) args+=(--set comm.scheme=sfb --set sfb.broadcast=full) ;;
      halton|halton-static) args+=(--set comm.scheme=sfb --set sfb.broadcast="$scheme")
              [ "$qv" != "default" ] && args+=(--set sfb.halton_q="$qv") ;;
      fms) args+=(--set comm.scheme=fms --set fms.servers="$servers"); ranks=$((np + servers)) ;;
      allreduce) args+=(--set comm.scheme=allreduce) ;;
      sharded) args+=(--set comm.scheme=sharded) ;;
    esac
    for ((r = 1; r <= repeats; r++)); do
      dir="$out/$name"
      [ "$repeats" -gt 1 ] && dir="$out/$name-r$r"
      if [ "$table_only" = 1 ]; then
        [ -f "$dir/summary.json" ] || { echo "sfb-compare: --table-only: no run in $dir" >&2; exit 2; }
        continue
      fi
      rm -rf "$dir"
      mkdir -p "$dir"
      echo "== $(basename "$dir"): $ranks ranks: sfbd ${base[*]} ${args[*]} ${sets[*]}"
      launch "$ranks" "$dir/log" "${base[@]}" --set output.dir="$dir" "${args[@]}" "${sets[@]}" \
        || { tail -20 "$dir/log"; exit 1; }
      # objective vs time and clock, for the plots: seconds clock objective
      jq -r '"\(.seconds) \(.clock) \(.objective)"' "$dir/metrics.jsonl" > "$dir/curve.dat"
      jq -r 'select(.replica_drift_clock != null) | "\(.replica_drift_clock) \(.replica_drift)"' "$dir/metrics.jsonl" \
        > "$dir/drift.dat"
    done
    runs+=("$name")
  done
done
if [ "$predict" = 1 ]; then
  [ -f "$out/profile.json" ] || { echo "sfb-compare: no $out/profile.json (run without --table-only, or --no-predict)" >&2; exit 2; }
  plan_list=$(IFS=,; echo "${plan_schemes[*]}")
  # The ranks' layout as profiled: sharing one machine's cores (--one-host), or each in a CPU budget
  # of its own (netns-cluster.sh --cpus: the profile's ranks_on_host is 1, its cores the budget's).
  layout=()
  [ "$(jq -r .ranks_on_host "$out/profile.json")" = 1 ] || layout=(--one-host)
  "$plan" --profile "$out/profile.json" --nodes "$np" --links fitted "${layout[@]}" --schemes "$plan_list" \
    --csv "$out/predictions.csv" > "$out/predictions.md"
fi
predicted() {  # <run>: predicted seconds per clock ("-" when none)
  local ps=${plan_of[$1]:-}
  [ "$predict" = 1 ] && [ -n "$ps" ] || { echo "-"; return; }
  awk -F, -v s="$ps" 'NR > 1 { n = $3; if (n == s || (s ~ /^fms:/ && n == "fms:s" substr(s, 5)) \
    || (s ~ /^halton:/ && n == "halton:q" substr(s, 8))) { print $6; exit } }' "$out/predictions.csv"
}

repeat_dirs() {  # <run>: its run directories
  if [ "$repeats" -gt 1 ]; then for ((r = 1; r <= repeats; r++)); do echo "$out/$1-r$r"; done; else echo "$out/$1"; fi
}
# The target: given, or the worst final objective (every run reached it).
if [ -z "$target" ]; then
  target=$(for r in "${runs[@]}"; do
             mapfile -t ds < <(repeat_dirs "$r")
             for d in "${ds[@]}"; do field final_objective "$d/summary.json"; done
           done | sort -g | tail -1)
fi
ttt() {  # time to target: the first evaluation at or below it (seconds), or "-" when never
  awk -v t="$target" '$3 <= t { print $1; found = 1; exit } END { if (!found) print "-" }' "$1"
}
stats() {  # values on stdin ("-" ignored): "median min max", or "- - -" (every value "-": grep finds none); an even
  # count's median is the mean of the two middle values
  { grep -v '^-$' || true; } | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "- - -"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
}
range() {  # "median min max" -> "median" or "median (min-max)"
  awk -v r="$repeats" '{ if ($1 == "-") print "-"; else if (r > 1) printf "%.3g (%.3g-%.3g)\n", $1, $2, $3; else printf "%.3g\n", $1 }'
}

steady() {  # <run dir>: seconds per clock in the steady state, between the evaluations after clock 0
  # and before the last clock (start-up, the first clock's connections and the end's consensus and
  # shutdown left out); wall / clocks when there are fewer than two such evaluations.
  awk -v last="$(jq -r .final_clock "$1/summary.json")" -v wall="$(jq -r .seconds "$1/summary.json")" '
    $2 > 0 && $2 < last { if (!n++) { s0 = $1; c0 = $2 } s1 = $1; c1 = $2 }
    END { if (n >= 2 && c1 > c0) printf "%.6g\n", (s1 - s0) / (c1 - c0); else printf "%.6g\n", wall / (last > 0 ? last : 1) }' "$1/curve.dat"
}

# Per run: the repeat nearest the median seconds per clock (the lower of two as near) gives the
# curve and the other columns.
declare -A row_ttt row_spc row_dir row_steal
for r in "${runs[@]}"; do
  mapfile -t dirs < <(repeat_dirs "$r")
  row_ttt[$r]=$(for d in "${dirs[@]}"; do ttt "$d/curve.dat"; done | stats)
  row_spc[$r]=$(for d in "${dirs[@]}"; do steady "$d"; done | stats)
  # The hypervisor's steal during each repeat, in % (null: unknown, or an earlier build's summary).
  row_steal[$r]=$(for d in "${dirs[@]}"; do
                    jq -r '.cpu_stolen_share // "-" | if . == "-" then . else . * 100 end' "$d/summary.json"
                  done | stats)
  med=$(echo "${row_spc[$r]}" | awk '{ print $1 }')
  row_dir[$r]=$(for d in "${dirs[@]}"; do echo "$(steady "$d") $d"; done | sort -g |
    awk -v m="$med" '{ d = $1 - m; if (d < 0) d = -d } NR == 1 || d < best { best = d; sub(/^[^ ]* /, ""); dir = $0 }
      END { print dir }')
done

for r in "${runs[@]}"; do echo "$r ${row_dir[$r]}"; done > "$out/median_runs.txt"

verdict() {
  local best="" next=""
  # Rank by median time to target; runs that never reached it by seconds per clock, after those that did.
  mapfile -t order < <(for r in "${runs[@]}"; do
    t=$(echo "${row_ttt[$r]}" | awk '{ print $1 }') s=$(echo "${row_spc[$r]}" | awk '{ print $1 }')
    if [ "$t" = "-" ]; then echo "1 $s $r"; else echo "0 $t $r"; fi
  done | sort -k1,1n -k2,2g | awk '{ print $3 }')
  best=${order[0]}
  [ "${#order[@]}" -gt 1 ] && next=${order[1]}
  local sb="${row_dir[$best]}/summary.json"
  local J D K P
  J=$(field J "$sb") D=$(field D "$sb") K=$(jq -r '.settings["optimizer.minibatch"]' "$sb") P=$np
  local by="time to target"
  [ "$(echo "${row_ttt[$best]}" | awk '{ print $1 }')" = "-" ] && by="seconds per clock (no run reached the target)"
  if [ -n "$next" ]; then
    local bn="${row_dir[$next]}/summary.json"
    awk -v b="$best" -v n="$next" -v tb="$(echo "${row_ttt[$best]}" | awk '{ print $1 }')" \
        -v tn="$(echo "${row_ttt[$next]}" | awk '{ print $1 }')" -v sb="$(echo "${row_spc[$best]}" | awk '{ print $1 }')" \
        -v sn="$(echo "${row_spc[$next]}" | awk '{ print $1 }')" -v by="$by" \
        -v mb="$(field bytes_per_clock "$sb")" -v mn="$(field bytes_per_clock "$bn")" \
        -v thb="$(field theory_bytes_per_clock "$sb")" -v thn="$(field theory_bytes_per_clock "$bn")" 'BEGIN {
      ratio = (tb != "-" && tn != "-" && tb > 0) ? tn / tb : sn / sb
      if (mb == "null") mb = thb; if (mn == "null") mn = thn
      printf "**Verdict: %s wins** by %s: %.2fx faster than %s (the next); it sends %.3gx the bytes per clock of %s (%.4g MB against %.4g MB).\n", b, by, ratio, n, (mn > 0 ? mb / mn : 0), n, mb / 1e6, mn / 1e6
    }'
    # What the repeats can support: one run each cannot tell a small gap from noise.
    local kb kn
    if [ "$(echo "${row_ttt[$best]}" | awk '{ print $1 }')" != "-" ] && [ "$(echo "${row_ttt[$next]}" | awk '{ print $1 }')" != "-" ]; then
      kb=${row_ttt[$best]} kn=${row_ttt[$next]}
    else
      kb=${row_spc[$best]} kn=${row_spc[$next]}
    fi
    awk -v r="$repeats" -v b="$kb" -v n="$kn" 'BEGIN {
      split(b, B, " "); split(n, N, " ")
      if (r == 1) printf "One run of each: a gap of %.0f%% is %s on a shared machine; --repeats 3 gives medians and ranges.\n", 100 * (N[1] / B[1] - 1), (N[1] / B[1] - 1 < 0.1 ? "within run-to-run noise" : "large, but not repeated")
      else if (B[3] < N[2]) printf "Over %d repeats the ranges do not overlap (winner at most %.3g, the next at least %.3g).\n", r, B[3], N[2]
      else printf "Over %d repeats the ranges overlap (winner up to %.3g, the next from %.3g): not a clear win.\n", r, B[3], N[2]
    }'
  else
    echo "**Verdict: $best** (the only run)."
  fi
  awk -v J="$J" -v D="$D" -v K="$K" -v P="$P" 'BEGIN {
    pair = K * (J + D); full = J * D
    pstar = 2 * full / pair
    where = pstar < 2 ? "SFB full sends more than the all-reduce at every P >= 2" : sprintf("it passes 1 at P = %.0f", pstar)
    printf "Break-even for this job (J = %d, D = %d, K = %d, P = %d): per pair of workers SFB sends K (J + D) = %.4g floats against the full matrix J D = %.4g (ratio %.3g: SFB sends fewer when < 1); whole job, SFB full P (P - 1) K (J + D) against the all-reduce 2 (P - 1) J D: ratio P K (J + D) / (2 J D) = %.3g, growing as P (P^2 against the all-reduce'"'"'s 2 (P - 1) / P per worker); %s.\n", J, D, K, P, pair, full, pair / full, P * pair / (2 * full), where
  }'
  awk -v J="$J" -v D="$D" -v K="$K" -v P="$P" 'BEGIN {
    sfb = (P - 1) * K * (J + D); ar = 2 * (P - 1) / P * J * D; fms = J * D; sh = (P - 1) * K * (D + 1 + 5 * P)
    # the largest worker count at which the sharded scheme still sends fewer than the all-reduce
    for (pmax = 1; pmax < 100000 && (pmax + 1) * K * (D + 1 + 5 * (pmax + 1)) < 2 * J * D; pmax++) {}
    printf "All four schemes, floats a worker sends a clock at P = %d (dense rows; a sparse row of z nonzeros is 2 z + 1 in place of D): SFB full (P - 1) K (J + D) = %.4g; the all-reduce 2 (P - 1) / P J D = %.4g; FMS J D = %.4g pushed (as many pulled); sharded (P - 1) K (D + 1 + 5 P) = %.4g (its K rows and labels, and its share of the P K samples'"'"' 5 statistics (MLR), to each other rank). The sharded scheme sends fewer than SFB while J > 1 + 5 P and fewer than the all-reduce while P K (D + 1 + 5 P) < 2 J D: up to P = %d; it holds J D / P floats of W and applies K J D a clock on each rank, where SFB holds J D and applies P K J D.\n", P, sfb, ar, fms, sh, pmax
  }'
  echo "Bytes ratios are from the measured counters, or the theory where MPI's all-reduce moved the bytes; the winner of bytes need not be the winner of time when the link is not the bottleneck."
}

base_ttt=""
{
  echo "# sfb-compare: $(basename "$config"), P = $np workers$([ "$netns" = 1 ] && echo ", netns cluster ($(cat /tmp/${SFB_NETNS_PREFIX:-sfb}-netns-cluster/rate 2>/dev/null || echo '?') links)")$([ "$repeats" -gt 1 ] && echo ", $repeats repeats: medians (min-max)")"
  echo
  skipped=$([ "$predict" = 1 ] && jq -r '(.skipped // []) | join(", ")' "$out/profile.json" 2>/dev/null || true)
  [ -z "$skipped" ] || { echo "**PARTIAL PROFILE: not measured: $skipped** (--partial-profile): the predictions of the schemes they anchor stand on their pieces alone."; echo; }
  echo "Target objective $target (time to target = first evaluation at or below it). Bytes are the whole job's"
  echo "network bytes per clock; theory: SFB full P(P-1)K(J+D), Halton PQK(J+D) plus its reconciliation all-reduce every sfb.reconcile_every clocks and the one the run ends on (the run's count over its clocks), FMS 2PJD, all-reduce 2(P-1)JD floats (a sparse v counted as 8 bytes per nonzero it had)."
  echo "Wall time split (seconds, mean over the workers, of the SF-compute thread): compute (SF computation, or forming the dense update), wait (for the peers' clocks to be applied: network and updates), other (sampling, evaluations, start and stop): compute + wait + other = wall. update: the update thread's seconds applying to W, overlapping the wait."
  echo "s/clock: steady seconds per clock, between the evaluations after clock 0 and before the last (wall / clocks with fewer than two); predicted: sfb-plan from the profile sfbd measured on the same ranks first (BSP; none for static Halton), error = (predicted - measured) / measured."
  echo
  echo "replica drift: the last measured relative distance of the workers' W from their mean (0 under full-broadcast BSP)."
  echo "cpu steal %: of the CPU time the machine wanted while the run trained (its CPUs busy or stolen; idle left out), the share a hypervisor gave to other guests (/proc/stat; - unknown or an earlier build's summary): a run's times are slower by about that much, whatever sfb did."
  echo
  echo "| run | clocks | time to target (s) | vs first | final objective | samples/s | MB/clock measured | MB/clock theory | measured/theory | compute s | wait s | other s | wall s | update s | s/clock | predicted s/clock | error | replica drift | cpu steal % |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for r in "${runs[@]}"; do
    sum="${row_dir[$r]}/summary.json"
    t=$(echo "${row_ttt[$r]}" | awk '{ print $1 }')
    [ -z "$base_ttt" ] && base_ttt=$t
    ratio=$(awk -v a="$t" -v b="$base_ttt" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2fx", a / b }')
    m=$(field bytes_per_clock "$sum"); th=$(field theory_bytes_per_clock "$sum")
    drift=$(tail -1 "${row_dir[$r]}/drift.dat" 2>/dev/null | awk '{ print $2 }')
    # bytes_per_clock is null when Open MPI's all-reduce moved the bytes (comm.collectives = "mpi").
    if [ "$m" = null ]; then mb="not counted (MPI)" mr="-"
    else mb=$(awk -v x="$m" 'BEGIN{ printf "%.3f", x/1e6 }') mr=$(awk -v a="$m" -v b="$th" 'BEGIN{ if (b > 0) printf "%.4f", a/b; else print 0 }'); fi
    wall=$(field seconds "$sum") comp=$(field compute_s_mean "$sum") wait=$(field wait_s_mean "$sum")
    other=$(awk -v w="$wall" -v c="$comp" -v x="$wait" 'BEGIN { printf "%.2f", w - c - x }')
    spc=$(echo "${row_spc[$r]}" | range)
    pred=$(predicted "$r")
    err=$(awk -v p="$pred" -v m="$(echo "${row_spc[$r]}" | awk '{ print $1 }')" \
      'BEGIN { if (p == "-" || m == "-" || m <= 0) print "-"; else printf "%+.1f%%", 100 * (p - m) / m }')
    tshow=$(echo "${row_ttt[$r]}" | range)
    steal=$(echo "${row_steal[$r]}" | range)
    printf '| %s | %s | %s | %s | %s | %.0f | %s | %.3f | %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %s | %s | %s | %s |\n' "$r" \
      "$(field final_clock "$sum")" "$tshow" "$ratio" "$(field final_objective "$sum")" "$(field samples_per_s "$sum")" \
      "$mb" "$(awk -v x="$th" 'BEGIN{print x/1e6}')" "$mr" "$comp" "$wait" "$other" "$wall" \
      "$(field update_s_mean "$sum")" "$spc" "$( [ "$pred" = - ] && echo - || printf '%.3g' "$pred")" "$err" "${drift:--}" "$steal"
  done
  echo
  verdict
} > "$out/table.md"

# Plots, from each run's median repeat. gnuplot runs fixed scripts (plot_*.gp below) and gets every
# name, path, label and number as an argument (ARGV): nothing a user or a file supplies is ever
# spliced into a gnuplot command.
gp_dir=$(mktemp -d)
trap 'rm -rf "$gp_dir"' EXIT
cat > "$gp_dir/lines.gp" <<'GP'
# ARGV: png, data file, series, x column, y column, x label, y label, title, target ("" for none).
# The data file holds one block per series (two blank lines apart), each headed by its title in
# quotes: gnuplot takes at most 9 arguments, so the series travel as data, never as commands.
set terminal pngcairo size 900,560 noenhanced
set output ARGV[1]
set key top right
set grid
set xlabel ARGV[6]
set ylabel ARGV[7]
set title ARGV[8]
if (strlen(ARGV[9]) > 0) { target = real(ARGV[9]); set arrow from graph 0, first target to graph 1, first target nohead dt 2 lc rgb 'gray' }
xcol = int(ARGV[4])
ycol = int(ARGV[5])
n = int(ARGV[3])
plot for [i=0:n-1] ARGV[2] index i using xcol:ycol with linespoints title columnheader(1)
GP
cat > "$gp_dir/bars.gp" <<'GP'
# ARGV: bars.dat, bytes png, time png, "log" (or "linear" when no run sent a byte: one rank)
set terminal pngcairo size 900,560 noenhanced
set output ARGV[2]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8
if (ARGV[4] eq "log") { set logscale y; set ylabel 'MB per clock (log)' } else { set ylabel 'MB per clock (none: one rank)'; set yrange [0:1] }
set grid ytics
set title 'network bytes per clock'
set xtics rotate by -30
plot ARGV[1] using ($2/1e6):xtic(1) title 'measured', '' using ($3/1e6) title 'theory'
unset logscale y
set output ARGV[3]
set style histogram rowstacked
set boxwidth 0.6
set ylabel 'seconds (wall time of the run)'
set title 'where the wall time went: compute, waiting on peers and updates, other'
plot ARGV[1] using 4:xtic(1) title 'compute', '' using 5 title 'wait', '' using 6 title 'other'
GP
name=$(basename "$config")
series() {  # <data file> (<file> <title>)...: the files as one gnuplot data file of titled blocks
  local dat=$1 n=0
  shift
  : > "$dat"
  while [ $# -ge 2 ]; do
    [ "$n" = 0 ] || printf '\n\n' >> "$dat"
    printf '"%s" "%s" "%s"\n' "${2//\"/}" "${2//\"/}" "${2//\"/}" >> "$dat"
    cat "$1" >> "$dat"
    n=$((n + 1))
    shift 2
  done
  echo "$n"
}
plot_lines() {  # <png> <xcol> <xlabel>
  local args=() n
  for r in "${runs[@]}"; do args+=("${row_dir[$r]}/curve.dat" "$r"); done
  n=$(series "$gp_dir/curves.dat" "${args[@]}")
  gnuplot -c "$gp_dir/lines.gp" "$1" "$gp_dir/curves.dat" "$n" "$2" 3 "$3" objective "objective, $name" "$target"
}
plot_lines "$out/objective_vs_time.png" 1 "seconds"
plot_lines "$out/objective_vs_clock.png" 2 "clock"
drift_args=()
for r in "${runs[@]}"; do
  [ -s "${row_dir[$r]}/drift.dat" ] && drift_args+=("${row_dir[$r]}/drift.dat" "$r")
done
if [ ${#drift_args[@]} -gt 0 ]; then
  n=$(series "$gp_dir/drift.dat" "${drift_args[@]}")
  gnuplot -c "$gp_dir/lines.gp" "$out/drift_vs_clock.png" "$gp_dir/drift.dat" "$n" 1 2 clock "replica drift" \
    "replica drift, $name" ""
fi
for r in "${runs[@]}"; do
  sum="${row_dir[$r]}/summary.json"
  m=$(field bytes_per_clock "$sum")
  [ "$m" = null ] && m=NaN  # not counted (MPI's all-reduce): no bar
  wall=$(field seconds "$sum") comp=$(field compute_s_mean "$sum") wait=$(field wait_s_mean "$sum")
  echo "$r $m $(field theory_bytes_per_clock "$sum") $comp $wait $(awk -v w="$wall" -v c="$comp" -v x="$wait" 'BEGIN { print w - c - x }')"
done > "$out/bars.dat"
# A log scale needs a byte: a one-rank comparison sends none.
bytes_scale=$(awk '$2 > 0 || $3 > 0 { found = 1 } END { print found ? "log" : "linear" }' "$out/bars.dat")
gnuplot -c "$gp_dir/bars.gp" "$out/bars.dat" "$out/bytes_per_clock.png" "$out/time_breakdown.png" "$bytes_scale"
cat "$out/table.md"
echo
echo "plots: $out/{objective_vs_time,objective_vs_clock,bytes_per_clock,time_breakdown}.png; raw: $out/<run>/metrics.jsonl"
