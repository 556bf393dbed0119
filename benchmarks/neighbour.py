"""A noisy neighbour on demand: a memory-bandwidth hog pinned to one core, on/off toggled.

    python benchmarks/neighbour.py --core 1 --on 3 --off 3 --seconds 60
    python benchmarks/neighbour.py --core 1 --on 1 --off 0 --seconds 60   # always on
    python benchmarks/neighbour.py --core 0 --spin --on 0.05 --off 0.1     # CPU bursts

It copies a buffer into another in a loop (numpy): by default each buffer is twice the
last-level cache (at least 64 MiB), so that the copy streams from memory and competes for
its bandwidth, not only for the cache. It saturates a share of the memory system that the
measuring core also uses, while ``/proc/stat`` of the measuring core
stays idle. ``--spin`` busy-waits instead: short bursts on the measuring core itself, too
short and sparse for the ``/proc/stat`` guard to refuse, which time-share the core with
the worker and slow the blocks they hit. It stops by itself after ``--seconds`` (and on
SIGTERM or Ctrl-C), so a test or benchmark that starts it can never leave it behind. Used
by ``benchmarks/interference.py`` and the noisy-neighbour tests; it is not part of the kit.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

BUFFER_BYTES = 64 * 2**20


def default_buffer_bytes(core: int | None) -> int:
    """Twice the last-level cache of ``core`` (sysfs), at least ``BUFFER_BYTES``."""
    from embedbench.harness.sysinfo import last_level_cache_bytes

    return max(BUFFER_BYTES, 2 * (last_level_cache_bytes(core or 0) or 0))


def hog(
    *,
    core: int | None,
    on_s: float,
    off_s: float,
    seconds: float,
    nbytes: int = BUFFER_BYTES,
    spin: bool = False,
) -> int:
    """Copy ``nbytes`` buffers (or, with ``spin``, busy-wait) for ``on_s``, sleep ``off_s``,
    repeat until ``seconds`` pass. Returns the number of copies (or spin rounds) made."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    src = np.ones(1 if spin else nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    end = time.monotonic() + seconds
    copies = 0
    while (now := time.monotonic()) < end:
        stop_on = min(end, now + on_s)
        while time.monotonic() < stop_on:
            if not spin:
                np.copyto(dst, src)
            copies += 1
        if off_s > 0:
            time.sleep(max(0.0, min(off_s, end - time.monotonic())))
    return copies


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--core", type=int, default=None, help="core to pin to (default: any)")
    parser.add_argument("--on", type=float, default=3.0, help="seconds copying per cycle")
    parser.add_argument(
        "--off", type=float, default=3.0, help="seconds idle per cycle (0: always on)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    parser.add_argument(
        "--mib", type=int, default=None, help="buffer size, MiB (default: twice the L3, >= 64)"
    )
    parser.add_argument("--spin", action="store_true", help="busy-wait instead of copying")
    args = parser.parse_args(argv)
    if args.on <= 0 or args.off < 0 or args.seconds <= 0:
        parser.error("need --on > 0, --off >= 0 and --seconds > 0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        hog(
            core=args.core,
            on_s=args.on,
            off_s=args.off,
            seconds=args.seconds,
            nbytes=(args.mib << 20) if args.mib else default_buffer_bytes(args.core),
            spin=args.spin,
        )
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
