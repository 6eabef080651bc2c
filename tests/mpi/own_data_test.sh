#!/usr/bin/env bash
# Your own data, as liblinear reads it (issue 67), on 4 ranks: a libsvm file with labels -1, 3 and
# 10 and nothing set but the paths trains (features and classes from the file); the model file
# keeps the label map (through a checkpoint and --resume too); --predict writes liblinear-predict's
# format in the file's labels, with -b its "labels" header; --evaluate without data.train reports
# the per-class numbers and the confusion matrix; both agree with each other and with a model file
# written byte by byte and worked out by hand; a bad file is one message naming the line.
#   own_data_test.sh <sfbd> <source dir>
set -euo pipefail
SFBD=$1
SRC=$2
source "$SRC/tests/mpi/lib.sh"
sfb_test_scratch

# 3 classes, each with its own block of 4 of features 1..12, and a shared noise feature 13..17.
make_rows() {  # make_rows N OFFSET
  awk -v n="$1" -v off="$2" 'BEGIN { split("-1 3 10", lab, " ");
    for (i = off; i < off + n; i++) { k = i % 3; line = lab[k + 1];
      for (f = 1; f <= 4; f++) line = line " " (k * 4 + f) ":" (1 + (i * 7 % 5) / 10);
      print line " " (13 + i % 5) ":0.5" } }'
}
make_rows 600 0 > "$OUT/train.svm"
make_rows 90 7 > "$OUT/test.svm"
cat > "$OUT/job.toml" <<TOML
[data]
format = "libsvm"
train = "$OUT/train.svm"
test = "$OUT/test.svm"
[optimizer]
lr = 0.5
[eval]
every = 20
[stop]
max_clocks = 60
[checkpoint]
path = "ckpt.bin"
[output]
dir = "$OUT/run"
log_level = "warn"
TOML

echo "== train on 4 ranks with only the paths set, then resume"
sfb_mpirun -np 4 "$SFBD" --config "$OUT/job.toml" > "$OUT/a.log" 2>&1 || { cat "$OUT/a.log"; fail "train"; }
[ "$(jq -r '.J, .D' "$OUT/run/summary.json" | paste -sd' ')" = "3 18" ] || fail "W is not 3 x (17 + the bias): $(jq -c '[.J,.D]' "$OUT/run/summary.json")"
sfb_mpirun -np 3 "$SFBD" --config "$OUT/job.toml" --set stop.max_clocks=100 --resume "$OUT/run/ckpt.bin" \
  > "$OUT/b.log" 2>&1 || { cat "$OUT/b.log"; fail "resume"; }
[ "$(sfb_field final_clock "$OUT/run/summary.json")" = 100 ] || fail "the resumed run ended at $(sfb_field final_clock "$OUT/run/summary.json")"
final=$(sfb_field final_accuracy "$OUT/run/summary.json")

echo "== --predict in the file's labels"
"$SFBD" --predict "$OUT/run/model.bin" --data "$OUT/test.svm" --out "$OUT/pred" > "$OUT/p.log" 2>&1 || { cat "$OUT/p.log"; fail "predict"; }
[ "$(wc -l < "$OUT/pred")" = 90 ] || fail "$(wc -l < "$OUT/pred") prediction lines for 90 rows"
[ -z "$(grep -vxE -- '-1|3|10' "$OUT/pred")" ] || fail "labels outside the file's: $(sort -u "$OUT/pred" | paste -sd' ')"
right=$(paste -d' ' "$OUT/pred" <(cut -d' ' -f1 "$OUT/test.svm") | awk '$1 == $2' | wc -l)
grep -q "^Accuracy = .* ($right/90) (classification)$" "$OUT/p.log" || { cat "$OUT/p.log"; fail "the accuracy line does not count $right right"; }
# The run's final test accuracy is the model file's.
awk -v a="$final" -v r="$right" 'BEGIN { exit !(a == r / 90) }' || fail "the run's final accuracy $final is not $right/90"
"$SFBD" --predict "$OUT/run/model.bin" --data "$OUT/test.svm" --out "$OUT/pb" -b > /dev/null || fail "predict -b"
[ "$(head -1 "$OUT/pb")" = "labels -1 3 10" ] || fail "header: $(head -1 "$OUT/pb")"
[ "$(tail -n +2 "$OUT/pb" | cut -d' ' -f1)" = "$(cat "$OUT/pred")" ] || fail "-b changed the labels"
awk 'NR > 1 { s = $2 + $3 + $4; if (s < 0.999 || s > 1.001) bad = 1 } END { exit bad }' "$OUT/pb" || fail "probabilities do not sum to 1"

echo "== --evaluate without data.train"
"$SFBD" --config "$OUT/job.toml" --set 'data.train=""' --evaluate "$OUT/run/model.bin" > "$OUT/e.json" 2> "$OUT/e.err" || { cat "$OUT/e.err"; fail "evaluate"; }
awk -v a="$(jq -r .test_accuracy "$OUT/e.json")" -v r="$right" 'BEGIN { exit !(a - r / 90 < 1e-7 && r / 90 - a < 1e-7) }' || fail "evaluate's accuracy $(jq -r .test_accuracy "$OUT/e.json")"
[ "$(jq -r '[.classes.per_class[].label] | join(" ")' "$OUT/e.json")" = "-1 3 10" ] || fail "per-class labels"
jq -r .classes.confusion_csv "$OUT/e.json" > "$OUT/confusion.csv"
[ "$(head -1 "$OUT/confusion.csv")" = 'true\predicted,-1,3,10' ] || fail "confusion header $(head -1 "$OUT/confusion.csv")"
diag=$(awk -F, 'NR > 1 { s += $(NR) } END { print s }' "$OUT/confusion.csv")
[ "$diag" = "$right" ] || fail "confusion diagonal $diag, right $right"
"$SFBD" --config "$OUT/job.toml" --evaluate "$OUT/run/model.bin" > "$OUT/e2.json" 2> "$OUT/e2.err" || { cat "$OUT/e2.err"; fail "evaluate with data.train"; }
[ "$(jq -r .classes.macro_f1 "$OUT/e2.json")" = "$(jq -r .classes.macro_f1 "$OUT/e.json")" ] || fail "macro-F1 differs with data.train"

echo "== a model file written byte by byte, worked out by hand"
# W = [[1, 0], [0, 1]] for labels 5 and 7, no bias. Rows: "5 1:2" scores (2, 0): 5 with
# p = (0.880797, 0.119203); "7 2:1": 7, (0.268941, 0.731059); "7 1:1": 5 (wrong), (0.731059, 0.268941).
# Accuracy 2/3; log-loss -(ln .880797 + ln .731059 + ln .268941) / 3 = 0.584484; class 5:
# precision 1/2, recall 1, F1 2/3; class 7: precision 1, recall 1/2, F1 2/3; macro-F1 2/3.
python3 - "$OUT/hand.bin" <<'PY'
import struct, sys, zlib
labels = struct.pack("<2q", 5, 7)
data = struct.pack("<4f", 1, 0, 0, 1)
crc = zlib.crc32(data, zlib.crc32(labels))
open(sys.argv[1], "wb").write(b"SFBMODEL" + struct.pack("<IIqqIIq", 2, 1, 2, 2, crc, 0, 2) + labels + data)
PY
printf '5 1:2\n7 2:1\n7 1:1 9:4\n' > "$OUT/hand.svm"
"$SFBD" --predict "$OUT/hand.bin" --data "$OUT/hand.svm" --out "$OUT/hand.pred" -b > "$OUT/h.log" || fail "predict by hand"
[ "$(cat "$OUT/hand.pred")" = "$(printf 'labels 5 7\n5 0.880797 0.119203\n7 0.268941 0.731059\n5 0.731059 0.268941')" ] ||
  { cat "$OUT/hand.pred"; fail "hand predictions"; }
grep -q "^Accuracy = 66.6667% (2/3) (classification)$" "$OUT/h.log" || { cat "$OUT/h.log"; fail "hand accuracy"; }
grep -q "^Log-loss = 0.584484$" "$OUT/h.log" || { cat "$OUT/h.log"; fail "hand log-loss"; }
printf '[data]\nformat = "libsvm"\ntest = "%s"\n[output]\ndir = "%s/hand"\n' "$OUT/hand.svm" "$OUT" > "$OUT/hand.toml"
"$SFBD" --config "$OUT/hand.toml" --evaluate "$OUT/hand.bin" > "$OUT/h.json" 2> "$OUT/h.err" || { cat "$OUT/h.err"; fail "evaluate by hand"; }
[ "$(jq -c '[.classes.per_class[] | [.label, .precision, .recall, .f1, .support]]' "$OUT/h.json")" = \
  '[[5,0.5,1,0.666667,1],[7,1,0.5,0.666667,2]]' ] || { cat "$OUT/h.json"; fail "hand per-class"; }
[ "$(jq -r .classes.macro_f1 "$OUT/h.json")" = 0.66666667 ] || fail "hand macro-F1 $(jq -r .classes.macro_f1 "$OUT/h.json")"
[ "$(jq -r .classes.confusion_csv "$OUT/h.json")" = "$(printf 'true\\predicted,5,7\n5,1,0\n7,1,1')" ] ||
  { jq -r .classes.confusion_csv "$OUT/h.json"; fail "hand confusion"; }

echo "== a bad file is one message naming the line and what is there"
printf '1 1:1\n2 2:1\n2.5 3:1\n' > "$OUT/bad.svm"
set +e
sfb_mpirun -np 4 "$SFBD" --config "$OUT/job.toml" --set "data.train=\"$OUT/bad.svm\"" --set "output.dir=\"$OUT/bad\"" > "$OUT/bad.log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || { cat "$OUT/bad.log"; fail "bad file: exit $rc"; }
[ "$(grep -c "bad.svm:3: label '2.5' is not an integer" "$OUT/bad.log")" = 1 ] || { cat "$OUT/bad.log"; fail "not one message"; }
echo PASS
