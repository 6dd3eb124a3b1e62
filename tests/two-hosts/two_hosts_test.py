#!/usr/bin/env python3
"""docs/two-hosts.md on two emulated hosts (tools/netbed): fabric-demo and
fabric-bench run their server role in host h1 and their client role in h0,
over tcp between the hosts' own addresses, and the bytes cross h0's NIC.
Exit 77 (ctest: skipped) with the reason when no testbed can be built here.

usage: two_hosts_test.py FABRIC_DEMO FABRIC_BENCH
"""

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "netbed"))

import testbed  # noqa: E402

DEMO, BENCH = sys.argv[1], sys.argv[2]
SERVER, CLIENT = 1, 0  # host indices
LIMIT = 150.0  # seconds for any one run


def wait_for_listening(proc, pattern):
    """The port from the server's 'listening on HOST:PORT' line, within 30 s."""
    deadline = time.monotonic() + 30
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        m = re.search(pattern, line)
        if m:
            return int(m.group(1))
    proc.kill()
    raise AssertionError(f"the server never listened:\n{seen}{proc.stderr.read()}")


def run_pair(bed, server_argv, client_argv, pattern):
    server_ip = bed.address(SERVER, 0)
    server = bed.popen(SERVER, server_argv + ["--listen", f"{server_ip}:0"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = wait_for_listening(server, pattern)
        before = bed.counters(CLIENT)["nic0"]["tx_bytes"]
        client = bed.run(CLIENT, client_argv + ["--connect", f"{server_ip}:{port}",
                                                "--bind", bed.address(CLIENT, 0)],
                         capture_output=True, text=True, timeout=LIMIT)
        sent = bed.counters(CLIENT)["nic0"]["tx_bytes"] - before
        server_out, server_err = server.communicate(timeout=LIMIT)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert client.returncode == 0, f"client: {client.stdout}{client.stderr}"
    assert server.returncode == 0, f"server: {server_out}{server_err}"
    return client.stdout, sent


def main():
    reason = testbed.unavailable_reason()
    if reason:
        print(f"skipped: {reason}")
        return 77
    with testbed.Testbed(f"th{os.getpid()}", hosts=2, nics=1, rate="2gbit") as bed:
        out, sent = run_pair(bed, [DEMO, "--provider", "tcp", "--quick"],
                             [DEMO, "--provider", "tcp", "--quick"],
                             r"^fabric-demo: listening on [0-9.]+:(\d+)$")
        assert "every byte verified" in out, out
        # The first line names both ends by their own addresses, not loopback.
        first = out.splitlines()[0]
        assert bed.address(CLIENT, 0) in first and bed.address(SERVER, 0) in first, first
        assert sent > 16 << 20, f"only {sent} bytes left h0's nic0"
        print(f"fabric-demo: ok, {sent / 2**20:.0f} MiB out of h0's nic0")

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.json")
            _, sent = run_pair(bed, [BENCH, "--provider", "tcp"],
                               [BENCH, "--provider", "tcp", "--quick", "--ops",
                                "single_write,imm", "--json", path],
                               r"^listening on [0-9.]+:(\d+)$")
            rows = json.load(open(path))["results"]
        assert {r["op"] for r in rows} == {"single_write", "imm"}, rows
        assert all(r["verified"] for r in rows), rows
        assert sent > 4 << 20, f"only {sent} bytes left h0's nic0"
        print(f"fabric-bench: ok, {len(rows)} rows, {sent / 2**20:.0f} MiB out of h0's nic0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
