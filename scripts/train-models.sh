#!/usr/bin/env bash
# Trains every built-in model under mpirun -np 4 with BSP, SSP(s=3) and ASP and prints one table
# row per run (final objective, accuracy or the model's own metrics, wall time, throughput) from
# the runs' summary.json. Outputs go to runs/models/<config>-<consistency>/.
#   scripts/train-models.sh [config ...]    default: the four Fashion-MNIST model configs
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_build sfbd
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
  configs=(fashion_mlr fashion_l2mlr_sgd fashion_l2mlr_sdca fashion_dml fashion_sparse_coding)
fi
NP=${NP:-4}
mkdir -p "$SFB_ROOT/runs/models"
rows=()
for c in "${configs[@]}"; do
  for s in 0 3 inf; do
    out="$SFB_ROOT/runs/models/$c-s$s"
    echo "== mpirun -np $NP sfbd --config configs/$c.toml --set sfb.staleness=$s"
    sfb_mpirun -np "$NP" "$SFB_BUILD/apps/sfbd" --config "$SFB_ROOT/configs/$c.toml" --set sfb.staleness=$s \
      --set output.dir="$out" --set output.log_level=warn > "$out.log" 2>&1 || { cat "$out.log"; exit 1; }
    sum="$out/summary.json"
    rows+=("$(printf '| %s | %s | %s | %s | %s | %s | %s |' "$c" "$(sfb_field consistency "$sum")" "$(sfb_field final_clock "$sum")" \
      "$(sfb_field final_objective "$sum")" "$(sfb_field final_accuracy "$sum")" "$(sfb_field final_metrics "$sum" | tr -d '{}')" \
      "$(printf '%.1f s, %.0f samples/s' "$(sfb_field seconds "$sum")" "$(sfb_field samples_per_s "$sum")")")")
  done
done
echo
echo "| config | consistency | clocks | objective | accuracy | model metrics | time, throughput |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
