#!/bin/sh
# fabric_bench_smoke: a --quick sweep must run, verify its data and write a
# JSON whose rows carry the documented keys (docs/benchmarks.md). Figures are not judged here.
set -eu
bench="$1"
json="$2"
# Which part failed, as the last line of the output (the commands below stop the script at
# their first failure, and a log is often read from its end).
step="the --quick sweep"
server=
on_exit() {
  rc=$?
  [ -z "$server" ] || kill "$server" 2>/dev/null || true  # a server whose client failed
  [ "$rc" -eq 0 ] || echo "fabric_bench_smoke: failed in $step (exit $rc)" >&2
}
trap on_exit EXIT
# What is judged here is that the runs work and verify their data, not how fast: a request
# may wait up to 60 s for a completion (the engine's default is 5 s), so that a CI machine that
# stalls for seconds does not fail the smoke, while a real hang still does, well inside the
# test's 240 s.
patient="--request-timeout-ms 60000"
rm -f "$json"
"$bench" --local --provider shm --quick $patient --json "$json"
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

step="the server and client roles"
# The two roles as separate processes: a server on a free loopback port, a
# client that drives it. The server serves one client and exits 0.
out=$(mktemp)
"$bench" --listen 127.0.0.1:0 --provider shm $patient >"$out" 2>&1 &
server=$!
port=$(sh "$(dirname "$0")/../common/listening-port.sh" "$out" "$server") || exit 1
# sendrecv_addressed: the server opens its channel engine on the client's request.
"$bench" --connect "127.0.0.1:$port" --provider shm --quick $patient \
  --ops single_write,imm,sendrecv_addressed \
  --json "$json.client"
wait "$server" || { cat "$out"; echo "fabric_bench_smoke: the server role failed" >&2; exit 1; }
server=
/usr/bin/python3 - "$json.client" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert {r["op"] for r in rows} == {"single_write", "imm", "sendrecv_addressed"}, rows
assert all(r["verified"] for r in rows), rows
print("fabric_bench_smoke: server/client %d rows ok" % len(rows))
PY
rm -f "$out" "$json.client"

step="--peer without a peer"
# --peer with an interpreter that cannot run: the engine's figures are still
# written, the peer's reason is in the JSON, and the exit status is 3.
status=0
"$bench" --local --provider shm --quick $patient --ops single_write --peer nixl \
  --peer-python /nonexistent/python3 --json "$json.peer" || status=$?
[ "$status" -eq 3 ] || { echo "fabric_bench_smoke: --peer without a peer: exit $status, want 3" >&2; exit 1; }
/usr/bin/python3 - "$json.peer" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["results"] and all(r["verified"] for r in doc["results"]), doc["results"]
(peer,) = doc["peers"]
assert peer["peer"] == "nixl" and "cannot run" in peer["error"], peer
assert not any("peer_runs" in r for r in doc["results"])
print("fabric_bench_smoke: a missing peer is reported, not fatal")
PY
rm -f "$json.peer"

step="the error reports"
# Errors: one line per failure, not one per process (five with scatter), and
# a refused --connect fails within seconds, naming the address.
err=$(mktemp)
status=0
"$bench" --local --provider no-such-provider --quick 2>"$err" || status=$?
[ "$status" -ne 0 ] || { echo "fabric_bench_smoke: an unknown provider ran" >&2; exit 1; }
lines=$(grep -c "no usable libfabric provider 'no-such-provider'" "$err" || true)
[ "$lines" -eq 1 ] || { cat "$err"; echo "fabric_bench_smoke: $lines error lines, want 1" >&2; exit 1; }
grep -q "fabric-info" "$err" || { cat "$err"; echo "fabric_bench_smoke: no pointer to fabric-info" >&2; exit 1; }
status=0
start=$(date +%s)
timeout 30 "$bench" --connect 127.0.0.1:1 --provider shm --quick 2>"$err" || status=$?
took=$(( $(date +%s) - start ))
[ "$status" -eq 1 ] && [ "$took" -le 10 ] && grep -q "127.0.0.1:1: connection refused: nothing listens there" "$err" ||
  { cat "$err"; echo "fabric_bench_smoke: refused --connect: exit $status after $took s" >&2; exit 1; }
rm -f "$err"
echo "fabric_bench_smoke: errors are single lines; a refused --connect fails in $took s"

step="--sizes and --iters"
# --sizes and --iters pick the sweep; percentiles the samples cannot support
# are null, not invented (32 requests: p50 only).
"$bench" --local --provider shm --quick $patient --ops single_write --sizes 8,4K --iters 32 --reps 1 \
  --json "$json.sizes" >/dev/null
/usr/bin/python3 - "$json.sizes" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert [r["size"] for r in rows] == [8, 4096], rows
for r in rows:
    assert r["iterations"] == 32 and r["verified"], r
    assert r["p50_us"] is not None and r["p99_us"] is None and r["p999_us"] is None, r
print("fabric_bench_smoke: --sizes/--iters ok, no p99 from 32 samples")
PY
status=0
"$bench" --local --provider shm --quick --sizes 12 2>"$json.err" || status=$?
[ "$status" -ne 0 ] && grep -q "multiples of 8" "$json.err" ||
  { cat "$json.err"; echo "fabric_bench_smoke: --sizes 12 accepted" >&2; exit 1; }
rm -f "$json.sizes" "$json.err"

step="--breakdown"
# --breakdown: the engine's stamps per request and, from the same row's raw rounds, the raw
# provider call's own time (the floor under call → first post).
out=$(mktemp)
"$bench" --local --provider shm --quick $patient --ops single_write --sizes 4K --iters 256 --reps 1 \
  --breakdown --json "$json.breakdown" >"$out"
grep -qF "raw post" "$out" || { cat "$out"; echo "fabric_bench_smoke: no 'raw post' column" >&2; exit 1; }
/usr/bin/python3 - "$json.breakdown" <<'PY'
import json, sys
[r] = json.load(open(sys.argv[1]))["results"]
b = r["breakdown"]
assert b["samples"] == 256, b
assert b["call_to_first_post"]["p50_ns"] > 0, b
assert b["raw_post_call"] is not None and b["raw_post_call"]["p50_ns"] > 0, b
print("fabric_bench_smoke: --breakdown ok, raw post p50 %.0f ns" % b["raw_post_call"]["p50_ns"])
PY
rm -f "$out" "$json.breakdown"

step="--metrics"
# --metrics: the initiator engine's metrics() after the run, in the table's output and the JSON,
# equal to what the sweep submitted: 32 measured single writes of 4 KiB after a warm-up of 32/8.
out=$(mktemp)
"$bench" --local --provider shm --quick $patient --ops single_write --sizes 4K --iters 32 --reps 1 \
  --metrics --json "$json.metrics" >"$out"
grep -qF "initiator engine metrics()" "$out" || { cat "$out"; echo "fabric_bench_smoke: no metrics in the output" >&2; exit 1; }
/usr/bin/python3 - "$json.metrics" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
writes = m["requests"]["single_write"]
assert writes == {"ok": 36, "failed": 0, "bytes_ok": 36 * 4096}, writes
others = {k: v for k, v in m["requests"].items() if k != "single_write" and (v["ok"] or v["failed"])}
assert not others, others
assert m["latency"]["count"] == 36 and m["latency"]["buckets"][-1] == {"le": "+Inf", "count": 36}, m["latency"]
assert m["in_flight"] == 0 and m["queue_depth"] == 0 and m["peers_known"] >= 1, m
print("fabric_bench_smoke: --metrics counts the run's 36 writes")
PY
status=0
"$bench" --local --provider shm --quick --metrics --no-metrics 2>"$json.err" || status=$?
[ "$status" -ne 0 ] && grep -q "excludes" "$json.err" ||
  { cat "$json.err"; echo "fabric_bench_smoke: --metrics with --no-metrics accepted" >&2; exit 1; }
rm -f "$out" "$json.metrics" "$json.err"

step="--metrics-ab"
# --metrics-ab: a second initiator engine with metrics off runs every other round; both land
# verified bytes, the table and JSON give on / off, and the metered engine's metrics() count its
# own 4 + 2 x 32 writes only. --metrics-aa excludes it.
out=$(mktemp)
"$bench" --local --provider shm --quick $patient --ops single_write --sizes 4K --iters 32 --reps 2 \
  --metrics --metrics-ab --json "$json.ab" >"$out"
grep -qF "metrics on / off in one run" "$out" || { cat "$out"; echo "fabric_bench_smoke: no on / off table" >&2; exit 1; }
/usr/bin/python3 - "$json.ab" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["machine"]["metrics_ab"] is True, doc["machine"]
(row,) = doc["results"]
assert row["verified"] and row["metrics_off_gbps"] > 0 and row["metrics_on_over_off"] > 0, row
assert abs(row["metrics_on_over_off"] - row["engine_gbps"] / row["metrics_off_gbps"]) < 1e-9, row
writes = doc["metrics"]["requests"]["single_write"]
assert writes == {"ok": 68, "failed": 0, "bytes_ok": 68 * 4096}, writes
print("fabric_bench_smoke: --metrics-ab on/off %.3f, the metered engine counted its 68 writes"
      % row["metrics_on_over_off"])
PY
# metrics_ab.py reads such runs back: one run as both sides gives that run's ratio as median.
/usr/bin/python3 "$(dirname "$0")/metrics_ab.py" "$json.ab.summary" -- "$json.ab" -- "$json.ab" >/dev/null
/usr/bin/python3 - "$json.ab" "$json.ab.summary" <<'PY'
import json, sys
(row,) = json.load(open(sys.argv[1]))["results"]
s = json.load(open(sys.argv[2]))
peak = s["ab"]["4096"]["peak"]
assert peak["runs"] == 1 and peak["median"] == row["metrics_on_over_off"], peak
assert s["aa"]["4096"]["avg"]["median"] == row["metrics_on_over_off_avg"], s["aa"]
PY
rm -f "$json.ab.summary"
status=0
"$bench" --local --provider shm --quick --metrics-ab --metrics-aa 2>"$json.err" || status=$?
[ "$status" -ne 0 ] && grep -q "excludes" "$json.err" ||
  { cat "$json.err"; echo "fabric_bench_smoke: --metrics-ab with --metrics-aa accepted" >&2; exit 1; }
rm -f "$out" "$json.ab" "$json.err"

step="--duration, --bidir and --threads"
# --duration, --bidir, --threads (figures are not judged, only what is printed):
# perftest-like columns with BW peak and average, round-trip latency labels,
# bidirectional rows with both directions and their sum, the threads recorded.
out=$(mktemp)
"$bench" --local --provider shm --quick $patient --ops single_write,paged_write --sizes 4K,64K \
  --duration 0.05 --bidir --threads 2 --reps 2 --json "$json.modes" >"$out"
for want in "bytes" "iters" "eng peak" "eng avg" "raw peak" "raw avg" "eng req/s" "rt p50" \
            "round-trip latency" "single_write_bidir" "bidir 65536 B: initiator→target"; do
  grep -qF "$want" "$out" || { cat "$out"; echo "fabric_bench_smoke: no '$want' in the table" >&2; exit 1; }
done
if grep -qi "one-way" "$out"; then
  cat "$out"; echo "fabric_bench_smoke: a latency is labelled one-way" >&2; exit 1
fi
/usr/bin/python3 - "$json.modes" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
m, rows = doc["machine"], doc["results"]
assert m["threads"] == 2 and m["bidir"] is True and m["duration_s"] == 0.05 and m["iters"] is None, m
ops = [(r["op"], r["size"]) for r in rows if r["op"] != "paged_write"]
assert ops == [("single_write", 4096), ("single_write_bidir", 4096),
               ("single_write", 65536), ("single_write_bidir", 65536)], ops
for r in rows:
    assert r["verified"] and r["latency"] == "round_trip", r
    assert r["iterations"] >= 4, r  # sized from the warm-up's rate, not the default budget
    assert r["engine_avg_gbps"] > 0 and r["engine_avg_gbps"] <= r["engine_gbps"] * 1.0001, r
    if r["op"] == "single_write_bidir":
        assert r["raw_gbps"] is None and r["out_gbps"] > 0 and r["in_gbps"] > 0, r
        assert abs(r["out_gbps"] + r["in_gbps"] - r["engine_gbps"]) < 1e-6 * r["engine_gbps"], r
    else:
        assert r["raw_avg_gbps"] > 0 and r["raw_avg_gbps"] <= r["raw_gbps"] * 1.0001, r
print("fabric_bench_smoke: --duration/--bidir/--threads ok, %d rows" % len(rows))
PY
rm -f "$out" "$json.modes"
status=0
"$bench" --local --provider shm --quick --iters 8 --duration 1 2>"$json.err" || status=$?
[ "$status" -ne 0 ] && grep -q "excludes" "$json.err" ||
  { cat "$json.err"; echo "fabric_bench_smoke: --iters with --duration accepted" >&2; exit 1; }
rm -f "$json.err"
