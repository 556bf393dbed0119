"""The host a run measures on, as the run's pipeline sees it: the real one or a simulated one.

``runner.run`` goes through one sequence (lock, guards, workers one after the other,
guards between them, results); what it asks of the machine goes through a ``RunHost``:
the host-wide lock, the I/O and contention guards, the cores, the parent's affinity, how
one share is measured (a fresh worker process, or this process), where this host's
quiet reference is kept, the memory system's ceiling on the measuring core, and how the
forms' instructions are counted (``--counts``).
``RealHost`` is the machine; ``embedbench.sim`` has a simulated one, which measures every
share in this process against a seeded model of a host.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from embedbench.harness import hostref
from embedbench.harness.bandwidth import MemoryCeiling, measure_ceiling
from embedbench.harness.countrun import COUNT_DEVICE, Counts, count_share
from embedbench.harness.hostlock import host_lock
from embedbench.harness.interrupts import StopFlag
from embedbench.harness.ioguard import IoReading, wait_for_quiet_io
from embedbench.harness.isolation import ContentionReading, allowed_cores, check_contention
from embedbench.harness.parentcore import ParentAffinity, pinned_away
from embedbench.measure import Backend, Emit, Share, measure_share
from embedbench.omni import synthetic
from embedbench.spawn import EventSink, run_worker, worker_environment

__all__ = ["RealHost", "RunHost", "host_reference_path"]

Log = Callable[[str], None]


class RunHost(Protocol):
    """What a run's pipeline asks of the machine it measures on."""

    def lock(self) -> AbstractContextManager[Any]:
        """The host-wide lock (its value has ``to_json()``)."""
        ...

    def allowed_cores(self) -> list[int]:
        """The cores this process may run on."""
        ...

    def quiet_io(self, *, allow_busy: bool, log: Log, window_s: float | None = None) -> IoReading:
        """Wait for writeback and iowait to settle (``ioguard.wait_for_quiet_io``)."""
        ...

    def contention(
        self,
        core: int,
        *,
        allow_busy: bool,
        candidates: list[int],
        window_s: float | None = None,
    ) -> ContentionReading:
        """The measuring core's busy share (``isolation.check_contention``)."""
        ...

    def pinned_away(self, core: int, allowed: list[int]) -> AbstractContextManager[ParentAffinity]:
        """This process off the measuring core while shares are measured elsewhere."""
        ...

    def reference_path(self) -> Path:
        """Where this host's stored quiet levels live."""
        ...

    def memory_ceiling(self, core: int) -> MemoryCeiling:
        """The streaming-copy ceiling on ``core`` (``bandwidth.measure_ceiling``), taken
        by this process before any share is measured."""
        ...

    def measure_here(
        self,
        share: Share,
        emit: Emit,
        *,
        check_stop: Callable[[], None],
        before_case: Callable[[str, int], None],
        backend: Backend | None = None,
    ) -> None:
        """Measure ``share`` in this process (``processes=1``, or a pair of callables);
        ``backend`` says what is measured (default: the share's own)."""
        ...

    def run_worker(
        self,
        share: Share,
        collector: EventSink,
        stop: StopFlag,
        log: Log,
        *,
        spawning: Callable[[], AbstractContextManager[None]],
        env: dict[str, str] | None = None,
    ) -> None:
        """Measure ``share`` in a worker of its own (``env``: its environment), feeding its
        events to ``collector``."""
        ...

    def count_calls(
        self,
        share: Share,
        *,
        measured_device: str,
        log: Log,
        env: dict[str, str] | None = None,
    ) -> Counts:
        """``--counts``: each form's instructions and simulated cache misses per call, from
        one counting process under valgrind (``harness.countrun``) on the CPU, after the
        timing; ``env``: its environment (default: a worker's)."""
        ...


class RealHost:
    """The machine this process runs on."""

    def lock(self) -> AbstractContextManager[Any]:
        return host_lock()

    def allowed_cores(self) -> list[int]:
        return allowed_cores()

    def quiet_io(self, *, allow_busy: bool, log: Log, window_s: float | None = None) -> IoReading:
        return wait_for_quiet_io(allow_busy=allow_busy, iowait_window_s=window_s, log=log)

    def contention(
        self,
        core: int,
        *,
        allow_busy: bool,
        candidates: list[int],
        window_s: float | None = None,
    ) -> ContentionReading:
        return check_contention(
            core, allow_busy=allow_busy, candidates=candidates, window_s=window_s
        )

    def pinned_away(self, core: int, allowed: list[int]) -> AbstractContextManager[ParentAffinity]:
        return pinned_away(core, allowed)

    def reference_path(self) -> Path:
        return host_reference_path()

    def memory_ceiling(self, core: int) -> MemoryCeiling:
        return measure_ceiling(core)

    def measure_here(
        self,
        share: Share,
        emit: Emit,
        *,
        check_stop: Callable[[], None],
        before_case: Callable[[str, int], None],
        backend: Backend | None = None,
    ) -> None:
        measure_share(share, emit, check_stop=check_stop, before_case=before_case, backend=backend)

    def run_worker(
        self,
        share: Share,
        collector: EventSink,
        stop: StopFlag,
        log: Log,
        *,
        spawning: Callable[[], AbstractContextManager[None]],
        env: dict[str, str] | None = None,
    ) -> None:
        run_worker(share, collector, stop, log, spawning=spawning, env=env)

    def count_calls(
        self,
        share: Share,
        *,
        measured_device: str,
        log: Log,
        env: dict[str, str] | None = None,
    ) -> Counts:
        counted = dataclasses.replace(share, device=COUNT_DEVICE, worker=0)
        environment = worker_environment() if env is None else env
        return count_share(
            counted.to_json(), measured_device=measured_device, log=log, env=environment
        )


def host_reference_path() -> Path:
    """Where this host's quiet memory levels are kept: ``$EMBEDBENCH_HOST_REFERENCE``, else
    ``host-reference.json`` in the cache directory (docs/method.md)."""
    env = os.environ.get(hostref.REFERENCE_ENV, "").strip()
    return Path(env).expanduser() if env else synthetic.synthetic_cache_dir() / hostref.FILE_NAME
