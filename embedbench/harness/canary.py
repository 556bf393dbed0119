"""The canary: a fixed, memory-bound probe of the machine's speed, timed at every block edge.

A virtual machine hides its CPU frequency, and ``/proc/stat`` of the pinned core does not
show a neighbour that shares the memory system (another core, another guest). What both
would change, the canary sees by its effect: one copy between two preallocated buffers of
one lookup's output size, the same kind of memory traffic as the measured lookups, timed
with the harness's own clock. Its size is fixed for a whole run, so its time is comparable
between blocks, cases, workers and runs of the same geometry. On CUDA it also times one
small host to device to host round trip (what a busy PCIe link or driver would slow).

The canary never runs inside a timed window: ``timing`` reads it next to the CPU-frequency
samples, before a block's first call and after its last. It has no statistics (see
``stability``).
"""

from __future__ import annotations

import time

import torch

# One text lookup's output at the default geometry: 1172 tokens × 3584 hidden × 2 bytes.
DEFAULT_CANARY_BYTES = 1172 * 3584 * 2
# Never smaller than this: twice a large per-core L2 (2 MiB), so that the copy reaches the
# shared last-level cache and memory, as the lookups' reads from a table of a gigabyte do,
# even where a small test geometry makes the output itself tiny.
MIN_CANARY_BYTES = 4 * 2**20
# The host to device round trip: 4 KiB, small enough to be latency, not bandwidth.
DEVICE_ROUND_TRIP_BYTES = 4096
# Copies per probe (the quiet-host wait and the calibration at a worker's start).
PROBE_COPIES = 15


def canary_bytes(tokens: int, hidden_size: int, element_size: int = 2) -> int:
    """The size of one lookup's output, ``tokens`` rows of ``hidden_size`` bfloat16 values,
    or ``MIN_CANARY_BYTES`` when that is larger."""
    return max(MIN_CANARY_BYTES, int(tokens) * int(hidden_size) * int(element_size))


class Canary:
    """Two preallocated host buffers of ``nbytes`` (and a device pair on CUDA), copied on demand."""

    def __init__(self, nbytes: int = DEFAULT_CANARY_BYTES, device: str | torch.device = "cpu"):
        elements = max(1, int(nbytes) // 2)
        self.nbytes = 2 * elements
        self._src = torch.ones(elements, dtype=torch.bfloat16)
        self._dst = torch.zeros(elements, dtype=torch.bfloat16)  # zeros: every page touched
        self._dst.copy_(self._src)
        self.device = torch.device(device)
        self._host: torch.Tensor | None = None
        self._device_buffer: torch.Tensor | None = None
        if self.device.type == "cuda":
            small = DEVICE_ROUND_TRIP_BYTES // 4
            self._host = torch.ones(small, dtype=torch.float32)
            self._device_buffer = torch.empty(small, dtype=torch.float32, device=self.device)
            self.device_us()

    def copy_us(self) -> float:
        """One copy of the host buffers, in µs."""
        clock = time.perf_counter_ns
        start = clock()
        self._dst.copy_(self._src)
        return (clock() - start) / 1e3

    def device_us(self) -> float | None:
        """One host to device to host round trip, synchronized, in µs (None off CUDA)."""
        if self._host is None or self._device_buffer is None:
            return None
        clock = time.perf_counter_ns
        start = clock()
        self._device_buffer.copy_(self._host)
        self._host.copy_(self._device_buffer)
        torch.cuda.synchronize(self.device)
        return (clock() - start) / 1e3

    def probe(self, copies: int = PROBE_COPIES) -> list[float]:
        """``copies`` consecutive copies, each in µs."""
        return [self.copy_us() for _ in range(copies)]

    def describe(self) -> dict[str, object]:
        """What the canary is, for the metadata."""
        return {
            "kind": "host memory copy",
            "bytes": self.nbytes,
            "device_round_trip_bytes": DEVICE_ROUND_TRIP_BYTES if self._host is not None else None,
        }
