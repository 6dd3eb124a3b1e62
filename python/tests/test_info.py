"""fabric-info from the package: `python -m fabric_lib.info` prints the C++ tool's report."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import fabric_lib as fl

REPO = pathlib.Path(__file__).resolve().parents[2]
# The C++ tool of the same build, when the package is the build tree's (build/<preset>/python).
CXX_TOOL = pathlib.Path(fl.__file__).resolve().parents[2] / "tools" / "fabric-info"
FIXTURE = REPO / "tests/topology/data/p5_48xlarge.xml"
# A probe takes well under a second; the bound is for a loaded machine.
RUN_TIMEOUT_S = 120


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        env={**os.environ, "FI_TCP_IFACE": "lo"},
    )


def _info(*args: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "fabric_lib.info", *args])


def _provider_lines(report: str) -> list[str]:
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("libfabric  "))
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        rows.append(line.split()[0])
    return rows


def test_report_names_the_shm_and_tcp_providers() -> None:
    done = _info()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"fabric-info {fl.__version__}\n")
    providers = _provider_lines(done.stdout)
    assert "shm" in providers, done.stdout
    assert any(p.split(";")[0] == "tcp" for p in providers), done.stdout
    sections = ("Topology of this machine", "CPUs ", "RDMA NICs ", "Groups ", "verbs ", "CUDA ")
    for section in sections:
        assert section in done.stdout, f"{section!r} missing from:\n{done.stdout}"


def test_json_report_lists_the_providers() -> None:
    done = _info("--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["fabric_lib_version"] == fl.__version__
    providers = {p["provider"] for p in report["libfabric"]["providers"]}
    assert "shm" in providers
    assert any(p.split(";")[0] == "tcp" for p in providers), providers


def test_report_of_a_topology_file_shows_its_gpus_and_nics() -> None:
    done = _info("--xml", str(FIXTURE))
    assert done.returncode == 0, done.stderr
    assert "\nGPUs       8\n" in done.stdout
    assert "\nRDMA NICs  32\n" in done.stdout


def test_bad_option_fails_with_its_name() -> None:
    done = _info("--no-such-option")
    assert done.returncode != 0
    assert "--no-such-option" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    "args", [[], ["--xml", str(FIXTURE)], ["--json"]], ids=["live", "xml", "json"]
)
def test_same_report_as_the_cxx_tool(args: list[str]) -> None:
    if not CXX_TOOL.exists():
        pytest.skip(f"no C++ fabric-info beside this package ({CXX_TOOL}): an installed wheel")
    python, cxx = _info(*args), _run([str(CXX_TOOL), *args])
    assert cxx.returncode == 0, cxx.stderr
    assert (python.returncode, python.stdout, python.stderr) == (0, cxx.stdout, cxx.stderr)
