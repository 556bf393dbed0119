"""Known amounts of work for the self-test, and a log the work keeps of its own calls.

- ``spin_us``: a busy-wait on the harness's own clock, exact by construction (an
  arithmetic check: noise never lands on it);
- ``hash_work``: real work (BLAKE2b over a fixed buffer), linear in its size, so that
  preemption, cache and frequency effects land on it as on a real call;
- ``sleep_us``: an off-CPU wait, which host latency sees and the calling thread's CPU
  time does not;
- ``CallLog``: each carrier records its own name when called, so the order the harness
  really ran them in can be checked against what its records say.

``difference_us`` measures what a carrier pair differs by in the plainest way, outside
the harness: alternate single calls timed with the wall clock, median per side.

Every read of time here (the spins' deadlines, the sleeps, the rate probe and the
calibration loop) goes through the one clock seam, ``harness.clock.now()``: the host's
own clocks, or whatever clock ``clock.using`` has put in place. ``Carriers`` bundles what
the self-test uses (``REAL_CARRIERS``; ``embedbench.sim`` has a simulated host's).
"""

from __future__ import annotations

import hashlib
import random
import statistics
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from embedbench.harness import clock
from embedbench.harness.ledger import CALLS_PER_LEDGER
from embedbench.harness.robust import robust_sd

__all__ = [
    "CALIBRATION_PAIRS",
    "CALIBRATION_ROUNDS",
    "PROBE_BYTES",
    "PROBE_REPEATS",
    "REAL_CARRIERS",
    "Calibration",
    "Call",
    "CallLog",
    "Carriers",
    "bytes_for_us",
    "chain",
    "difference_us",
    "hash_ns_per_byte",
    "hash_work",
    "pinned",
    "sleep_us",
    "spin_us",
    "spinner",
]

Call = Callable[[], None]

_SEED = 7451
_buffer = b""


def spin_us(duration_us: float) -> None:
    """Busy-wait until ``duration_us`` microseconds have passed (a deadline on the wall
    clock in force, ``clock.now().perf_ns``)."""
    read = clock.now().perf_ns
    deadline = read() + round(duration_us * 1000.0)
    while read() < deadline:
        pass


def spinner(duration_us: float) -> Call:
    """A zero-argument call that spins for ``duration_us``."""

    def call() -> None:
        spin_us(duration_us)

    return call


def _data(nbytes: int) -> memoryview:
    """The first ``nbytes`` of one seeded buffer, grown on demand (never in a timed call)."""
    global _buffer
    if len(_buffer) < nbytes:
        _buffer = random.Random(_SEED).randbytes(max(nbytes, 2 * len(_buffer)))
    return memoryview(_buffer)[:nbytes]


def hash_work(nbytes: int) -> Call:
    """A zero-argument call that hashes ``nbytes`` of a fixed buffer with BLAKE2b."""
    data = _data(nbytes)
    blake2b = hashlib.blake2b

    def call() -> None:
        blake2b(data).digest()

    return call


# How bytes_for_us probes the hashing rate, and how difference_us calibrates.
PROBE_BYTES = 1 << 20
PROBE_REPEATS = 15
CALIBRATION_ROUNDS = 9
CALIBRATION_PAIRS = 21


def hash_ns_per_byte(work: Callable[[int], Call] | None = None) -> float:
    """This core's BLAKE2b cost in ns per byte: the median of ``PROBE_REPEATS`` timed probes
    (of ``work``, a carrier like ``hash_work``, which it defaults to)."""
    probe = (work or hash_work)(PROBE_BYTES)
    probe()
    read = clock.now().perf_ns
    times = []
    for _ in range(PROBE_REPEATS):
        start = read()
        probe()
        times.append(read() - start)
    return statistics.median(times) / PROBE_BYTES


def bytes_for_us(target_us: float, ns_per_byte: float | None = None) -> int:
    """How many bytes ``hash_work`` hashes in about ``target_us`` at ``ns_per_byte``.

    Without a rate, this probes one (``hash_ns_per_byte``); pass the same rate to size
    several carriers so their ratios are exact rather than two probes apart.
    """
    if target_us <= 0:
        raise ValueError(f"target_us must be positive, not {target_us}")
    rate = hash_ns_per_byte() if ns_per_byte is None else ns_per_byte
    if rate <= 0:
        raise ValueError(f"ns_per_byte must be positive, not {rate}")
    return max(1, round(target_us * 1000.0 / rate))


def sleep_us(duration_us: float) -> Call:
    """A zero-argument call that sleeps (off the CPU) for at least ``duration_us``, on the
    clock in force when it is called."""
    seconds = duration_us / 1e6

    def call() -> None:
        clock.now().sleep(seconds)

    return call


def chain(*calls: Call) -> Call:
    """One call that makes each of ``calls`` in turn."""

    def call() -> None:
        for fn in calls:
            fn()

    return call


@dataclass
class Calibration:
    """What the plain alternating loop measured: the difference and its rounds."""

    difference_us: float
    rounds_us: list[float]
    spread_us: float


def difference_us(slow: Call, fast: Call) -> Calibration:
    """Median time of ``slow`` minus that of ``fast``, from alternating single calls.

    ``CALIBRATION_ROUNDS`` rounds of ``CALIBRATION_PAIRS`` alternating calls each; the
    difference of the per-round medians, then the median over rounds. ``spread_us`` is a
    standard error of that median from the rounds' spread (1.4826 · MAD / √rounds · 1.25).
    """
    read = clock.now().perf_ns
    slow(), fast()
    per_round = []
    for _ in range(CALIBRATION_ROUNDS):
        times: dict[int, list[int]] = {0: [], 1: []}
        for i in range(2 * CALIBRATION_PAIRS):
            side = i % 2
            fn = slow if side == 0 else fast
            start = read()
            fn()
            times[side].append(read() - start)
        per_round.append((statistics.median(times[0]) - statistics.median(times[1])) / 1e3)
    centre = statistics.median(per_round)
    error = 1.25 * robust_sd(per_round, centre) / CALIBRATION_ROUNDS**0.5
    return Calibration(centre, per_round, error)


@dataclass
class CallLog:
    """The names of the carriers in the order they were called (written by the carriers)."""

    names: list[str] = field(default_factory=list)

    def carrier(self, name: str, fn: Call) -> Call:
        """``fn``, logging ``name`` before every call."""
        append = self.names.append

        def call() -> None:
            append(name)
            fn()

        return call

    def block_orders(self, warmup: int, iterations: int) -> list[tuple[str, ...]] | None:
        """The carrier order of each block, read off the log; None if the log is not the
        work ledger's untimed call and a warm-up of each carrier, followed by homogeneous
        runs of ``iterations`` calls."""
        untimed = Counter(self.names[: 2 * CALLS_PER_LEDGER])
        if len(untimed) != 2 or set(untimed.values()) != {CALLS_PER_LEDGER}:
            return None
        timed = self.names[2 * (CALLS_PER_LEDGER + warmup) :]
        if not timed or len(timed) % (2 * iterations):
            return None
        chunks = [timed[i : i + iterations] for i in range(0, len(timed), iterations)]
        if any(len(set(chunk)) != 1 for chunk in chunks):
            return None
        firsts = [chunk[0] for chunk in chunks]
        orders = [tuple(firsts[i : i + 2]) for i in range(0, len(firsts), 2)]
        return orders if all(len(set(order)) == 2 for order in orders) else None


def pinned(core: int) -> AbstractContextManager[Any]:
    """``isolation.isolated(core)``: the calling thread pinned to ``core`` and isolated
    (imported here, late: the isolation imports torch)."""
    from embedbench.harness.isolation import isolated

    return isolated(core)


@dataclass(frozen=True)
class Carriers:
    """What the self-test times, and how it pins its own loops: this host's carriers
    (``REAL_CARRIERS``), or another's, such as a simulated host's (``embedbench.sim``)."""

    spinner: Callable[[float], Call] = spinner
    hash_work: Callable[[int], Call] = hash_work
    sleep_us: Callable[[float], Call] = sleep_us
    pinned: Callable[[int], AbstractContextManager[Any]] = pinned

    def hash_ns_per_byte(self) -> float:
        """The rate of this bundle's ``hash_work`` (``hash_ns_per_byte`` of it)."""
        return hash_ns_per_byte(self.hash_work)


REAL_CARRIERS = Carriers()
