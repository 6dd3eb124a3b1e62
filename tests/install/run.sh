#!/bin/sh
# Installs the build into a fresh prefix, then builds and runs an outside
# project against it twice: with find_package(fabric) and with pkg-config.
# usage: run.sh BUILD_DIR SOURCE_DIR CXX [CONSUMER [PKG_CONFIG_MODULES]]
#   CONSUMER: a folder of tests/install (default consumer, the library alone);
#   PKG_CONFIG_MODULES: what the pkg-config build asks for (default fabric-lib).
set -eu
build=$1 src=$2 cxx=$3
consumer=${4:-consumer}
modules=${5:-fabric-lib}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix/usr" >/dev/null
test -f "$prefix/usr/include/fabric/fabric.hpp"
libdir=$(dirname "$(find "$prefix/usr" -name libfabric_lib.a)")
test -n "$libdir"

# The tools, in a build that has them (FABRIC_BUILD_TOOLS), run from the prefix; once, with the
# library-alone consumer. fabric-bench's --help names the scripts it would run: the prefix's.
if [ "$consumer" = consumer ] && [ -x "$build/tools/fabric-bench" ]; then
  echo "== $prefix/usr/bin/fabric-info, fabric-bench"
  "$prefix/usr/bin/fabric-info" --help >/dev/null
  "$prefix/usr/bin/fabric-info" --json | grep -q '"groups"'
  "$prefix/usr/bin/fabric-bench" --help >"$prefix/bench-help.txt"
  grep -qF "Scripts: $prefix/usr/share/fabric-lib/bench/plot.py (--plot), $prefix/usr/share/fabric-lib/bench/peer_bench.py (--peer)" \
    "$prefix/bench-help.txt"
fi

echo "== find_package(fabric) for $consumer"
cmake -S "$src/tests/install/$consumer" -B "$prefix/cmake-build" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix/usr" >/dev/null
cmake --build "$prefix/cmake-build" >/dev/null
"$prefix/cmake-build/consumer"

echo "== pkg-config $modules"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046,SC2086 # the flags and the module list are words
"$cxx" -std=c++20 "$src/tests/install/$consumer/main.cpp" -o "$prefix/pc-consumer" \
  $(pkg-config --cflags --libs $modules)
"$prefix/pc-consumer"
