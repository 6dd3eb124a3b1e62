"""Undoing what loading libfabric does to the process's signal handlers.

Debian's libfabric links the psm provider, which pulls in libinfinipath. Its load-time
constructor installs handlers for SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT that
call exit(1): Ctrl-C would end the process without a KeyboardInterrupt (no finally blocks, no
engine shutdown), and a crash would look like an ordinary failure with no core and no
faulthandler traceback. Importing fabric_lib must not change those, so this puts back what the
interpreter had before.
"""

from __future__ import annotations

import faulthandler
import signal
import threading

_CLOBBERED = ("SIGINT", "SIGTERM", "SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT")


def restore_interpreter_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal() only works there; the handlers stay as libfabric left them
    for name in _CLOBBERED:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        handler = signal.getsignal(sig)  # what Python believes is installed
        if handler is not None:
            signal.signal(sig, handler)
    if faulthandler.is_enabled():
        # Its handlers were replaced too; enable() alone is a no-op while it thinks it is on.
        faulthandler.disable()
        faulthandler.enable()
