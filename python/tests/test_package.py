"""The package as a whole: its names, its version, and what importing it leaves alone."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import fabric_lib as fl

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_all_names_exist() -> None:
    for name in fl.__all__:
        assert hasattr(fl, name), name
    public = {n for n in dir(fl) if not n.startswith("_")}
    # Exactly __all__, plus the workload subpackages (they need numpy or torch) and the metrics
    # module (prometheus_client), which are attributes once another test imported them.
    subpackages = {"weights", "moe", "kv", "vllm", "metrics"}
    assert public - subpackages == set(fl.__all__) - {"__version__"}


def test_version_matches_the_build_files() -> None:
    header = (REPO / "include/fabric/version.hpp").read_text()
    parts = [
        re.search(rf"kVersion{p} = (\d+)", header).group(1) for p in ("Major", "Minor", "Patch")
    ]
    assert fl.__version__ == ".".join(parts)
    pyproject = REPO / "pyproject.toml"
    if pyproject.exists():
        assert (
            re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.M).group(1)
            == fl.__version__
        )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads sigaction through libc")
def test_import_keeps_the_interpreters_signal_handlers() -> None:
    script = """
        import ctypes, signal
        libc = ctypes.CDLL(None)
        def handlers():
            out = {}
            names = ("SIGINT", "SIGTERM", "SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT")
            for sig in (getattr(signal, n) for n in names):
                # A struct sigaction; its first field is the handler.
                buf = ctypes.create_string_buffer(512)
                assert libc.sigaction(int(sig), None, buf) == 0
                out[sig.name] = ctypes.c_void_p.from_buffer(buf).value
            return out
        before = handlers()
        import fabric_lib
        after = handlers()
        print({k: (before[k], after[k]) for k in before if before[k] != after[k]})
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "{}"


def test_every_workload_runs_on_one_copy_of_the_library() -> None:
    # One extension module: a process importing the engine and every workload maps one shared
    # object of the package (two copies would keep two loggers, two peer registries).
    script = """
        import fabric_lib, fabric_lib.kv, fabric_lib.moe, fabric_lib.weights
        from fabric_lib import _kv
        from fabric_lib.moe import _moe
        import pathlib
        package = pathlib.Path(fabric_lib.__file__).parent
        maps = {line.split()[-1] for line in open("/proc/self/maps") if len(line.split()) >= 6}
        print(sorted(m for m in maps if m.startswith(str(package))))
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    mapped = eval(result.stdout)  # noqa: S307 - a list printed by the script above
    assert len(mapped) == 1 and "_native" in mapped[0], mapped
