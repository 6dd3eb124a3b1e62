#!/usr/bin/env bash
# Installs the Debian 12 packages fabric-lib builds and tests with, when missing.
# `install-deps.sh fuzz` adds what the fuzz preset needs.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libfabric-dev libfabric-bin
  libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libconcurrentqueue-dev
  libhwloc-dev libibverbs-dev
  googletest libgtest-dev libgmock-dev
  python3-matplotlib
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-pytest-timeout
  python3-torch
  # scripts/vllm-venv.sh (the vLLM connector test) builds a venv from Debian's interpreter.
  python3-venv
)
# scripts/run-fuzzers.sh also needs clang and its libFuzzer runtime.
if [[ "${1:-}" == fuzz ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
