#!/bin/sh
# The production library holds no test hook: the Domain decorator seam (src/backends/
# open_domains.hpp) is only a weak reference there, defined by tests/support/doubles, and the
# setter tests use is not in it. Usage: no_test_hooks.sh LIBRARY.a
set -eu
lib=$1
symbols=$(nm -C "$lib")
seam=$(printf '%s\n' "$symbols" | grep 'decorate_for_test' || true)
if [ -z "$seam" ]; then
  echo "FAIL: $lib does not reference decorate_for_test: open_domains() lost its seam"
  exit 1
fi
if printf '%s\n' "$seam" | grep -qv ' w '; then
  echo "FAIL: $lib defines or strongly references decorate_for_test:"
  printf '%s\n' "$seam"
  exit 1
fi
if printf '%s\n' "$symbols" | grep -q 'set_test_decorator'; then
  echo "FAIL: $lib holds set_test_decorator"
  exit 1
fi
echo "ok: decorate_for_test is only a weak reference in $lib"
