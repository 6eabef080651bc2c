#!/usr/bin/env bash
# mgwfbp-plan end to end: a CSV profile, the B-Caffe GoogLeNet log with the authors' OSU fit, the
# plots, and clear errors for bad input.
set -euo pipefail
PLAN=$1
SRC=$2
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf 'name,params,t_b\n# comment\nconv1,1000,500\nconv2,20000,400\nfc,400000,100\n' > "$OUT/p.csv"
"$PLAN" --profile "$OUT/p.csv" --network ab:100,0.001 --nodes 2,8 --out "$OUT/plots" > "$OUT/log"
cat "$OUT/log"
grep -qE '^ +8 optimal ' "$OUT/log" || fail "no optimal row"
[ "$(grep -c '^optimal,' "$OUT/plots/predictions.csv")" = 2 ] || fail "predictions.csv"
if command -v gnuplot > /dev/null; then
  for f in speedup.png timeline.png; do
    [ "$(head -c 4 "$OUT/plots/$f" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$f is not a PNG"
  done
fi

# The MG-WFBP authors' logs, vendored in data/mgwfbp_profiles (data/mgwfbp_profiles/README.md).
D="$SRC/data/mgwfbp_profiles/shyhuai_B-Caffe/logdata"
"$PLAN" --bcaffe-log "$D/tmp8comm.log" --network "fit:$D/allreduce8.log" --nodes 8 --forward-ms 186.44 > "$OUT/g"
cat "$OUT/g"
grep -q "64 layers, 13.38 M params" "$OUT/g" || fail "GoogLeNet profile"
mg=$(awk '$2 == "mgwfbp" {print $4}' "$OUT/g")
wf=$(awk '$2 == "wfbp" {print $4}' "$OUT/g")
awk -v m="$mg" -v w="$wf" 'BEGIN { exit !(m < w) }' || fail "mgwfbp ($mg ms) not faster than wfbp ($wf ms)"

# A reference network with fully-connected layers: the hybrid planners send the FC head as
# sufficient factors at 4 nodes on 10GbE and are predicted faster than the dense optimum.
"$PLAN" --model vgg16 --batch 32 --gflops 10000 --network 10gbe --nodes 4 --timeline-nodes 4 > "$OUT/v"
cat "$OUT/v"
grep -q "16 layers, 138.36 M params" "$OUT/v" || fail "VGG-16 profile"
grep -Eq '^  hybrid-optimal .*\[sf:fc8 ' "$OUT/v" || fail "hybrid-optimal does not send fc8 as factors"
ho=$(awk '$2 == "hybrid-optimal" {print $4}' "$OUT/v")
op=$(awk '$2 == "optimal" {print $4}' "$OUT/v")
awk -v h="$ho" -v o="$op" 'BEGIN { exit !(h < o) }' || fail "hybrid-optimal ($ho ms) not faster than optimal ($op ms)"

# A profile with factor columns (as sfbd's profile.csv) and a measured all-gather cost (ab: with
# four numbers): a cheap all-gather sends the fc layer as factors, a costly one keeps it dense.
printf '# a comment\nname,params,t_b,t_f,sf,t_sf\nconv,1000,500,0,0,0\nfc,4000000,100,0,1000,10\n' > "$OUT/sf.csv"
"$PLAN" --profile "$OUT/sf.csv" --forward-ms 1 --network ab:100,0.001,50,0.001 --nodes 4 \
  --planners optimal,hybrid-optimal > "$OUT/s1"
grep -Eq '^  hybrid-optimal .*\[sf:fc ' "$OUT/s1" || { cat "$OUT/s1"; fail "a cheap all-gather: fc not sent as factors"; }
"$PLAN" --profile "$OUT/sf.csv" --forward-ms 1 --network ab:100,0.001,50,100 --nodes 4 \
  --planners optimal,hybrid-optimal > "$OUT/s2"
if grep -q '\[sf:' "$OUT/s2"; then cat "$OUT/s2"; fail "a costly measured all-gather was not used"; fi

if "$PLAN" --profile "$OUT/missing.csv" --nodes 2 2> "$OUT/err"; then fail "missing profile accepted"; fi
grep -q "missing.csv: cannot open profile" "$OUT/err" || fail "message: $(cat "$OUT/err")"
if "$PLAN" --profile "$OUT/p.csv" --planners wfbp,greedy --nodes 2 2> "$OUT/err"; then fail "unknown planner accepted"; fi
grep -q 'unknown planner "greedy"' "$OUT/err" || fail "message: $(cat "$OUT/err")"
echo PASS
