#!/usr/bin/env bash
# W's layout end to end (issue 26): the sparse configs on 4 ranks (in-process MPI on this machine,
# ranks sharing its cores), each run with model.layout = "row-major" and "feature-major", REPS
# times (default 3) alternating, for CLOCKS clocks (default 200). Prints per run the seconds per
# clock (wall time of the training over clocks), the mean update and SF-compute seconds per clock
# of a rank, and the final objective (equal between layouts: they compute the same floats under
# BSP, and within SSP's arrival-order noise otherwise); medians at the end.
#   scripts/layout-bench.sh [config ...]     (default: synthetic_l2mlr_large, synthetic_sparse)
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build sfbd
export OMP_NUM_THREADS=1
REPS=${REPS:-3}
CLOCKS=${CLOCKS:-200}
OUT="$SFB_ROOT/runs/layout-bench"
mkdir -p "$OUT"
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=("$SFB_ROOT/configs/synthetic_l2mlr_large.toml" "$SFB_ROOT/configs/synthetic_sparse.toml")
printf '%-28s %-14s %4s %12s %12s %12s %14s\n' config layout rep s_per_clock update_s/clk compute_s/clk final_objective
for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .toml)
  for rep in $(seq 1 "$REPS"); do
    for layout in row-major feature-major; do
      dir="$OUT/$name-$layout-$rep"
      sfb_mpirun -np 4 "$SFB_BUILD/apps/sfbd" --config "$cfg" --set "model.layout=\"$layout\"" \
        --set stop.max_clocks="$CLOCKS" --set eval.every="$CLOCKS" --set "output.dir=\"$dir\"" > "$dir.log" 2>&1 ||
        { cat "$dir.log"; exit 1; }
      s=$dir/summary.json
      [ "$(jq -r .w_layout "$s")" = "$layout" ] || { echo "run $dir kept W $(jq -r .w_layout "$s")"; exit 1; }
      jq -r --arg c "$name" --arg l "$layout" --arg r "$rep" \
        '[$c, $l, $r, (.seconds / .final_clock), (.update_s_mean / .final_clock), (.compute_s_mean / .final_clock), .final_objective] | @tsv' "$s" |
        awk -F'\t' '{printf "%-28s %-14s %4s %12.5f %12.5f %12.5f %14s\n", $1, $2, $3, $4, $5, $6, $7}'
    done
  done
done | tee "$OUT/runs.txt"
echo "== medians"
median() {  # column $1 of the rows of key $2 $3
  awk -v c="$1" -v a="$2" -v b="$3" '$1 == a && $2 == b {print $c}' "$OUT/runs.txt" | sort -g |
    awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}
awk '{print $1, $2}' "$OUT/runs.txt" | sort -u | while read -r c l; do
  printf '%-28s %-14s s/clock %s  update %s  compute %s\n' "$c" "$l" "$(median 4 "$c" "$l")" "$(median 5 "$c" "$l")" \
    "$(median 6 "$c" "$l")"
done
