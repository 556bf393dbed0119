"""The canary: a fixed, memory-bound probe of the machine's speed, timed at every block edge.

A virtual machine hides its CPU frequency, and ``/proc/stat`` of the pinned core does not
show a neighbour that shares the memory system (another core, another guest). What both
would change, the canary sees by its effect. It does what a lookup does: it gathers half
a lookup's rows (never under 4 MiB), at random, from a table larger than the last-level
cache into a preallocated buffer, timed with the harness's own clock. The table is the measured
embedding table itself where that lives in host memory and is large enough, else a
buffer of the canary's own. Each read takes another of a fixed set of random row sets, so
every read finds its rows in memory, not in a cache, as the lookups do. Its size is fixed
for a whole run, so its time is comparable between blocks, cases, workers and runs of the
same geometry. On CUDA it also times one small host to device to host round trip (what a
busy PCIe link or driver would slow).

Why a gather and not a copy of two small buffers: a copy of 8 MiB stays in a large
shared L3 and missed what slowed the lookups on the CI machine (docs/archive/PERFORMANCE-2026-11.md,
"Interference").

The canary never runs inside a timed window: ``timing`` reads it next to the CPU-frequency
samples, before a block's first call and after its last. It has no statistics (see
``stability``).
"""

from __future__ import annotations

import functools
import hashlib
import math

import torch

from embedbench.harness import sysinfo
from embedbench.harness.clock import now

__all__ = [
    "ASSUMED_LLC_BYTES",
    "DEFAULT_ROWS",
    "DEFAULT_ROW_BYTES",
    "DEVICE_ROUND_TRIP_BYTES",
    "MAX_SOURCE_BYTES",
    "MIN_READ_BYTES",
    "MIN_SOURCE_BYTES",
    "PACE_BYTES",
    "PROBE_COPIES",
    "ROWS_SHARE",
    "ROW_SETS",
    "Canary",
    "source_bytes",
]

# One text lookup at the default geometry: 1172 rows of 3584 bfloat16 values.
DEFAULT_ROWS = 1172
# The canary gathers this share of a lookup's rows: half a lookup moved as much as a whole
# one under a memory neighbour, at half the cost (docs/archive/PERFORMANCE-2026-11.md,
# "Interference").
ROWS_SHARE = 0.5
DEFAULT_ROW_BYTES = 3584 * 2
# Never fewer bytes a read than this: twice a large per-core L2 (2 MiB), so that a small
# test geometry still reads memory, not a few cache lines.
MIN_READ_BYTES = 4 * 2**20
# The table the rows come from: at least twice the last-level cache, so its rows are in
# memory; within these bounds when the canary allocates its own.
MIN_SOURCE_BYTES = 64 * 2**20
MAX_SOURCE_BYTES = 2**30
# Where sysfs does not say how large the last-level cache is.
ASSUMED_LLC_BYTES = 64 * 2**20
# Random row sets, taken in turn (a read never repeats the one before it).
ROW_SETS = 16
# The host to device round trip: 4 KiB, small enough to be latency, not bandwidth.
DEVICE_ROUND_TRIP_BYTES = 4096
# Reads per probe (the quiet-host wait before a worker and every case); the first is
# dropped. Seventeen half-lookup reads span about as long (14 ms) as the nine whole-lookup
# reads did; nine half-lookup reads labelled CPU bursts on the measuring core in 2 of 4
# runs against 4 of 4 (docs/archive/PERFORMANCE-2026-11.md, "Interference").
PROBE_COPIES = 17
# The pace: a BLAKE2b hash of this many bytes, which stay in the core's L1 cache. It moves
# with the core's own speed (frequency, a hypervisor's time slices) and not with the
# memory system, so the canary over the pace is the memory system's speed alone, the
# level that a stored reference of this host can judge (``stability.memory_level``).
PACE_BYTES = 16 * 1024


def source_bytes(llc_bytes: int | None) -> int:
    """How large a table the canary needs: twice the last-level cache, within bounds."""
    llc = llc_bytes or ASSUMED_LLC_BYTES
    return min(MAX_SOURCE_BYTES, max(MIN_SOURCE_BYTES, 2 * llc))


@functools.lru_cache(maxsize=2)
def _own_source(row_bytes: int, nbytes: int) -> torch.Tensor:
    """A table of the canary's own, allocated and touched once per process."""
    width = max(1, row_bytes // 2)
    rows = max(1, nbytes // (2 * width))
    return torch.ones(rows, width, dtype=torch.bfloat16)


class Canary:
    """A gather of half of ``rows`` (one lookup's) random rows from a table larger than the
    last-level cache (and a host↔device round trip on CUDA), timed on demand.

    ``table`` is the measured embedding table: used as the source when it is a 2-D host
    tensor of at least ``source_bytes`` bytes, else the canary allocates its own of rows
    ``row_bytes`` wide (the table's row width when one is given).
    """

    def __init__(
        self,
        rows: int = DEFAULT_ROWS,
        device: str | torch.device = "cpu",
        *,
        table: torch.Tensor | None = None,
        row_bytes: int = DEFAULT_ROW_BYTES,
        llc_bytes: int | None = None,
        core: int = 0,
    ):
        self.llc_bytes = (
            llc_bytes if llc_bytes is not None else sysinfo.last_level_cache_bytes(core)
        )
        needed = source_bytes(self.llc_bytes)
        matrix = table if table is not None and table.dim() == 2 else None
        if matrix is not None:
            row_bytes = matrix.shape[1] * matrix.element_size()
        if (
            matrix is not None
            and matrix.device.type == "cpu"
            and matrix.numel() * matrix.element_size() >= needed
        ):
            self._source, self.source = matrix, "embedding table"
        else:
            self._source, self.source = _own_source(int(row_bytes), needed), "own buffer"
        width_bytes = self._source.shape[1] * self._source.element_size()
        self.rows = max(math.ceil(int(rows) * ROWS_SHARE), math.ceil(MIN_READ_BYTES / width_bytes))
        self.nbytes = self.rows * width_bytes
        self._out = torch.empty(self.rows, self._source.shape[1], dtype=self._source.dtype)
        generator = torch.Generator().manual_seed(0)
        self._row_sets = [
            torch.randint(0, self._source.shape[0], (self.rows,), generator=generator)
            for _ in range(ROW_SETS)
        ]
        self._turn = 0
        self._pace_payload = bytes(PACE_BYTES)
        # Every row set read once before the first timed read, so that the worker's
        # first probes find the rows as later ones do. With one warm read, a worker's
        # second probe often read far faster than the rest (14 of 40 workers below 0.8x
        # their median), set the worker's quietest level too low, and later probes then
        # failed the level rule (docs/archive/PERFORMANCE-2026-11.md, "The canary's warm pass").
        for _ in range(ROW_SETS):
            self.read_us()
        self.device = torch.device(device)
        self._host: torch.Tensor | None = None
        self._device_buffer: torch.Tensor | None = None
        if self.device.type == "cuda":
            small = DEVICE_ROUND_TRIP_BYTES // 4
            self._host = torch.ones(small, dtype=torch.float32)
            self._device_buffer = torch.empty(small, dtype=torch.float32, device=self.device)
            self.device_us()

    def read_us(self) -> float:
        """One gather of the next row set, in µs."""
        rows = self._row_sets[self._turn]
        self._turn = (self._turn + 1) % ROW_SETS
        clock = now().perf_ns
        start = clock()
        torch.index_select(self._source, 0, rows, out=self._out)
        return (clock() - start) / 1e3

    def device_us(self) -> float | None:
        """One host to device to host round trip, synchronized, in µs (None off CUDA)."""
        if self._host is None or self._device_buffer is None:
            return None
        clock = now().perf_ns
        start = clock()
        self._device_buffer.copy_(self._host)
        self._host.copy_(self._device_buffer)
        torch.cuda.synchronize(self.device)
        return (clock() - start) / 1e3

    def timed_probe(self, copies: int = PROBE_COPIES) -> tuple[list[float], list[float]]:
        """``copies`` consecutive reads: each one's time and how long the calling thread
        was off the CPU around it, in µs. The wall clock encloses the thread's CPU clock
        reads: a task switch lands at such a system call's return (measured here), so a
        wall window inside them would never see one."""
        wall_clock, cpu_clock = now().perf_ns, now().thread_ns
        reads: list[float] = []
        off_cpu: list[float] = []
        for _ in range(copies):
            wall, cpu = wall_clock(), cpu_clock()
            reads.append(self.read_us())
            cpu, wall = cpu_clock() - cpu, wall_clock() - wall
            off_cpu.append(max(0, wall - cpu) / 1e3)
        return reads, off_cpu

    def pace_us(self) -> float:
        """One hash of ``PACE_BYTES`` held in the L1 cache, in µs: the core's own speed."""
        payload = self._pace_payload
        clock = now().perf_ns
        start = clock()
        hashlib.blake2b(payload).digest()
        return (clock() - start) / 1e3

    def pace_probe(self, copies: int = PROBE_COPIES) -> list[float]:
        """``copies`` consecutive pace reads, each in µs (the first warms the code path)."""
        return [self.pace_us() for _ in range(copies)]

    def describe(self) -> dict[str, object]:
        """What the canary is, for the metadata."""
        return {
            "kind": "host memory gather",
            "rows": self.rows,
            "bytes": self.nbytes,
            "source": self.source,
            "source_bytes": self._source.numel() * self._source.element_size(),
            "last_level_cache_bytes": self.llc_bytes,
            "device_round_trip_bytes": DEVICE_ROUND_TRIP_BYTES if self._host is not None else None,
            "pace": f"blake2b of {PACE_BYTES} bytes",
        }
