#!/usr/bin/env bash
# Installs the dependencies, builds everything and runs every test: the GoogleTest suite (ranks
# as threads over the in-process transport) and the real-MPI tests (label mpi, mpirun -np 4).
# Extra arguments go to ctest (e.g. -L mpi, -R Worker).
set -euo pipefail
source "$(dirname "$0")/common.sh"
sfb_deps
sfb_build
cd "$SFB_BUILD"
export OMP_NUM_THREADS=1
ctest --output-on-failure --timeout 600 -j "${SFB_TEST_JOBS:-1}" "$@"
