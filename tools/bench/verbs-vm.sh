#!/usr/bin/env bash
# fabric-bench on the verbs backend next to perftest's ib_write_bw, in one
# rxe VM run, so both figures come from the same (emulated) machine state.
# From the repository root, after building the default preset:
#   ../shared/rxe-vm/run --share "$PWD" --timeout 900 -- tools/bench/verbs-vm.sh build/default bench-verbs
# Writes OUT/fabric-bench-verbs.json, OUT/ib_write_bw.json and prints the
# ratio per size. Absolute figures under software emulation mean little;
# the ratio is what docs/benchmarks.md records.
set -euo pipefail
build=${1:-build/default}
out=${2:-bench-verbs}
mkdir -p "$out"
[[ -n "${RXE_VM:-}" ]] || echo "warning: not inside the rxe VM" >&2

"$build/tools/fabric-bench" --local --backend verbs --quick --reps "${REPS:-2}" \
  --ops single_write --json "$out/fabric-bench-verbs.json"

# ib_write_bw: server and client on this VM's rxe0, GID index 1 (RoCE v2),
# connection set-up over 127.0.0.1. Same sizes and bytes per size as --quick.
port=18515
echo '[]' > "$out/ib_write_bw.json"
for size in 4096 65536 1048576; do
  iters=$(( (16 << 20) / size ))
  (( iters < 4 )) && iters=4
  log="$out/ib_write_bw-$size.txt"
  ib_write_bw -d rxe0 -x 1 -p "$port" -s "$size" -n "$iters" -F --report_gbits >/dev/null 2>&1 &
  server=$!
  # Bounded wait for the server's listening socket (a benchmark script, not a test).
  for _ in $(seq 1 200); do
    ss -ltn | grep -q ":$port " && break
    sleep 0.05
  done
  timeout 120 ib_write_bw -d rxe0 -x 1 -p "$port" -s "$size" -n "$iters" -F --report_gbits \
    127.0.0.1 > "$log" 2>&1
  wait "$server"
  # Result line: bytes iterations BW-peak BW-average MsgRate
  avg=$(awk -v s="$size" '$1 == s && NF >= 5 {print $4}' "$log" | tail -1)
  python3 - "$out/ib_write_bw.json" "$size" "$iters" "$avg" <<'PY'
import json, sys
path, size, iters, avg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
rows = json.load(open(path))
rows.append({"size": size, "iterations": iters, "gbps": avg})
json.dump(rows, open(path, "w"), indent=1)
PY
done

python3 - "$out/fabric-bench-verbs.json" "$out/ib_write_bw.json" <<'PY'
import json, sys
engine = {r["size"]: r for r in json.load(open(sys.argv[1]))["results"] if r["op"] == "single_write"}
print("size        engine Gbit/s   ib_write_bw Gbit/s   ratio")
for row in json.load(open(sys.argv[2])):
    e = engine.get(row["size"])
    if e is None:
        continue
    ratio = e["engine_gbps"] / row["gbps"] if row["gbps"] else float("nan")
    print(f"{row['size']:>9}   {e['engine_gbps']:>12.3f}   {row['gbps']:>18.3f}   {ratio:>5.2f}")
PY
