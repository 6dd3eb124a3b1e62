"""fabric-info from the Python package: what fabric-lib finds on this host.

The report of the C++ tool `fabric-info` (tools/info), from the same code compiled into the
extension: version, topology (CPUs, NUMA nodes, GPUs, RDMA NICs, the groups and their Domains),
the usable libfabric providers, verbs devices and CUDA. `pip install .` installs it as the
`fabric-info` command; `python -m fabric_lib.info --help` lists its options (`--json`,
`--xml FILE`, `--nics`, ...).

It sets FI_TCP_IFACE and FI_SOCKETS_IFACE to `lo` for its process, so it runs as a command of
its own, not inside a program that opens engines.
"""

from __future__ import annotations

import sys
from typing import Sequence

from ._native import _fabric_info


def main(argv: Sequence[str] | None = None) -> int:
    """Prints fabric-info's report for these arguments (default: sys.argv[1:]); the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    status, report, errors = _fabric_info(["fabric-info", *args])
    sys.stdout.write(report)
    sys.stderr.write(errors)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
