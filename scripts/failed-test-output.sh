#!/bin/sh
# usage: failed-test-output.sh BUILD_DIR [LINES]
# After a failed ctest run: the last LINES (default 12) lines of each failed test's own output,
# printed last, so that a log read from its end (CI's) names the cause and not only the test.
# ctest already printed the whole output when the test failed, hundreds of lines earlier.
set -eu
dir=$1/Testing/Temporary
lines=${2:-12}
[ -f "$dir/LastTestsFailed.log" ] && [ -f "$dir/LastTest.log" ] || exit 0
# LastTestsFailed.log: one "N:name" per line. LastTest.log: each test's output between a line
# "Output:" plus a dashed rule, and "<end of output>", after its "N/M Test: name" header.
cut -d: -f2- "$dir/LastTestsFailed.log" | head -n 3 | while IFS= read -r name; do
  echo "== the end of ${name}'s output (all of it: Testing/Temporary/LastTest.log)"
  awk -v want="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); mine = ($0 == want); next }
    mine && /^<end of output>$/ { mine = 0; next }
    mine && /^Output:$/ { getline; inside = 1; next }
    mine && inside { print }
    !mine { inside = 0 }
  ' "$dir/LastTest.log" | tail -n "$lines"
done
