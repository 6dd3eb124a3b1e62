"""Shared setup: loopback-only providers, a per-test time limit, the provider matrix."""

from __future__ import annotations

import faulthandler
import importlib.util
import os
import sys

import pytest

# Before any engine exists, so spawned peers inherit it too: the IP providers stay on loopback.
os.environ["FI_TCP_IFACE"] = "lo"
os.environ["FI_SOCKETS_IFACE"] = "lo"
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

try:
    import fabric_lib  # noqa: F401
except ImportError as e:  # a clear message beats a collection error per file
    raise pytest.UsageError(
        f"cannot import fabric_lib ({e}); build it and put <build>/python on PYTHONPATH, "
        f"or pip install the repository (docs/python.md). sys.executable={sys.executable}"
    ) from e

PROVIDERS = ["shm", "tcp"]
_HAVE_PYTEST_TIMEOUT = importlib.util.find_spec("pytest_timeout") is not None


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if _HAVE_PYTEST_TIMEOUT:
        yield
        return
    # Without pytest-timeout a hung test still ends the run, with every thread's stack.
    limit = float(item.config.getini("timeout") or 300)
    faulthandler.dump_traceback_later(limit, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_addoption(parser: pytest.Parser) -> None:
    if not _HAVE_PYTEST_TIMEOUT:
        parser.addini("timeout", "per-test limit in seconds", default="300")
        parser.addini("timeout_method", "unused without pytest-timeout", default="thread")
