#!/usr/bin/env bash
# Regenerates the key table at the end of configs/README.md from the schema (sfbd --keys).
# A test (Config.ReadmeDocumentsEveryKeyWithItsDefault) fails while the table is stale.
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_build sfbd
readme="$SFB_ROOT/configs/README.md"
head=$(sed '/^## Every key$/q' "$readme")
{ printf '%s\n\n' "$head"; "$SFB_BUILD/apps/sfbd" --keys; } > "$readme.tmp"
mv "$readme.tmp" "$readme"
