#!/bin/sh
# fabric_bench_smoke: a --quick sweep must run, verify its data and write a
# JSON whose rows carry the issue's schema. Figures are not judged here.
set -eu
bench="$1"
json="$2"
rm -f "$json"
"$bench" --local --provider shm --quick --json "$json"
/usr/bin/python3 - "$json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
keys = {"op", "provider", "backend", "size", "count", "engine_gbps", "raw_gbps", "ratio",
        "ops_per_s", "p50_us", "p99_us", "p999_us"}
rows = doc["results"]
assert "machine" in doc and rows, "empty report"
ops = {r["op"] for r in rows}
assert {"single_write", "paged_write", "imm", "sendrecv", "scatter"} <= ops, ops
for r in rows:
    missing = keys - r.keys()
    assert not missing, (r["op"], missing)
    assert r["verified"], r
    assert r["backend"] == "libfabric"
    if r["op"] == "sendrecv":
        assert r["engine_gbps"] > 0, r  # engine only: raw_gbps and ratio are null
    elif r["op"] != "imm":
        assert r["engine_gbps"] > 0 and r["raw_gbps"] > 0, r
print("fabric_bench_smoke: %d rows ok" % len(rows))
PY
