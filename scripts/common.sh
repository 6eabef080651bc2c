# Shared by demo.sh and test.sh: dependencies, configure and build.
SFB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SFB_BUILD=${SFB_BUILD:-$SFB_ROOT/build}

sfb_deps() {
  "$SFB_ROOT/scripts/install-deps.sh"
}

# sfb_build [targets...]: configure (once) and build with ninja -j2. SFB_CMAKE_FLAGS (environment,
# space-separated) adds cmake arguments to the first configure, e.g. -DSFB_LINE_TABLES_ONLY=ON.
sfb_build() {
  if [ ! -f "$SFB_BUILD/build.ninja" ]; then
    local extra=()
    read -r -a extra <<< "${SFB_CMAKE_FLAGS:-}"
    cmake -S "$SFB_ROOT" -B "$SFB_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]}"
  fi
  cmake --build "$SFB_BUILD" -j "${SFB_JOBS:-2}" ${1:+--target "$@"}
}

# mpirun with the flags this project always needs on one host: root is allowed, more ranks than
# cores are allowed, no core binding, one OpenMP thread per rank unless the caller says otherwise.
# SFB_MPIRUN is the same as a command array, for what cannot call a shell function (timeout, env).
SFB_MPIRUN=(env "OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}" mpirun --allow-run-as-root --oversubscribe --bind-to none)
sfb_mpirun() {
  "${SFB_MPIRUN[@]}" "$@"
}

# An awk function for the median of sorted values, one a line (v[1..NR] filled by the caller's
# rule): awk "$SFB_MEDIAN_AWK"' { v[NR] = $1 } END { print median() }' on `sort -g` output.
SFB_MEDIAN_AWK='function median() { return NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'

# sfb_field KEY FILE: the value of top-level key KEY of a summary.json (strings unquoted; objects
# and arrays as JSON).
sfb_field() {
  jq -r --arg k "$1" '.[$k] | if type == "string" then . else tojson end' "$2"
}
