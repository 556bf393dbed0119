"""Keep glibc's allocator from returning memory to the kernel while timing.

On the CPU, each text lookup allocates a (tokens × hidden) bf16 buffer (8.4 MB at
1172 × 3584). glibc serves such sizes from fresh ``mmap`` regions or trims the heap
after ``free``, depending on thresholds it adjusts as the process runs; the next
call then page-faults thousands of fresh pages. Whether a process lands in that state
depends on what it allocated before, so the same case measured twice could differ
tenfold (the baseline's two live buffers trip it; the fixed form's one often does not).
Pinning the thresholds makes big buffers come from a heap that is never trimmed: after
the warm-up calls no call faults, and the numbers stop depending on allocation history.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

__all__ = ["M_MMAP_MAX", "M_TRIM_THRESHOLD", "NEVER_TRIM", "steady_allocator"]

# mallopt parameters from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
NEVER_TRIM = 2**31 - 1

_applied: dict[str, Any] | None = None


def steady_allocator() -> dict[str, Any]:
    """Set glibc's trim threshold to never and disable mmap for big blocks (once per process).

    Returns what was done, for the metadata; on a libc without ``mallopt`` nothing is
    changed and the reason is returned. The settings last for the rest of the process.
    """
    global _applied
    if _applied is not None:
        return _applied
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        _applied = {"applied": False, "reason": f"no mallopt in the C library ({name})"}
        return _applied
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    trim_ok = mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1
    mmap_ok = mallopt(M_MMAP_MAX, 0) == 1
    _applied = {
        "applied": trim_ok and mmap_ok,
        "settings": {"M_TRIM_THRESHOLD": NEVER_TRIM, "M_MMAP_MAX": 0},
        "reason": None if trim_ok and mmap_ok else "mallopt refused a setting",
    }
    return _applied
