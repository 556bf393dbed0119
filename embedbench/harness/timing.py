"""The timed call, the balanced block schedule and raw block records.

This module measures and records; it never summarizes (see ``stats``).
Per call it takes three clocks, in ``METRIC_ORDER``:

- host-observed latency: wall clock around the call, after an explicit device
  sync that is not counted;
- calling-thread CPU time over the same call;
- synchronized completion: wall clock from the start to after a second sync.

Where the reads sit (and so what host latency includes) is the timing window, by
default the PR script's (:mod:`embedbench.harness.windows`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from embedbench.harness.clock import now
from embedbench.harness.windows import DEFAULT_WINDOW, MEASURABLE, PR, TIGHT

__all__ = [
    "AA_SCOPE",
    "METRIC_ORDER",
    "MICRO_SCOPE",
    "TIMER_CASE",
    "TIMER_FLOOR_BLOCKS",
    "TIMER_FLOOR_CALLS",
    "TIMER_SCOPE",
    "TIMER_VARIANT",
    "BlockProbes",
    "BlockRecord",
    "Progress",
    "ReadCanary",
    "ReadMhz",
    "ReadTicks",
    "Sync",
    "WorkerBlockRecord",
    "block_schedule",
    "busy_cores",
    "busy_shares",
    "derive_seed",
    "measure_pair",
    "measure_timer_floor",
    "no_sync",
    "time_calls",
]

METRIC_ORDER: tuple[str, str, str] = (
    "host_observed_us",
    "calling_thread_cpu_us",
    "synchronized_completion_us",
)
TIMER_CASE = "timer"
TIMER_SCOPE = "overhead"
# Scope and timer names as in the original script's micro-raw.json.
MICRO_SCOPE = "whole_wrapper"
TIMER_VARIANT = "timer_floor"
AA_SCOPE = "aa_check"
TIMER_FLOOR_BLOCKS = 10
TIMER_FLOOR_CALLS = 100

Sync = Callable[[], None]
ReadMhz = Callable[[], float | None]
ReadCanary = Callable[[], float | None]
# Cumulative (busy, idle) jiffies of the other cores, per core (None where unreadable).
ReadTicks = Callable[[], Mapping[int, tuple[int, int]] | None]
Progress = Callable[[int], None]


def no_sync() -> None:
    """Device sync for the CPU: nothing to wait for."""


@dataclass(kw_only=True)
class BlockRecord:
    """One variant's calls inside one block (a row of ``micro-raw.json``)."""

    device: str
    case: str
    tokens: int
    scope: str
    variant: str
    block: int
    position: int
    iterations: int
    samples_us: list[list[float]]
    wall_start: float
    wall_end: float
    cpu_mhz_start: float | None
    cpu_mhz_end: float | None
    minor_faults: int | None = None  # page faults of the calling thread during the block
    # The GPU's SM clock at the block's start and end (NVML; None off CUDA or unreadable).
    gpu_mhz_start: float | None = None
    gpu_mhz_end: float | None = None
    # The canary (``canary``) read next to the MHz samples: one host memory gather in µs,
    # and on CUDA one host to device round trip (None where it was not taken).
    canary_us_start: float | None = None
    canary_us_end: float | None = None
    canary_device_us_start: float | None = None
    canary_device_us_end: float | None = None
    # The other cores' busy time over the block half and its end edge, in cores (the sum of
    # each one's busy share in /proc/stat: 1.0 is one core fully busy; None unobserved).
    other_cores_busy: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (the samples copied, one list per call)."""
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["samples_us"] = [list(sample) for sample in self.samples_us]
        return row


@dataclass(kw_only=True)
class WorkerBlockRecord(BlockRecord):
    """A ``BlockRecord`` measured in a worker process, with that worker's index."""

    worker: int

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> WorkerBlockRecord:
        """The record of a worker's ``records`` event (keys it does not know are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in row.items() if key in names})


def derive_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed from the run seed and labels, through SHA-256 (stable across runs)."""
    text = "\x1f".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def block_schedule(variants: Sequence[str], blocks: int, seed: int) -> list[tuple[str, ...]]:
    """The variant order of each block: half in each order, shuffled by ``seed``.

    With an odd number of blocks the seeded generator decides which order gets
    the extra block.
    """
    first, second = variants
    rng = np.random.default_rng(seed)
    half = blocks // 2
    extra = blocks - 2 * half
    n_first = half + (extra if rng.integers(2) == 0 else 0)
    orders = [(first, second)] * n_first + [(second, first)] * (blocks - n_first)
    return [orders[i] for i in rng.permutation(blocks)]


def time_calls(
    fn: Callable[[], Any], count: int, sync: Sync = no_sync, window: str = DEFAULT_WINDOW
) -> list[list[float]]:
    """Call ``fn`` ``count`` times; one [host, cpu, completion] triple in µs per call.

    ``window`` (see :mod:`embedbench.harness.windows`) places the clock reads; in both windows
    the returned value is released only after the completion clock, outside every
    window. Without a device (``sync`` is ``no_sync``) completion equals host latency.
    """
    if window == PR:
        stamps = _pr_window(fn, count, sync)
    elif window == TIGHT:
        stamps = _tight_window(fn, count, sync)
    else:
        raise ValueError(f"unknown timing window {window!r}; choose from {', '.join(MEASURABLE)}")
    return [[(w1 - w0) / 1e3, (c1 - c0) / 1e3, (w2 - w0) / 1e3] for w0, w1, w2, c0, c1 in stamps]


def _pr_window(fn: Callable[[], Any], count: int, sync: Sync) -> list[tuple[int, ...]]:
    """The PR script's order: wall, thread, call, thread, wall; sync; completion; release."""
    clock = now()
    perf, cpu, device = clock.perf_ns, clock.thread_ns, sync is not no_sync
    stamps = []
    append = stamps.append
    for _ in range(count):
        sync()
        w0 = perf()
        c0 = cpu()
        out = fn()
        c1 = cpu()
        w1 = perf()
        if device:
            sync()
            w2 = perf()
        else:
            w2 = w1
        del out
        append((w0, w1, w2, c0, c1))
    return stamps


def _tight_window(fn: Callable[[], Any], count: int, sync: Sync) -> list[tuple[int, ...]]:
    """Thread clock outside the wall clock: thread, wall, call, wall, thread; then as ``pr``."""
    clock = now()
    perf, cpu, device = clock.perf_ns, clock.thread_ns, sync is not no_sync
    stamps = []
    append = stamps.append
    for _ in range(count):
        sync()
        c0 = cpu()
        w0 = perf()
        out = fn()
        w1 = perf()
        c1 = cpu()
        if device:
            sync()
            w2 = perf()
        else:
            w2 = w1
        del out
        append((w0, w1, w2, c0, c1))
    return stamps


def _nothing() -> None:
    return None


@dataclass(frozen=True, kw_only=True)
class BlockProbes:
    """What is read at every block edge, outside the timed window: the CPU's and the GPU's
    MHz and the canary (a host copy, and a device round trip on CUDA), each None-valued
    where unavailable."""

    read_mhz: ReadMhz = _nothing
    read_gpu_mhz: ReadMhz = _nothing
    canary: ReadCanary = _nothing
    device_canary: ReadCanary = _nothing
    other_cores: ReadTicks = _nothing

    def edge(
        self, *, canary: bool = True
    ) -> tuple[float | None, float | None, float | None, float | None]:
        """(cpu MHz, gpu MHz, canary µs, device canary µs) now; without ``canary`` the
        canary's two are None (the previous block half's end read stands for them)."""
        if not canary:
            return self.read_mhz(), self.read_gpu_mhz(), None, None
        return self.read_mhz(), self.read_gpu_mhz(), self.canary(), self.device_canary()


@dataclass(kw_only=True)
class _TimingPath:
    """How every call of a block is timed: the device sync, the edge probes, the window;
    and the other cores' jiffies read at the latest edge (the next block half's start)."""

    sync: Sync
    window: str
    probes: BlockProbes
    edge_ticks: Mapping[int, tuple[int, int]] | None = None


def busy_shares(
    before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]]
) -> dict[int, float | None]:
    """Each core's busy share between two (busy, idle) jiffy readings: busy / (busy + idle)
    over the interval, None for a core on which no jiffy elapsed."""
    shares: dict[int, float | None] = {}
    for core in before.keys() & after.keys():
        busy = after[core][0] - before[core][0]
        total = busy + after[core][1] - before[core][1]
        shares[core] = busy / total if total > 0 else None
    return shares


def busy_cores(
    before: Mapping[int, tuple[int, int]] | None, after: Mapping[int, tuple[int, int]] | None
) -> float | None:
    """The cores' busy time between two jiffy readings, in cores: the sum of their busy
    shares (``busy_shares``). None when nothing elapsed on any of them."""
    if not before or not after:
        return None
    known = [share for share in busy_shares(before, after).values() if share is not None]
    return sum(known) if known else None


def _block(
    fn: Callable[[], Any], calls: int, path: _TimingPath, *, first: bool, **label: Any
) -> BlockRecord:
    """Time one block of ``calls`` calls, with wall times, MHz and page faults around it.

    ``label`` names the block: device, case, tokens, scope, variant, block, position.
    The canary is read at its end, and at its start only when it is the ``first`` of a
    series: every later block half starts the instant the one before it ended, so that
    end read is its start (one copy per edge, not two back to back). The other cores'
    jiffies are read once per edge the same way.
    """
    mhz_start, gpu_start, canary_start, device_start = path.probes.edge(canary=first)
    ticks_start = path.probes.other_cores() if first else path.edge_ticks
    clock = now()
    wall_start, faults_start = clock.wall(), clock.minor_faults()
    samples = time_calls(fn, calls, path.sync, path.window)
    faults_end, wall_end = clock.minor_faults(), clock.wall()
    mhz_end, gpu_end, canary_end, device_end = path.probes.edge()
    ticks_end = path.edge_ticks = path.probes.other_cores()
    faults = None if faults_start is None or faults_end is None else faults_end - faults_start
    return BlockRecord(
        **label,
        iterations=calls,
        samples_us=samples,
        wall_start=wall_start,
        wall_end=wall_end,
        cpu_mhz_start=mhz_start,
        cpu_mhz_end=mhz_end,
        minor_faults=faults,
        gpu_mhz_start=gpu_start,
        gpu_mhz_end=gpu_end,
        canary_us_start=canary_start,
        canary_us_end=canary_end,
        canary_device_us_start=device_start,
        canary_device_us_end=device_end,
        other_cores_busy=busy_cores(ticks_start, ticks_end),
    )


def _empty_call() -> None:
    return None


def measure_timer_floor(
    *,
    device: str,
    sync: Sync = no_sync,
    probes: BlockProbes | None = None,
    warmup: int = 0,
    window: str = DEFAULT_WINDOW,
) -> list[BlockRecord]:
    """Time an empty call through the same window as the cases, after ``warmup`` calls
    (the PR: the cases' warm-up, then 10 blocks of 100): case "timer", scope "overhead",
    variant "timer_floor". ``probes`` are read at every block edge (default: none)."""
    time_calls(_empty_call, warmup, sync, window)
    path = _TimingPath(sync=sync, window=window, probes=probes or BlockProbes())
    return [
        _block(
            _empty_call,
            TIMER_FLOOR_CALLS,
            path,
            first=block == 0,
            device=device,
            case=TIMER_CASE,
            tokens=0,
            scope=TIMER_SCOPE,
            variant=TIMER_VARIANT,
            block=block,
            position=0,
        )
        for block in range(TIMER_FLOOR_BLOCKS)
    ]


def measure_pair(
    variants: dict[str, Callable[[], Any]],
    *,
    case: str,
    tokens: int,
    warmup: int,
    blocks: int,
    iterations: int,
    seed: int,
    device: str,
    sync: Sync = no_sync,
    probes: BlockProbes | None = None,
    progress: Progress | None = None,
    check_stop: Callable[[], None] = lambda: None,
    scope: str = MICRO_SCOPE,
    first_block: int = 0,
    window: str = DEFAULT_WINDOW,
) -> list[BlockRecord]:
    """Warm up each variant, then run ``blocks`` paired blocks in the seeded order.

    ``seed`` is the already derived schedule seed for this case and length.
    ``progress`` is told how many calls finished after each warm-up and block.
    ``check_stop`` runs between blocks (and warm-ups) and may raise to stop early,
    so a stop never leaves a block with only one variant. ``scope`` labels the
    records (``AA_SCOPE`` for the A/A check). Blocks are numbered from ``first_block``
    (a worker process's share of a run continues the run's numbering). ``window`` is
    the timing window of every call, warm-ups included. ``probes`` (MHz, canary) are
    read at every block edge, outside the window.
    """
    names = tuple(variants)
    if len(names) != 2:
        raise ValueError(f"a paired measurement needs exactly two variants, got {names}")
    # Everything the blocks keep alive is allocated before the warm-up, so the warm-up
    # settles the heap the blocks then run in (see ``allocator``).
    schedule = block_schedule(names, blocks, seed)
    records: list[BlockRecord] = []
    path = _TimingPath(sync=sync, window=window, probes=probes or BlockProbes())
    for name in names:
        check_stop()
        time_calls(variants[name], warmup, sync, window)
        if progress is not None:
            progress(warmup)
    for block, order in enumerate(schedule):
        check_stop()
        for position, name in enumerate(order):
            records.append(
                _block(
                    variants[name],
                    iterations,
                    path,
                    first=not records,
                    device=device,
                    case=case,
                    tokens=tokens,
                    scope=scope,
                    variant=name,
                    block=first_block + block,
                    position=position,
                )
            )
            if progress is not None:
                progress(iterations)
    return records
