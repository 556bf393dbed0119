"""Factories for ``paired_benchmark("support.paired_factories:NAME", ...)`` (tests only).

Worker processes import this module by name, so every variant is built here, at module
level, from plain functions: busy-waits of a known length on ``time.perf_counter_ns``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Variants = dict[str, Callable[[], None]]


def _spin(us: float) -> Callable[[], None]:
    """A call that busy-waits ``us`` microseconds."""
    ns = int(us * 1e3)

    def call() -> None:
        end = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < end:
            pass

    return call


def spins() -> Variants:
    """A known difference: 300 µs against 200 µs (a third less)."""
    return {"baseline": _spin(300), "fixed": _spin(200)}


def same() -> Variants:
    """An A/A pair: one function under both labels."""
    call = _spin(200)
    return {"baseline": call, "fixed": call}


def wrong_keys() -> Variants:
    """Not the two variants: ``candidate`` instead of ``fixed``."""
    return {"baseline": _spin(1), "candidate": _spin(1)}


def extra_key() -> Variants:
    """The two variants and one more."""
    return {"baseline": _spin(1), "fixed": _spin(1), "other": _spin(1)}


def not_a_dict() -> Any:
    """Two callables, but in a list."""
    return [_spin(1), _spin(1)]


def not_callable() -> Any:
    """The right keys, one value that cannot be called."""
    return {"baseline": _spin(1), "fixed": 200}


def raises() -> Variants:
    """A factory that fails when called."""
    raise RuntimeError("no such device")


NOT_A_FUNCTION = 3
