#!/usr/bin/env bash
# No function in src/ or apps/ longer than MAX lines (default 80), except declarative tables marked with a
# `// declarative table` comment on the line before them. Functions are found by this project's
# layout (.clang-format): a definition starts at indent 0 (free functions, out-of-class members) or
# 2 (members defined in a class body) with a line that has a `(` and is not a statement, its body
# opens with `{` at the end of that or a following header line, and closes with `}` at the same
# indent. Prints each long function as file:line: header (N lines).
#   check_function_length.sh [SOURCE_ROOT] [MAX]
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
MAX=${2:-80}
bad=0
while IFS= read -r -d '' f; do
  out=$(awk -v max="$MAX" -v file="${f#$ROOT/}" '
    function indent_of(s) { match(s, /^ */); return RLENGTH }
    # Inside a function: wait for its closing brace at the indent it started at.
    start > 0 {
      if ($0 ~ ("^" sp "}")) {
        n = NR - start + 1
        if (n > max && !table) printf "%s:%d: %s (%d lines)\n", file, start, name, n
        start = 0
      }
      prev = $0; next
    }
    # A header in progress: its body opens with a { at the end of a line; a ; ends a declaration.
    pending > 0 {
      if (($0 ~ /;\s*$/ && $0 !~ /[{]/) || $0 ~ /[}]\s*$/) { pending = 0 }
      else if ($0 ~ /[{]\s*$/) { start = pending; sp = psp; name = pname; table = ptable; pending = 0 }
      prev = $0; next
    }
    {
      ind = indent_of($0)
      if ((ind == 0 || ind == 2) && $0 ~ /^ *[A-Za-z_~][A-Za-z0-9_:<>,&*~ \[\]]*\(/ &&
          $0 !~ /^ *(if|for|while|switch|return|case|else|do|namespace|using|typedef|static_assert|template)[ (]/ &&
          $0 !~ /;\s*$/ && $0 !~ /[}]\s*$/) {
        psp = sprintf("%" ind "s", ""); pname = $0; sub(/^ */, "", pname); sub(/\s*[{]\s*$/, "", pname)
        ptable = (prev ~ /declarative table/)
        if ($0 ~ /[{]\s*$/) { start = NR; sp = psp; name = pname; table = ptable }
        else { pending = NR }
      }
      prev = $0
    }
  ' "$f")
  if [ -n "$out" ]; then echo "$out"; bad=1; fi
done < <(find "$ROOT/src" "$ROOT/apps" \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -print0 | sort -z)
[ $bad = 0 ] && echo "no function in src/ or apps/ over $MAX lines"
exit $bad
