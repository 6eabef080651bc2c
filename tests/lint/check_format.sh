#!/usr/bin/env bash
# Every C++ file of the repository is formatted as .clang-format says (clang-format from Debian's
# clang-format package, installed by scripts/install-deps.sh). Prints the files that are not.
#   check_format.sh [SOURCE_ROOT]       fix with: git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format -i
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT"
CF=$(command -v clang-format-14 || command -v clang-format) || { echo "clang-format is not installed (scripts/install-deps.sh)"; exit 1; }
bad=0
while IFS= read -r f; do
  "$CF" --style=file --dry-run --Werror "$f" > /dev/null 2>&1 || { echo "not formatted: $f"; bad=1; }
done < <(git ls-files '*.cc' '*.h' '*.cu' 2>/dev/null || find src apps tests bench fuzz examples -name '*.cc' -o -name '*.h' -o -name '*.cu')
[ $bad = 0 ] && echo "formatted: every C++ file"
exit $bad
