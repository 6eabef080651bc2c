#!/usr/bin/env bash
# Installs every build, test and demo dependency of sfb from Debian 12's apt repositories.
# Idempotent: packages already present are skipped, so demo.sh and test.sh can call it freely.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libopenmpi-dev openmpi-bin
  libeigen3-dev libtbb-dev libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev nlohmann-json3-dev jq
  libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev
  dataset-fashion-mnist liblinear-tools
  gnuplot-nox iproute2 binutils util-linux
  clang libclang-rt-14-dev clang-format
  slurm-wlm munge
)
# Peer benchmarks only (scripts/peer-bench.sh), never CI: PyTorch for the DDP comparison.
if [ "${SFB_PEER_DEPS:-0}" = 1 ]; then
  PACKAGES+=(python3-torch python3-numpy)
fi
# Link benchmarks only (scripts/comm-bench.sh), never CI: iperf3 measures what the links carry.
if [ "${SFB_BENCH_DEPS:-0}" = 1 ]; then
  PACKAGES+=(iperf3)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
