"""The one clock the measuring code reads: the real host's, or a simulated host's.

Every read of time while measuring goes through ``now()``: the timed window's wall and
thread-CPU clocks (``timing``), the canary's reads and probes (``canary``), the
quiet-host wait's clock and sleep (``measure.HostWatch``), a block's wall-clock edges and
its page-fault count, and the self-test's carriers (their spins, sleeps and calibration
loops, ``carriers``). ``using(clock)`` puts another clock in place for a body, as
``embedbench.sim`` does to run the kit's own measuring code against a seeded model of a
host (docs/development.md, "The simulated host"). Outside a simulation it is
``REAL_CLOCK``.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Iterator
from typing import Protocol

__all__ = ["REAL_CLOCK", "Clock", "RealClock", "now", "using"]


class Clock(Protocol):
    """What the measuring code reads of time."""

    def perf_ns(self) -> int:
        """A monotonic wall clock in ns (``time.perf_counter_ns``)."""
        ...

    def thread_ns(self) -> int:
        """The calling thread's CPU time in ns (``time.thread_time_ns``)."""
        ...

    def wall(self) -> float:
        """Epoch seconds (``time.time``), for the records' block edges."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (``time.monotonic``), for waits."""
        ...

    def sleep(self, seconds: float) -> None:
        """Give up the CPU for ``seconds``."""
        ...

    def minor_faults(self) -> int | None:
        """The calling thread's minor page faults so far (None where unknown)."""
        ...


class RealClock:
    """The host's own clocks."""

    perf_ns = staticmethod(time.perf_counter_ns)
    thread_ns = staticmethod(time.thread_time_ns)
    wall = staticmethod(time.time)
    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    @staticmethod
    def minor_faults() -> int | None:
        """``getrusage(RUSAGE_THREAD)``'s minor faults (None off Linux)."""
        try:
            return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        except (AttributeError, OSError):
            return None


REAL_CLOCK: Clock = RealClock()
_active: list[Clock] = [REAL_CLOCK]


def now() -> Clock:
    """The clock in force (``REAL_CLOCK`` unless inside ``using``)."""
    return _active[-1]


@contextlib.contextmanager
def using(clock: Clock) -> Iterator[Clock]:
    """``clock`` is the one the measuring code reads for the body."""
    _active.append(clock)
    try:
        yield clock
    finally:
        _active.remove(clock)
