"""Stop a run cleanly on Ctrl-C or SIGTERM: finish the current block, keep the files.

Inside ``stop_requests()`` the first SIGINT or SIGTERM only sets a flag that the
timing loop checks between blocks; a second SIGINT interrupts at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["RunInterrupted", "StopFlag", "stop_requests"]


class RunInterrupted(KeyboardInterrupt):
    """The user asked the run to stop (SIGINT or SIGTERM); handled like Ctrl-C."""


class StopFlag:
    """Set by a signal; ``check()`` raises ``RunInterrupted`` once it is set."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def check(self) -> None:
        """Raise RunInterrupted if a stop was requested."""
        if self.signal_name is not None:
            raise RunInterrupted(f"stopped by {self.signal_name}")


@contextlib.contextmanager
def stop_requests() -> Iterator[StopFlag]:
    """Route SIGINT/SIGTERM to a flag while the body runs (main thread only)."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        if flag and signum == signal.SIGINT:
            raise KeyboardInterrupt
        flag.signal_name = signal.Signals(signum).name

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
