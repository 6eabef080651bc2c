#!/usr/bin/env bash
# The layer rule of src/sfb, checked: every `#include "sfb/<layer>/..."` in a file of layer X must
# name X itself or a layer that src/sfb/layers.txt allows for X, and every allowed arrow must be
# used by some file of X (so CMake, which links exactly the arrows, links only what X includes).
#   check_layers.sh [SOURCE_ROOT]     (default: the repository this script is in)
# Prints each violation as file:line and exits 1 when there is one.
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
TABLE="$ROOT/src/sfb/layers.txt"
[ -f "$TABLE" ] || { echo "check_layers: no $TABLE"; exit 2; }
declare -A allowed
layers=()
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  name=${line%%:*}
  layers+=("$name")
  allowed[$name]=" ${line#*:} "
done < "$TABLE"

bad=0
for layer in "${layers[@]}"; do
  dir="$ROOT/src/sfb/$layer"
  [ -d "$dir" ] || { echo "layers.txt names layer '$layer' but $dir does not exist"; bad=1; continue; }
  used=" "
  while IFS=: read -r file lineno target; do
    [ "$target" = "$layer" ] && continue
    if [[ "${allowed[$layer]}" != *" $target "* ]]; then
      if [ -z "${allowed[$target]+x}" ]; then
        echo "${file#$ROOT/}:$lineno: includes sfb/$target/, which is not a layer of src/sfb/layers.txt"
      else
        echo "${file#$ROOT/}:$lineno: layer '$layer' includes layer '$target'; layers.txt allows '$layer' only:${allowed[$layer]}"
      fi
      bad=1
    fi
    used+="$target "
  done < <(grep -rnoE '^\s*#\s*include\s*"sfb/[a-z_]+/' "$dir" --include='*.h' --include='*.cc' --include='*.cu' \
             | sed -E 's|^([^:]+):([0-9]+):.*"sfb/([a-z_]+)/$|\1:\2:\3|')
  for a in ${allowed[$layer]}; do
    if [[ "$used" != *" $a "* ]]; then
      echo "src/sfb/layers.txt: layer '$layer' may include '$a' but no file of it does: remove the arrow (CMake links it)"
      bad=1
    fi
  done
done
# Every folder of src/sfb is a layer of the table.
for d in "$ROOT"/src/sfb/*/; do
  name=$(basename "$d")
  [ -n "${allowed[$name]+x}" ] || { echo "src/sfb/$name/ is not a layer of src/sfb/layers.txt"; bad=1; }
done
[ $bad = 0 ] && echo "layers ok: ${layers[*]}"
exit $bad
