"""Time taken from the measuring thread inside its own timed calls (pure, no I/O).

Every timed call records its host latency and the calling thread's CPU time. Their
difference is time the thread was off the CPU while the call was timed. On a quiet core
it is small and steady from call to call (the timing window's own clock reads). A process
that time-shares the measuring core (bursts too short and sparse for the ``/proc/stat``
guard), a hypervisor that takes the vCPU away, or a fault that blocks, takes the core for
whole scheduler slices in a few calls instead. What a worker lost that way is its
**preempted share**: the off-CPU time above each block's median per call, summed over
the worker's timed calls but for its worst block, over their host time. Subtracting each
block's median keeps off-CPU time that every call spends by design (a sleep, an I/O wait)
out of the share; leaving out the worst block keeps one event (a kernel thread's one
slice, in a worker whose calls add up to a few ms) from making the share alone, where a
neighbour that shares the core comes back block after block.

The share is read inside the timing window, so it sees what the window's host latency
took. In the PR's window (the default) the wall clock encloses the thread-clock reads;
in ``tight`` it does not, and a task switch mostly lands at those reads' system calls
(measured on the AMD EPYC guest, docs/archive/PERFORMANCE-2026-11.md, "Where a task
switch lands"): there the share reads low, and the calls' latencies did not take the
switch either. The probes before each worker and case read the thread's time off the CPU
in either window.

A block whose median call is mostly off the CPU, by more than a clock read's worth
(``WAITING_BY_DESIGN``, ``WAIT_FLOOR_US``), is left out, and so is any device other than
the CPU: there the host latency includes the wait for the
device, which the calling thread may spend asleep or spinning, call by call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from embedbench.harness.records import field_of
from embedbench.harness.robust import median

__all__ = ["PREEMPTED_LIMIT", "WAITING_BY_DESIGN", "WAIT_FLOOR_US", "preempted_shares"]

# A worker that lost more than this share of its timed calls' host time to preemption is
# noisy. Quiet runs here lost at most 0.3 % at the default design and 1.4 % in a small one
# (10 blocks of 10 calls of 5 µs, where clock jitter weighs most); CPU bursts on the
# measuring core (50 ms on, 100 ms off) took 13-18 % from every worker of a default run
# and 28-48 % from the workers they hit in a small one (docs/archive/PERFORMANCE-2026-11.md,
# "CPU bursts seen in the calls"). At 5 %, over three times the worst quiet reading, the
# simulated bursts that take about 15 % of the core are labelled in every run, and none
# of the simulated quiet runs (docs/PERFORMANCE.md, "Each threshold's operating point";
# at 10 % a run in thirty of those bursts got through).
PREEMPTED_LIMIT = 0.05
# A block whose median call spends more than this share of its host time off the CPU,
# and more than WAIT_FLOOR_US, waits by design; its calls are not judged. The floor keeps
# the timer floor's empty calls judged: their host time is about twice their CPU time
# (0.6 of 1.2 µs off the CPU here: the timing window's clock reads), where a sleep or an
# I/O wait is tens of µs or more.
WAITING_BY_DESIGN = 0.5
WAIT_FLOOR_US = 5.0


def _block_lost(samples: Any) -> tuple[float, float] | None:
    """(host µs, preempted µs) of one block's calls; None when they carry no CPU-time
    column or wait by design."""
    try:
        table = np.asarray(samples, dtype=float)
    except (TypeError, ValueError):
        return None
    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] < 2:
        return None
    host, cpu = table[:, 0], table[:, 1]
    off = np.clip(host - cpu, 0.0, None)
    typical = median(off)
    if typical > max(WAITING_BY_DESIGN * median(host), WAIT_FLOOR_US):
        return None
    return float(host.sum()), float(np.clip(off - typical, 0.0, None).sum())


def preempted_shares(records: Iterable[Any]) -> dict[int, float]:
    """Each worker's preempted share (see the module docstring), by worker index (0 for
    records of one process); workers with no judged CPU block are absent."""
    blocks: dict[int, list[tuple[float, float]]] = {}
    for record in records:
        if field_of(record, "device") not in (None, "cpu"):
            continue
        lost = _block_lost(field_of(record, "samples_us"))
        if lost is not None:
            blocks.setdefault(int(field_of(record, "worker") or 0), []).append(lost)
    shares = {}
    for worker, losses in sorted(blocks.items()):
        host = sum(h for h, _ in losses)
        preempted = sum(p for _, p in losses) - max(p for _, p in losses)
        if host > 0:
            shares[worker] = preempted / host
    return shares
