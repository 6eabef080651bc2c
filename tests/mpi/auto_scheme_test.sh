#!/usr/bin/env bash
# comm.scheme = "auto" and the predictor's tools end to end on one host:
#  * with a recorded netns profile of the job where the all-reduce won (comm.auto_profile), sfbd
#    trains with the all-reduce and says so in summary.json ("auto": chosen, every prediction, the
#    profile) and in the resolved config;
#  * measuring its own profile on a job whose factors are tiny against W (K = 4, J = D = 1024, 1% of
#    the features non-zero, so each v is sparse and SFB's update is K J nnz), it trains with SFB;
#    with dense v on a loaded 2-core host the two measured clocks came within 3% (CI, stop 71);
#  * a recorded profile of another shape, or a missing one, is refused (exit 2) naming the file;
#  * sfbd --profile writes a profile that sfb-plan reads, as it reads an auto run's summary.json;
#    with FMS's server and a peer timeout shorter than the profile takes (2 s), it completes;
#    one measured at a K cut from the job's (job_K) is that job's: sfb-plan says so, auto takes it;
#  * the installed sfb-compare (cmake --install) runs from outside the source tree on the installed
#    sfbd and prints its verdict.
#   auto_scheme_test.sh <sfbd> <sfb-plan> <source dir> <build dir>
set -euo pipefail
SFBD=$1
PLAN=$2
SRC=$3
BUILD=$4
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch
BIG="$SRC/configs/compare_mlr_512_k1024.toml"
SMALL=(--config "$SRC/configs/compare_mlr_512_k1024.toml" --set data.features=1023 --set data.classes=1024
  --set optimizer.minibatch=4 --set data.synthetic_samples=2000 --set data.synthetic_density=0.01
  --set stop.max_clocks=20 --set eval.every=10)

echo "== recorded profile: the all-reduce won on the netns cluster"
sfb_mpirun -np 4 "$SFBD" --config "$BIG" --set data.synthetic_samples=8192 --set stop.max_clocks=3 \
  --set eval.every=3 --set runtime.threads=1 --set comm.scheme=auto --set output.log_level=info \
  --set "comm.auto_profile=\"$SRC/tests/data/scheme_profile_mlr512_k1024_4h.json\"" --set "output.dir=\"$OUT/rec\"" \
  > "$OUT/rec.log" 2>&1 || { cat "$OUT/rec.log"; fail "auto with a recorded profile"; }
S="$OUT/rec/summary.json"
[ "$(jq -r .auto.chosen "$S")" = allreduce ] || fail "recorded profile: chose $(jq -r .auto.chosen "$S")"
[ "$(jq -r .scheme "$S")" = allreduce ] || fail "recorded profile: trained with $(jq -r .scheme "$S")"
[ "$(jq '.auto.predictions | length' "$S")" = 4 ] || fail "not 4 predictions: $(jq -c .auto.predictions "$S")"
[ "$(jq -r .final_clock "$S")" = 3 ] || fail "did not train 3 clocks"
grep -q 'scheme = "allreduce"' "$OUT/rec/config.resolved.toml" || fail "resolved config does not name the choice"
# plan.json records the decision: what the config said, what the job ran with, and why.
jq -e '[.decisions[] | select(.key == "comm.scheme")] | length == 1 and .[0].given == "\"auto\""
       and .[0].resolved == "\"allreduce\"" and (.[0].why | startswith("comm.scheme = \"auto\": allreduce"))' \
  "$OUT/rec/plan.json" > /dev/null || fail "plan.json: $(cat "$OUT/rec/plan.json")"
grep -q 'comm.scheme = "auto": allreduce' "$OUT/rec.log" || fail "the log does not give the choice"
grep -q "predicted  allreduce" "$OUT/rec.log" || fail "the log does not give the predictions"
# The recorded profile is of an earlier build, which did not say how W was stored: it takes the
# job's (here told to keep W feature-major).
sfb_mpirun -np 4 "$SFBD" --config "$BIG" --set data.synthetic_samples=8192 --set stop.max_clocks=3 \
  --set runtime.threads=1 --set comm.scheme=auto --set 'model.layout="feature-major"' \
  --set "comm.auto_profile=\"$SRC/tests/data/scheme_profile_mlr512_k1024_4h.json\"" --set "output.dir=\"$OUT/recfm\"" \
  > "$OUT/recfm.log" 2>&1 || { cat "$OUT/recfm.log"; fail "auto with a recorded profile, feature-major"; }
[ "$(jq -r .auto.profile.layout "$OUT/recfm/summary.json")" = feature-major ] ||
  fail "recorded profile of an earlier build: layout $(jq -r .auto.profile.layout "$OUT/recfm/summary.json")"

echo "== measured profile: tiny factors, SFB"
sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set runtime.threads=1 --set comm.scheme=auto \
  --set "output.dir=\"$OUT/meas\"" > "$OUT/meas.log" 2>&1 || { cat "$OUT/meas.log"; fail "auto, measured"; }
S="$OUT/meas/summary.json"
chosen=$(jq -r .auto.chosen "$S")
case "$chosen" in sfb|halton) ;; *) jq .auto.predictions "$S"; fail "tiny factors: chose $chosen" ;; esac
[ "$(jq -r .auto.profile_source "$S")" = measured ] || fail "profile_source $(jq -r .auto.profile_source "$S")"
[ "$(jq -r .auto.profile.workers "$S")" = 2 ] || fail "profile workers"
[ "$(jq -r .final_clock "$S")" = 20 ] || fail "measured auto did not train"

echo "== bad profiles are refused, naming the file"
set +e
sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set comm.scheme=auto --set "output.dir=\"$OUT/bad\"" \
  --set "comm.auto_profile=\"$SRC/tests/data/scheme_profile_mlr512_k1024_4h.json\"" > "$OUT/bad.log" 2>&1
rc=$?
sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set comm.scheme=auto --set "output.dir=\"$OUT/bad2\"" \
  --set "comm.auto_profile=\"$OUT/none.json\"" > "$OUT/bad2.log" 2>&1
rc2=$?
jq '.layout = "feature-major"' "$SRC/tests/data/scheme_profile_mlr512_k1024_4h.json" > "$OUT/fm.json"
sfb_mpirun -np 4 "$SFBD" --config "$BIG" --set data.synthetic_samples=8192 --set stop.max_clocks=3 \
  --set comm.scheme=auto --set "comm.auto_profile=\"$OUT/fm.json\"" --set "output.dir=\"$OUT/bad3\"" \
  > "$OUT/bad3.log" 2>&1
rc3=$?
set -e
[ "$rc" = 2 ] || { cat "$OUT/bad.log"; fail "another shape's profile: exit $rc"; }
grep -q "scheme_profile_mlr512_k1024_4h.json: the profile is of W 512 x 512 at K = 1024" "$OUT/bad.log" \
  || { cat "$OUT/bad.log"; fail "message"; }
[ "$rc2" = 2 ] || { cat "$OUT/bad2.log"; fail "a missing profile: exit $rc2"; }
grep -q "none.json" "$OUT/bad2.log" || { cat "$OUT/bad2.log"; fail "missing profile message"; }
[ "$rc3" = 2 ] || { cat "$OUT/bad3.log"; fail "a profile of another layout: exit $rc3"; }
grep -q "fm.json: the profile's W was stored feature-major, this job's is row-major" "$OUT/bad3.log" \
  || { cat "$OUT/bad3.log"; fail "layout message"; }

echo "== sfbd --profile claims its file before any work: exit 2 within seconds, nothing replaced"
mkdir -p "$OUT/prof"
echo keep > "$OUT/prof/metrics.jsonl"
for target in "$OUT" "/proc/no/such/p.json" "$OUT/prof/metrics.jsonl"; do
  start=$(date +%s)
  set +e
  sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set "output.dir=\"$OUT/prof\"" --profile "$target" > "$OUT/claim.log" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] && grep -q -- "--profile" "$OUT/claim.log" && [ $(($(date +%s) - start)) -lt 30 ] ||
    { cat "$OUT/claim.log"; fail "--profile $target: exit $rc, want 2 naming --profile before profiling"; }
done
[ "$(cat "$OUT/prof/metrics.jsonl")" = keep ] || fail "--profile replaced the run's metrics"

echo "== sfbd --profile and sfb-plan"
sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set runtime.threads=1 --set "output.dir=\"$OUT/prof\"" \
  --set checkpoint.path=ck.bin --profile "$OUT/p.json" --partial-profile > "$OUT/prof.log" 2>&1 || { cat "$OUT/prof.log"; fail "sfbd --profile"; }
[ "$(jq -r .format "$OUT/p.json")" = sfb-scheme-profile/1 ] || fail "profile format"
[ ! -e "$OUT/prof/summary.json" ] || fail "--profile trained"
[ ! -e "$OUT/prof/ck.bin" ] || fail "--profile's engine runs wrote the job's checkpoint"
"$PLAN" --profile "$OUT/p.json" --nodes 4,64,1024 --links 1gbe,100gbe --csv "$OUT/p.csv" > "$OUT/plan.md" \
  || fail "sfb-plan"
grep -q "^winner by N" "$OUT/plan.md" || fail "no winners"
grep -q "^# the engines at the profiled 2 workers.*: SFB [0-9.e+-]* +- [0-9.e+-]* / " "$OUT/plan.md" ||
  { head -5 "$OUT/plan.md"; fail "sfb-plan: no SFB engine runs with their standard errors"; }
# The all-reduce's evaluations at most their pieces, its clock the faster run's: said where both ran.
capped="the all-reduce .* / .*: at most their pieces, its clock the faster run's"
if [ "$(jq '.engine_allreduce_eval_clock_s > 0 and .eval_every > 0 and .eval_s > 0' "$OUT/p.json")" = true ]; then
  grep -q "$capped" "$OUT/plan.md" || { head -5 "$OUT/plan.md"; fail "sfb-plan: the all-reduce's two runs unsaid"; }
elif grep -q "$capped" "$OUT/plan.md"; then
  head -5 "$OUT/plan.md"; fail "sfb-plan: the all-reduce's rule said without its run with evaluations"
fi
grep -q "crossover in link rate" "$OUT/plan.md" || fail "no link-rate crossover"
[ "$(wc -l < "$OUT/p.csv")" = $((1 + 2 * 3 * 4)) ] || fail "csv rows: $(wc -l < "$OUT/p.csv")"
"$PLAN" --profile "$OUT/meas/summary.json" --nodes 8 > /dev/null || fail "sfb-plan on an auto summary"

echo "== a peer timeout shorter than the profile: its waits are bounded, not its work (FMS, 1 server)"
# (--partial-profile here and above: an engine run a loaded machine leaves out is not what is tested)
# (the 512 x 512, K = 1024 job: its profile takes 6-7 s on an idle 2-core machine, SMALL's 2-3 s)
sfb_mpirun -np 3 "$SFBD" --config "$BIG" --set runtime.threads=1 --set "output.dir=\"$OUT/short\"" \
  --set comm.scheme=fms --set fms.servers=1 --set runtime.peer_timeout_s=2 --profile "$OUT/short.json" --partial-profile \
  > "$OUT/short.log" 2>&1 || { cat "$OUT/short.log"; fail "sfbd --profile with a 2 s peer timeout"; }
jq -e '.profile_s > 2 and .engine_fms_clock_s > 0 and .workers == 2' "$OUT/short.json" > /dev/null ||
  fail "short peer timeout: $(jq -c '{profile_s, engine_fms_clock_s, workers}' "$OUT/short.json")"
set +e
"$PLAN" --profile "$OUT/meas/metrics.jsonl" > "$OUT/plan_bad.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "sfb-plan on a non-profile: exit $rc"
# Arguments that are not numbers or name nothing: exit 2 naming the option, no table.
for bad in "--clocks inf" "--clocks nan" "--clocks 0" "--links ,"; do
  read -r opt val <<< "$bad"
  set +e
  "$PLAN" --profile "$OUT/p.json" "$opt" "$val" > "$OUT/plan_bad.log" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] && grep -q -- "$opt" "$OUT/plan_bad.log" && ! grep -q '^| N |' "$OUT/plan_bad.log" ||
    { cat "$OUT/plan_bad.log"; fail "sfb-plan $opt '$val': exit $rc, want 2 naming it"; }
done

echo "== a profile measured at a K cut from the job's is that job's profile"
jq '.job_K = .K | .K = 2' "$OUT/p.json" > "$OUT/cut.json"
"$PLAN" --profile "$OUT/cut.json" --nodes 4 > "$OUT/plan_cut.md" || fail "sfb-plan on a cut profile"
grep -q "the job's K = 4 was cut to 2" "$OUT/plan_cut.md" || { cat "$OUT/plan_cut.md"; fail "sfb-plan: no cut K"; }
sfb_mpirun -np 2 "$SFBD" "${SMALL[@]}" --set runtime.threads=1 --set comm.scheme=auto --set stop.max_clocks=2 \
  --set "comm.auto_profile=\"$OUT/cut.json\"" --set "output.dir=\"$OUT/cut\"" > "$OUT/cut.log" 2>&1 ||
  { cat "$OUT/cut.log"; fail "auto refused a profile of its own job measured at a smaller K"; }
[ "$(jq -r .auto.profile.job_K "$OUT/cut/summary.json")" = 4 ] || fail "the cut profile's job_K"

echo "== the installed sfb-compare, outside the source tree"
cmake --install "$BUILD" --prefix "$OUT/prefix" > "$OUT/install.log"
for tool in sfb-compare sfb-plan sfb-netns-cluster sfbd; do [ -x "$OUT/prefix/bin/$tool" ] || fail "$tool not installed"; done
"$OUT/prefix/bin/sfb-compare" --help | grep -q -- "--repeats" || fail "sfb-compare --help"
cp "$SRC/configs/compare_mlr_512_k1024.toml" "$OUT/job.toml"
(cd "$OUT" && env -u SFB_BUILD -u SFB_NO_BUILD PATH="/usr/bin:/bin" "$OUT/prefix/bin/sfb-compare" --config job.toml \
  --np 2 --schemes sfb,allreduce --repeats 2 --set data.features=255 --set data.classes=256 \
  --set data.synthetic_samples=2000 --set stop.max_clocks=10 --set eval.every=5 > "$OUT/cmp.log" 2>&1) \
  || { cat "$OUT/cmp.log"; fail "installed sfb-compare"; }
T="$OUT/runs/compare/table.md"
grep -q '^\*\*Verdict: ' "$T" || { cat "$T"; fail "no verdict"; }
grep -q '^Break-even for this job (J = 256, D = 256, K = 1024, P = 2)' "$T" || { cat "$T"; fail "no break-even"; }
grep -q "2 repeats: medians" "$T" || fail "repeats not in the title"
[ -d "$OUT/runs/compare/sfb-s0-r2" ] || fail "second repeat missing"
# Every row's wall split adds up: compute + wait + other = wall.
awk -F'|' '/^\| (sfb|allreduce)-s0 /{ d = $11 + $12 + $13 - $14; if (d < -0.02 || d > 0.02) bad = 1; n++ }
  END { exit !(n == 2 && !bad) }' "$T" || { cat "$T"; fail "split does not add up"; }
echo "auto scheme test passed"
