#!/bin/sh
# fabric_demo_roles: the server/client roles of docs/two-hosts.md on one
# host (loopback, tcp): the server waits on a free port, the client drives it,
# both exit 0 with every byte verified. tests/two-hosts/ runs the same between
# two network namespaces.
set -eu
demo="$1"
out=$(mktemp)
trap 'kill "$server" 2>/dev/null || true; rm -f "$out"' EXIT
"$demo" --listen 127.0.0.1:0 --provider tcp --quick >"$out" 2>&1 &
server=$!
port=$(sh "$(dirname "$0")/../common/listening-port.sh" "$out" "$server")
"$demo" --connect "127.0.0.1:$port" --provider tcp --quick | tee "$out.client"
wait "$server" || { cat "$out"; echo "fabric_demo_roles: the server failed" >&2; exit 1; }
grep -q "every byte verified" "$out.client"
rm -f "$out.client"
echo "fabric_demo_roles: ok"
