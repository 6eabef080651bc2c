#!/usr/bin/env bash
# scripts/paper_figures.py (the claims table of scripts/paper-figures.sh) on made-up runs whose
# verdicts are worked out by hand: times to target read at the target (the worst final objective),
# "holds" only where every group holds, "partly" where some do, a group that learned nothing never
# counts as SFB winning; and paper-figures.sh refuses bad arguments with exit 2 before any work.
#   paper_figures_test.sh <source dir>
set -euo pipefail
root=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# run <group dir> <name> <seconds a clock> <objective at clock 0> <objective at clock 50> <MB a clock>
# <compute s> <wait s>: 50 clocks, an evaluation every 10, the objective falling linearly.
run() {
  local g=$1 name=$2 spc=$3 o0=$4 o1=$5 mb=$6 comp=$7 wait=$8
  mkdir -p "$g/$name"
  echo "$name $g/$name" >> "$g/median_runs.txt"
  awk -v s="$spc" -v a="$o0" -v b="$o1" 'BEGIN { for (c = 0; c <= 50; c += 10) print s * c, c, a + (b - a) * c / 50 }' \
    > "$g/$name/curve.dat"
  cat > "$g/$name/summary.json" <<EOF
{"final_objective": $o1, "final_clock": 50, "seconds": $(awk -v s="$spc" 'BEGIN { print 50 * s }'),
 "bytes_per_clock": $(awk -v m="$mb" 'BEGIN { print m * 1e6 }'), "theory_bytes_per_clock": $(awk -v m="$mb" 'BEGIN { print m * 1e6 }'),
 "samples_per_s": 1000, "ranks": 4, "minibatch": 10, "J": 256, "D": 256, "compute_s_mean": $comp, "wait_s_mean": $wait, "update_s_mean": 0.1,
 "settings": {"stop.max_seconds": 0}}
EOF
}
group() { mkdir -p "$1"; : > "$1/median_runs.txt"; echo "5 0.4 1gbit" > "$1/cluster.txt"; }

out=$dir/out
# Small W: SFB 0.1 s a clock, FMS 0.15 (1.5x). Large W: SFB 0.2, FMS 0.6 (3x): the lead grows.
group "$out/size/mlr-256x256"
run "$out/size/mlr-256x256" sfb-s0 0.1 2.0 1.0 1 1 1
run "$out/size/mlr-256x256" fms-s0 0.15 2.0 1.0 2 1 2
run "$out/size/mlr-256x256" sfb-s20 0.1 2.0 1.0 1 1 1
run "$out/size/mlr-256x256" fms-s20 0.05 2.0 1.0 2 1 2
group "$out/size/mlr-1024x1024"
run "$out/size/mlr-1024x1024" sfb-s0 0.2 2.0 1.0 1 1 1
run "$out/size/mlr-1024x1024" fms-s0 0.6 2.0 1.0 3 1 2
# SSP 20, large W: FMS reaches the target (its final 1.1, the worst) at clock 50; SFB (final 0.9)
# passes 1.1 at clock 40 (objective 1.12 at 40? no: 2.0 - 1.1 * 40 / 50 = 1.12, so clock 50).
run "$out/size/mlr-1024x1024" sfb-s20 0.1 2.0 0.9 1 1 1
run "$out/size/mlr-1024x1024" fms-s20 0.2 2.0 1.1 3 1 2
# Staleness: SFB waits 1 s, FMS 2 s at s = 0; at s = 20 both wait less; SFB computes more (2 vs 1).
group "$out/staleness/mlr"
run "$out/staleness/mlr" sfb-s0 0.2 2.0 1.0 1 2 1
run "$out/staleness/mlr" fms-s0 0.3 2.0 1.0 3 1 2
run "$out/staleness/mlr" sfb-s20 0.1 2.0 1.0 1 2 0.5
run "$out/staleness/mlr" fms-s20 0.2 2.0 1.0 3 1 0.8
python3 "$root/scripts/paper_figures.py" --out "$out" --mode quick --seconds 1 > "$dir/log" 2>&1 ||
  { cat "$dir/log"; fail "paper_figures.py failed"; }
md=$out/paper.md
cat "$md"
claim() {  # <fig> <claim start> <verdict> [<measurement text>]
  grep -F "| $1 | $2" "$md" | grep -qF "| **$3** |" || fail "fig. $1 '$2': want $3"
  [ -z "${4:-}" ] || grep -F "| $1 | $2" "$md" | grep -qF "$4" || fail "fig. $1 '$2': no '$4'"
}
claim 7 "BSP: SFB converges faster than FMS" holds "mlr-256x256: FMS/SFB 1.50x; mlr-1024x1024: FMS/SFB 3.00x"
claim 7 "BSP: SFB's advantage over FMS grows" holds "for 1 of 1 models"
# SSP 20: small W, FMS twice as fast (0.5x); large W, SFB at clock 50 (5 s) against FMS's 10 s (2x).
claim 8 "SSP 20: SFB converges faster than FMS" partly "mlr-256x256: FMS/SFB 0.50x; mlr-1024x1024: FMS/SFB 2.00x"
claim 8 "SSP 20: SFB's advantage over FMS grows" holds
claim 14 "BSP: SFB's communication volume" holds "FMS/SFB 3x"
# The table beside it: measured, sfb's theory, the paper's formula (FMS 2 P J D floats = 2.097 MB).
grep -qF "| mlr 256x256 | fms | 3 | 3 | 2.097 |" "$md" || fail "fig. 14's table"
claim 10 "MLR, SSP 20: SFB's iteration throughput" holds "10.00 against 5.00 clocks/s (2.00x)"
claim 10 "MLR, SSP 20: SFB's progress per iteration" "does not hold" "SFB 0.9, FMS 1.1 (-18.2%)"
claim 13 "SFB waits far less than FMS" holds "s=0: 1.00 s against 2.00 s, s=20: 0.50 s against 0.80 s"
claim 13 "SFB computes slightly more" holds
claim 13 "higher staleness cuts the waiting" holds "for 2 of 2 schemes"
claim 13 "the best trade-off" partly "fastest s=20"
claim 9 "-" "not run"
# The tables are Markdown tables: a header, its rule, and rows with no blank line between them.
grep -A2 "^| fig. | claim" "$md" | sed -n 2,3p | tr '\n' ' ' | grep -q "^|---|---|---|---| | 7 |" || fail "claims table"
grep -A1 "^| group | sfb" "$md" | tail -1 | grep -qx "|---|---|---|---|---|---|" || fail "fig. 7's table rule"
for f in fig7_size_bsp fig8_size_ssp20 fig13_staleness fig14_bytes fig10_ssp20_objective; do
  [ "$(head -c 4 "$out/$f.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "$f.png is not a PNG"
done

# A group that learned nothing (its worst final objective is its start) is never SFB winning.
out2=$dir/out2
group "$out2/size/mlr-256x256"
run "$out2/size/mlr-256x256" sfb-s0 0.1 2.0 2.0 1 1 1
run "$out2/size/mlr-256x256" fms-s0 0.15 2.0 2.0 2 1 2
python3 "$root/scripts/paper_figures.py" --out "$out2" --mode quick > "$dir/log2" 2>&1 || { cat "$dir/log2"; fail "out2"; }
md=$out2/paper.md
claim 7 "BSP: SFB converges faster than FMS" inconclusive "learned nothing (target 2 vs start 2)"

# paper-figures.sh: bad arguments exit 2 naming them, before any build or run.
expect2() {  # <message> args...
  local msg=$1 rc=0 err
  shift
  err=$("$root/scripts/paper-figures.sh" "$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] && grep -qF -- "$msg" <<< "$err" || fail "paper-figures.sh $*: exit $rc, '$err' (want 2, '$msg')"
}
expect2 "unknown option '--fast'" --fast
expect2 "--only: unknown experiment 'fig7'" --only size,fig7
expect2 "--rate must be like 100mbit or 1gbit, got '1gb; true'" --rate "1gb; true"
expect2 "--out needs a value" --out
expect2 "--out: cannot create /proc/x" --out /proc/x
# sfb-compare's --q is a comma list (the Halton figures pass one): each element checked.
q_rc() { local rc=0; SFBD=/bin/false "$root/scripts/sfb-compare.sh" --config "$root/configs/paper_mlr.toml" --q "$1" \
  > "$dir/q.log" 2>&1 || rc=$?; echo "$rc"; }
[ "$(q_rc 1,x)" = 2 ] && grep -qF -- "--q must be an integer >= 1, got 'x'" "$dir/q.log" || fail "--q 1,x: $(cat "$dir/q.log")"
[ "$(q_rc 1,)" = 2 ] && grep -qF -- "--q must be a comma list of integers >= 1, got '1,'" "$dir/q.log" || fail "--q 1,"
[ "$(q_rc 0)" = 2 ] || fail "--q 0 accepted"
echo "paper_figures: all checks passed"
