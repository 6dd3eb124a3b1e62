#!/usr/bin/env python3
"""The netbed tool (tools/netbed, docs/netbed.md): building, using and removing
testbeds, and that nothing of them ever reaches the root namespace.
Exit 77 (ctest: skipped) with the reason when no testbed can be built here."""

import os
import select
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
TOOL_DIR = os.path.join(HERE, "..", "..", "tools", "netbed")
TOOL = os.path.join(TOOL_DIR, "netbed")
sys.path.insert(0, TOOL_DIR)

import testbed  # noqa: E402

PREFIX = f"tt{os.getpid()}"
BOUND = 30.0  # seconds any single tool call may take on a loaded machine


def netbed(*args, env=None, check=True):
    proc = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          env=env, timeout=BOUND)
    if check and proc.returncode != 0:
        raise AssertionError(f"netbed {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
    return proc


def root_namespace_view():
    """Interfaces, addresses and routes of the root namespace."""
    return (subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
            .replace("\\", ""),
            subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout,
            subprocess.run(["ip", "route", "show", "table", "all"], capture_output=True,
                           text=True).stdout)


def link_names(view):
    return sorted(line.split(":")[1].strip().split("@")[0] for line in view[0].splitlines())


# A tiny TCP exchange between two hosts over one address, in the hosts' namespaces.
SERVER = ("import socket,sys; s=socket.socket(); s.bind((sys.argv[1],7001)); s.listen(1); "
          "print('ready',flush=True); c,_=s.accept(); n=0\n"
          "while True:\n b=c.recv(65536)\n if not b: break\n n+=len(b)\n"
          "print(n,flush=True)")
CLIENT = ("import socket,sys; c=socket.create_connection((sys.argv[1],7001)); "
          "c.sendall(b'x'*int(sys.argv[2])); c.close()")


def read_line(proc, timeout=BOUND):
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise AssertionError("no line within the bound")
    return proc.stdout.readline().strip()


class NetbedToolTest(unittest.TestCase):
    def setUp(self):
        self.before = root_namespace_view()
        self.names = []

    def tearDown(self):
        for name in self.names:
            netbed("down", "--name", name, check=False)
        after = root_namespace_view()
        self.assertEqual(link_names(self.before), link_names(after),
                         "the root namespace's interfaces changed")
        self.assertEqual(self.before[1], after[1], "the root namespace's addresses changed")
        self.assertEqual(self.before[2], after[2], "the root namespace's routes changed")

    def name(self, tag):
        n = f"{PREFIX}{tag}"
        self.names.append(n)
        return n

    def test_up_is_idempotent_and_down_removes_every_namespace(self):
        n = self.name("idem")
        first = netbed("up", "--name", n, "--hosts", "2", "--nics", "2", "--rate", "300mbit")
        self.assertIn(": up:", first.stdout)
        second = netbed("up", "--name", n, "--hosts", "2", "--nics", "2", "--rate", "300mbit")
        self.assertIn("already up", second.stdout)
        self.assertEqual(sorted(testbed.Testbed(n).own_namespaces()),
                         [f"{n}-h0", f"{n}-h1", f"{n}-sw"])
        status = netbed("status", "--name", n).stdout
        self.assertIn("198.18.1.2", status)
        # Another shape under the same name replaces it.
        netbed("up", "--name", n, "--hosts", "3", "--nics", "1", "--rate", "300mbit")
        self.assertEqual(sorted(testbed.Testbed(n).own_namespaces()),
                         [f"{n}-h0", f"{n}-h1", f"{n}-h2", f"{n}-sw"])
        netbed("down", "--name", n)
        self.assertEqual(testbed.Testbed(n).own_namespaces(), [])
        self.assertFalse(os.path.exists(testbed.Testbed(n).state_path))
        self.assertIn("nothing was left", netbed("down", "--name", n).stdout)

    def test_each_host_has_lo_up_and_its_nics_on_their_own_rails(self):
        n = self.name("rails")
        netbed("up", "--name", n, "--hosts", "2", "--nics", "2", "--rate", "400mbit")
        bed = testbed.Testbed.attach(n)
        links = bed.run(0, ["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        self.assertRegex(links, r"1: lo: <LOOPBACK,UP")
        self.assertEqual(sorted(l.split(":")[1].strip().split("@")[0] for l in links.splitlines()),
                         ["lo", "nic0", "nic1"])
        routes = bed.run(0, ["ip", "route"], capture_output=True, text=True).stdout
        self.assertIn("198.18.0.0/24 dev nic0", routes)
        self.assertIn("198.18.1.0/24 dev nic1", routes)
        self.assertNotIn("default", routes)
        # Bytes sent to h1's nic1 address leave h0 by nic1 and nothing else.
        before = bed.counters(0)
        server = bed.popen(1, [sys.executable, "-c", SERVER, bed.address(1, 1)],
                           stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(read_line(server), "ready")
            bed.run(0, [sys.executable, "-c", CLIENT, bed.address(1, 1), str(4 << 20)],
                    check=True, timeout=BOUND)
            self.assertEqual(read_line(server), str(4 << 20))
        finally:
            server.kill()
            server.wait(BOUND)
            server.stdout.close()
        after = bed.counters(0)
        self.assertGreaterEqual(after["nic1"]["tx_bytes"] - before["nic1"]["tx_bytes"], 4 << 20)
        self.assertLess(after["nic0"]["tx_bytes"] - before["nic0"]["tx_bytes"], 4096)

    def test_exec_runs_inside_the_host(self):
        n = self.name("exec")
        netbed("up", "--name", n, "--hosts", "2", "--nics", "1")
        out = netbed("exec", "--name", n, "h1", "--", "ip", "-o", "-4", "addr", "show", "nic0")
        self.assertIn("198.18.0.2/24", out.stdout)

    def test_parallel_testbeds_do_not_collide(self):
        a, b = self.name("pa"), self.name("pb")
        netbed("up", "--name", a, "--hosts", "2", "--nics", "1")
        netbed("up", "--name", b, "--hosts", "2", "--nics", "1")
        netbed("down", "--name", a)
        self.assertTrue(testbed.Testbed.attach(b).is_up())
        self.assertEqual(testbed.Testbed(a).own_namespaces(), [])

    def test_up_killed_mid_setup_is_cleaned_by_the_next_up_and_by_down(self):
        n = self.name("kill")
        env = dict(os.environ, NETBED_PAUSE_AFTER_STEP="14")
        proc = subprocess.Popen([sys.executable, TOOL, "up", "--name", n, "--hosts", "2",
                                 "--nics", "2"], stdout=subprocess.PIPE, text=True, env=env)
        try:
            self.assertEqual(read_line(proc), "netbed: paused after step 14")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(BOUND)
            proc.stdout.close()
        left = testbed.Testbed(n).own_namespaces()
        self.assertTrue(left, "the killed run had created nothing yet: pause it later")
        self.assertFalse(testbed.Testbed(n).is_up())
        self.assertIn("not up", netbed("status", "--name", n).stdout)
        netbed("up", "--name", n, "--hosts", "2", "--nics", "2")
        bed = testbed.Testbed.attach(n)
        self.assertTrue(bed.is_up())
        self.assertEqual(sorted(bed.counters(1)), ["nic0", "nic1"])
        # And once more, killed, then only `down`.
        netbed("down", "--name", n)
        proc = subprocess.Popen([sys.executable, TOOL, "up", "--name", n, "--hosts", "2",
                                 "--nics", "2"], stdout=subprocess.PIPE, text=True, env=env)
        try:
            read_line(proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(BOUND)
            proc.stdout.close()
        netbed("down", "--name", n)
        self.assertEqual(testbed.Testbed(n).own_namespaces(), [])

    def test_kill_host_removes_only_that_host(self):
        n = self.name("dead")
        netbed("up", "--name", n, "--hosts", "2", "--nics", "2")
        sleeper = testbed.Testbed.attach(n).popen(1, ["sh", "-c", "read x"],
                                                  stdin=subprocess.PIPE)
        netbed("kill", "--name", n, "h1")
        self.assertEqual(sleeper.wait(BOUND), -signal.SIGKILL)
        sleeper.stdin.close()
        self.assertEqual(sorted(testbed.Testbed(n).own_namespaces()), [f"{n}-h0", f"{n}-sw"])
        links = testbed.Testbed.attach(n).run(0, ["ip", "-o", "link", "show"],
                                              capture_output=True, text=True).stdout
        self.assertIn("nic1", links)

    def test_bad_arguments_are_refused_before_anything_is_built(self):
        n = self.name("bad")
        for args, words in ((["--rate", "fast"], "rate 'fast'"), (["--hosts", "0"], "--hosts 0"),
                            (["--loss", "150%"], "loss '150%'"),
                            (["--delay", "soon"], "delay 'soon'")):
            proc = netbed("up", "--name", n, *args, check=False)
            self.assertEqual(proc.returncode, 1, args)
            self.assertIn(words, proc.stderr)
            self.assertEqual(testbed.Testbed(n).own_namespaces(), [])
        proc = netbed("up", "--name", "has-dash", check=False)
        self.assertIn("letters, digits", proc.stderr)

    def test_loss_drops_frames_and_tcp_still_delivers_every_byte(self):
        n = self.name("loss")
        netbed("up", "--name", n, "--hosts", "2", "--nics", "1", "--rate", "400mbit",
               "--loss", "2%")
        bed = testbed.Testbed.attach(n)
        server = bed.popen(1, [sys.executable, "-c", SERVER, bed.address(1, 0)],
                           stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(read_line(server), "ready")
            bed.run(0, [sys.executable, "-c", CLIENT, bed.address(1, 0), str(2 << 20)],
                    check=True, timeout=BOUND)
            self.assertEqual(read_line(server), str(2 << 20))
        finally:
            server.kill()
            server.wait(BOUND)
            server.stdout.close()
        self.assertGreater(bed.dropped_by_loss(), 0)


if __name__ == "__main__":
    reason = testbed.unavailable_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        sys.exit(77)
    unittest.main(verbosity=2)
