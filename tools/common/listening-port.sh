#!/bin/sh
# usage: listening-port.sh LOG PID
# Prints the port of the first "listening on HOST:PORT" line a server role
# (fabric-demo, fabric-bench --listen) writes to LOG. Bounded: fails after
# 30 s, or as soon as PID exits, printing LOG.
log=$1 pid=$2
for _ in $(seq 1 300); do
  port=$(sed -n 's/^\(fabric-demo: \)\{0,1\}listening on [0-9.]*:\([0-9]*\)$/\2/p' "$log")
  [ -n "$port" ] && { echo "$port"; exit 0; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
cat "$log" >&2
echo "the server never listened" >&2
exit 1
