"""Keep the parent process off the measuring core while its workers time.

``pinned_away(core, allowed)`` moves every thread of this process onto the allowed cores
other than ``core`` for the body and puts each one back on exit, also when the body
raises or is interrupted. With no other allowed core nothing moves, and the reading says
why. A child inherits the affinity of the thread that starts it, so a worker is started
inside ``ParentAffinity.spawning()``: the calling thread is back on its own cores for
that moment only.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["TASKS", "ParentAffinity", "measuring_here", "pinned_away"]

TASKS = Path("/proc/self/task")


@dataclass(frozen=True)
class ParentAffinity:
    """Where the parent ran while measuring (``cores``) and, when that includes the
    measuring core, why (``reason``); ``saved`` holds the calling thread's cores before."""

    cores: list[int]
    reason: str | None = None
    saved: frozenset[int] = field(default=frozenset(), repr=False)

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """The calling thread on its saved cores for the body (a child started there
        inherits them), then back where it was."""
        if not self.saved:
            yield
            return
        current = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.saved)
        try:
            yield
        finally:
            os.sched_setaffinity(0, current)


def measuring_here(core: int) -> ParentAffinity:
    """One process: the parent is the measuring process, pinned to ``core`` itself."""
    return ParentAffinity([core], "one process: the parent measures, pinned to the core")


def _threads() -> list[int]:
    """The native ids of this process's threads (just this one where /proc is not there)."""
    try:
        return sorted(int(name) for name in os.listdir(TASKS))
    except (OSError, ValueError):
        return [threading.get_native_id()]


def _set_all(cores: set[int], tids: Iterable[int], saved: dict[int, set[int]]) -> None:
    """Put each thread of ``tids`` on ``cores``, noting in ``saved`` each moved thread's
    cores before (so that a failure part way can still put them back)."""
    for tid in tids:
        try:
            before = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cores)
        except ProcessLookupError:  # the thread ended meanwhile
            continue
        saved[tid] = before


def _restore(saved: dict[int, set[int]], known: set[int], default: set[int]) -> None:
    """Every moved thread back on its saved cores, one started since (not ``known``) on
    ``default``; the others stay as they are."""
    for tid in _threads():
        cores = saved.get(tid, None if tid in known else default)
        if cores is not None:
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, cores)


@contextlib.contextmanager
def pinned_away(core: int, allowed: Iterable[int]) -> Iterator[ParentAffinity]:
    """Every thread of this process on ``allowed`` minus ``core`` for the body, restored
    after (also on error or Ctrl-C); with no other allowed core, nothing moves."""
    own = os.sched_getaffinity(0)
    others = sorted(set(allowed) - {core})
    if not others:
        cores = sorted(own)
        yield ParentAffinity(
            cores, f"only cpu core {core} is allowed: the parent shares it with the workers"
        )
        return
    saved: dict[int, set[int]] = {}
    known = set(_threads())
    try:
        _set_all(set(others), known, saved)
        reading = ParentAffinity(others, saved=frozenset(own))
    except OSError as exc:
        _restore(saved, known, own)
        saved = {}
        reading = ParentAffinity(
            sorted(own), f"could not leave cpu core {core}: {exc.strerror or exc}"
        )
    try:
        yield reading
    finally:
        if saved:
            _restore(saved, known, own)
