#!/usr/bin/env bash
# Installs the Debian 12 packages fabric-lib needs, when missing:
#   install-deps.sh demo   the library and fabric-demo (make demo)
#   install-deps.sh        everything make build and make test use
#   install-deps.sh fuzz   that, and what the fuzz preset needs
set -euo pipefail

# The library and the tools.
packages=(
  build-essential cmake ninja-build pkg-config
  libfabric-dev libfabric-bin
  libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libconcurrentqueue-dev
  libhwloc-dev libibverbs-dev zlib1g-dev
)
if [[ "${1:-}" != demo ]]; then
  packages+=(
    googletest libgtest-dev libgmock-dev
    python3-matplotlib
    python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-pytest-timeout
    python3-pytest-xdist  # python.pytest runs two workers with it
    python3-prometheus-client  # fabric_lib.metrics (docs/observability.md)
    # python/tests (torch tests, weights and moe; about 1 GB); pip for ml_dtypes below.
    python3-torch python3-pip
    # tools/netbed: namespaces, veth, tc (iproute2); its --loss rule (nftables).
    iproute2 nftables
    # scripts/vllm-venv.sh (the vLLM connector test) builds a venv from Debian's interpreter.
    python3-venv
    # scripts/hot-path-instructions.sh counts instructions per request with callgrind.
    valgrind
  )
fi
# scripts/run-fuzzers.sh also needs clang and its libFuzzer runtime.
if [[ "${1:-}" == fuzz ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
mode="${1:-}"
python_packages() {
  [[ "$mode" == demo ]] && return 0
  # ml_dtypes (PyPI): the independent FP8 reference of python/tests/test_weights.py. 0.5.4 runs
  # on Debian's numpy 1.24; --no-deps keeps pip from replacing that numpy (torch needs it).
  /usr/bin/python3 -c "import ml_dtypes" 2>/dev/null ||
    /usr/bin/python3 -m pip install -q --break-system-packages --no-deps "ml_dtypes==0.5.4"
}
[ ${#missing[@]} -eq 0 ] && { python_packages; exit 0; }

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
python_packages
