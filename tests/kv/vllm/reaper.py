"""Process groups that die with the test however the test dies.

A vLLM server started in a session of its own forks an engine core and a worker. PR_SET_PDEATHSIG
on the server kills only the server when the test is SIGKILLed (a ctest timeout, a runner's
kill): its engine core and worker were seen running on, spinning on a CPU, for many minutes
after. The reaper is a small process in a session of its own that holds the read end of a pipe
and the ids of the groups to kill; the write end lives only in the test process, so the pipe's
end of file says that the test is gone, whatever killed it.
"""

from __future__ import annotations

import os
import subprocess
import sys

_REAPER = """
import os, signal, sys
groups = set()
for line in sys.stdin:
    groups.add(int(line))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
"""


class Reaper:
    def __init__(self) -> None:
        read_end, self._write_end = os.pipe()  # both close-on-exec: no server inherits them
        self._proc = subprocess.Popen([sys.executable, "-c", _REAPER], stdin=read_end,
                                      stdout=subprocess.DEVNULL, start_new_session=True)
        os.close(read_end)

    def watch(self, group: int) -> None:
        os.write(self._write_end, f"{group}\n".encode())

    def close(self) -> None:
        """At the test's normal end, after its own cleanup: kills what is left of the groups."""
        os.close(self._write_end)
        self._proc.wait(30)
