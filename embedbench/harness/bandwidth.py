"""The memory system's ceiling on the measuring core: a streaming copy, timed once per run.

``measure_ceiling(core)`` copies a buffer well past the last-level cache (``buffer_bytes``:
8 × the cache sysfs reports, within ``MIN_BUFFER_BYTES`` and ``MAX_BUFFER_BYTES``; the
maximum where sysfs does not say) with ``numpy.copyto``, once untimed (every page of both
buffers touched) and then up to ``REPETITIONS`` times on the kit's clock
(``harness.clock``), at least ``MIN_REPETITIONS`` and no more once ``BUDGET_S`` has
passed (a host whose memory is busy makes every copy slow), and keeps the best: bytes
moved (read + written, 2 × the buffer) over its seconds. The
calling thread runs on ``core`` for the copy and goes back to its own cores after, also
when the copy fails. The run's parent measures it before the first worker starts, so no
timed process ever holds the buffers (docs/method.md, "The memory ceiling").

A failure (no memory for the buffers, a core this process may not use) is a reading
with ``bytes_per_s`` None and its ``reason``: the run goes on without a ceiling.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from embedbench.harness import clock, sysinfo

__all__ = [
    "BUDGET_S",
    "BUFFER_ENV",
    "CACHE_MULTIPLE",
    "MAX_BUFFER_BYTES",
    "METHOD",
    "MIN_BUFFER_BYTES",
    "MIN_REPETITIONS",
    "REPETITIONS",
    "MemoryCeiling",
    "buffer_size",
    "copy_rate",
    "measure_ceiling",
]

MIB = 2**20
CACHE_MULTIPLE = 8  # the buffer, in last-level caches
MIN_BUFFER_BYTES = 64 * MIB
MAX_BUFFER_BYTES = 256 * MIB  # both buffers: 512 MiB; about 0.3 s on a 2-vCPU VM
REPETITIONS = 5  # a copy now and then runs at half speed on a VM: the best of 5 does not
MIN_REPETITIONS = 2
BUDGET_S = 0.5  # no further timed copy once measuring has taken this long
# Each buffer's MiB, where set: the test suite's runs take a small one (their ceiling is
# never read as the host's), as they take short guard windows.
BUFFER_ENV = "EMBEDBENCH_CEILING_BUFFER_MIB"
METHOD = "numpy.copyto of one buffer into another, best of the repetitions; read + written"


@dataclass(frozen=True)
class MemoryCeiling:
    """One reading of the streaming-copy ceiling (``to_json``: metadata.json's
    ``memory_ceiling``)."""

    bytes_per_s: float | None
    buffer_bytes: int
    repetitions: int  # the timed copies made
    core: int | None
    best_s: float | None = None  # the best copy's seconds
    seconds: float = 0.0  # what measuring it took: allocation, the untimed copy, the timed
    last_level_cache_bytes: int | None = None
    method: str = METHOD
    reason: str | None = None  # why ``bytes_per_s`` is None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "bytes_per_s": self.bytes_per_s,
            "buffer_bytes": self.buffer_bytes,
            "repetitions": self.repetitions,
            "core": self.core,
            "best_s": self.best_s,
            "seconds": self.seconds,
            "last_level_cache_bytes": self.last_level_cache_bytes,
            "method": self.method,
            "reason": self.reason,
        }


def buffer_size(last_level_cache_bytes: int | None) -> int:
    """Each buffer's bytes: ``CACHE_MULTIPLE`` last-level caches, within the bounds (the
    maximum where the cache is unknown); ``BUFFER_ENV``'s MiB where that is set."""
    if os.environ.get(BUFFER_ENV):
        return int(float(os.environ[BUFFER_ENV]) * MIB)
    if not last_level_cache_bytes:
        return MAX_BUFFER_BYTES
    return int(
        min(max(CACHE_MULTIPLE * last_level_cache_bytes, MIN_BUFFER_BYTES), MAX_BUFFER_BYTES)
    )


def copy_rate(buffer_bytes: int, seconds: float) -> float:
    """Bytes moved per second by one copy of ``buffer_bytes``: read and written, so twice
    the buffer, over ``seconds``."""
    if seconds <= 0:
        raise ValueError(f"a copy takes a positive time, got {seconds!r} s")
    return 2.0 * buffer_bytes / seconds


def _timed_copies(buffer_bytes: int, repetitions: int, deadline_ns: float) -> list[float]:
    """The seconds of each timed copy, after one untimed one: ``repetitions`` of them, or
    fewer (never below ``MIN_REPETITIONS``) once the clock passes ``deadline_ns``.

    Both buffers are one anonymous mapping of their own, its pages faulted in at once
    where the kernel can (``MAP_POPULATE``: faster than a fault per page, and no
    transparent huge page to compact) and unmapped after, so the heap of this process
    is as it was (no allocator threshold moves)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate
    mapping = mmap.mmap(-1, 2 * buffer_bytes, flags=flags)
    copies: list[float] = []
    try:
        both = np.frombuffer(mapping, dtype=np.uint8)
        source, target = both[:buffer_bytes], both[buffer_bytes:]
        if not populate:  # unwritten pages read as the shared zero page, never from memory
            source.fill(1)
        np.copyto(target, source)  # every page touched, outside the timing
        read = clock.now().perf_ns
        for _ in range(repetitions):
            start = read()
            np.copyto(target, source)
            end = read()
            copies.append((end - start) / 1e9)
            if len(copies) >= MIN_REPETITIONS and end >= deadline_ns:
                break
        del both, source, target  # no view may outlive the mapping
    finally:
        mapping.close()
    return copies


def measure_ceiling(
    core: int,
    *,
    buffer_bytes: int | None = None,
    repetitions: int = REPETITIONS,
) -> MemoryCeiling:
    """The streaming-copy ceiling on ``core`` (see the module doc); ``buffer_bytes`` by
    default from the last-level cache sysfs reports for ``core``."""
    cache = sysinfo.last_level_cache_bytes(core)
    size = buffer_size(cache) if buffer_bytes is None else int(buffer_bytes)
    started = clock.now().perf_ns()
    fields: dict[str, Any] = {"buffer_bytes": size, "last_level_cache_bytes": cache}

    def took() -> float:
        return (clock.now().perf_ns() - started) / 1e9

    try:
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {core})
    except (AttributeError, OSError) as exc:
        reason = f"could not run on cpu core {core}: {getattr(exc, 'strerror', None) or exc}"
        return MemoryCeiling(
            None, repetitions=0, core=None, seconds=took(), reason=reason, **fields
        )
    try:
        copies = _timed_copies(size, repetitions, started + BUDGET_S * 1e9)
    except (MemoryError, OSError, ValueError) as exc:
        reason = f"no copy of two {size // MIB} MiB buffers: {exc}"
        return MemoryCeiling(
            None, repetitions=0, core=core, seconds=took(), reason=reason, **fields
        )
    finally:
        os.sched_setaffinity(0, saved)
    best = min(copies, default=0.0)
    fields["repetitions"] = len(copies)
    if best <= 0:
        reason = "the clock did not move over a copy"
        return MemoryCeiling(None, core=core, seconds=took(), reason=reason, **fields)
    return MemoryCeiling(copy_rate(size, best), core=core, best_s=best, seconds=took(), **fields)
