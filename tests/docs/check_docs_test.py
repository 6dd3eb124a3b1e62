#!/usr/bin/env python3
"""The docs check can fail: run on tests/docs/fixtures/stale.md, it must name each stale
reference at its line (and nothing on the clean and placeholder lines), and exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = {
    "tests/docs/fixtures/stale.md:6: no such path: scripts/no-such-script.sh",
    "tests/docs/fixtures/stale.md:7: ctest -R NoSuchTest(Alpha|Beta): selects no test",
    "tests/docs/fixtures/stale.md:8: ctest -L no-such-label: selects no label",
    "tests/docs/fixtures/stale.md:9: make no-such-target: no such target in the Makefile",
    "tests/docs/fixtures/stale.md:10: python -m fabric_lib.no_such_module: "
    "no python/fabric_lib/no_such_module.py or __main__.py",
    "tests/docs/fixtures/stale.md:11: no such path: ../../../docs/no-such-page.md",
    "tests/docs/fixtures/stale.md:12: no heading for anchor: docs/api.md#no-such-heading",
    "tests/docs/fixtures/stale.md:13: no heading for anchor: #no-such-heading",
    "tests/docs/fixtures/stale.md:16: ctest -R no_such_in_shell: selects no test",
    "tests/docs/fixtures/stale.md:17: no such path: tools/no-such-dir/run.sh",
}


def main() -> int:
    build = sys.argv[1]
    run = subprocess.run([sys.executable, str(HERE / "check_docs.py"), "--build", build,
                          str(HERE / "fixtures" / "stale.md")],
                         capture_output=True, text=True, timeout=120)
    reported = set(run.stdout.splitlines())
    ok = run.returncode == 1 and reported == EXPECTED
    if not ok:
        print(f"exit status {run.returncode} (want 1)")
        for line in sorted(EXPECTED - reported):
            print(f"missed:     {line}")
        for line in sorted(reported - EXPECTED):
            print(f"unexpected: {line}")
        print(run.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
