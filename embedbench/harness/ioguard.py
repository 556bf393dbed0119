"""I/O guard: wait while the kernel is still writing back, refuse if it does not finish.

A run that starts while the page cache holds a gigabyte of dirty pages (say, the
synthetic checkpoint just written) is measured next to the kernel's flusher threads
and a busy disk; its first blocks are noisier than the rest. ``wait_for_quiet_io()``
reads ``Dirty`` + ``Writeback`` from ``/proc/meminfo`` and the iowait share from the
aggregate ``cpu`` line of ``/proc/stat``; while either is above its threshold it logs
one line and polls, up to ``max_wait_s``. If I/O settles it returns the reading (with
how long it waited); if not, it refuses with ``IoBusyError`` (a ``ContentionError``,
exit 2), unless told to measure anyway, in which case the reading labels the results.

No torch import: this module only reads two /proc files.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from embedbench.errors import ConfigError, IoBusyError, one_line

__all__ = [
    "DIRTY_THRESHOLD_BYTES",
    "IOWAIT_THRESHOLD",
    "IOWAIT_WINDOW_S",
    "IO_MAX_WAIT_S",
    "IO_POLL_S",
    "PROC_MEMINFO",
    "PROC_STAT",
    "WINDOW_ENV",
    "IoReading",
    "Log",
    "guard_window_s",
    "read_io",
    "read_iowait_jiffies",
    "read_writeback_bytes",
    "wait_for_quiet_io",
]

PROC_MEMINFO = Path("/proc/meminfo")
PROC_STAT = Path("/proc/stat")

# 64 MiB: an idle Linux box keeps well under this dirty (a few MiB at most: logs,
# shell history), while the synthetic checkpoint is 1.09 GB and the kernel's default
# background writeback starts at 10 % of available memory, so anything above 64 MiB
# means a large write is still going to disk, not ordinary background chatter.
DIRTY_THRESHOLD_BYTES = 64 * 2**20
# 20 %: iowait is idle time with I/O outstanding, a few percent at most on a quiet
# machine; a fifth of all CPU time spent waiting on the disk means someone is
# saturating it. The aggregate line averages over every CPU, so this only catches
# heavy I/O; Dirty+Writeback is the direct signal for the case that motivated the guard.
IOWAIT_THRESHOLD = 0.20
# A gigabyte writes back in seconds on an SSD and in well under a minute on a slow
# disk; if it has not settled by then, a human should look.
IO_MAX_WAIT_S = 60.0
IO_POLL_S = 1.0
IOWAIT_WINDOW_S = 0.25
# Every guard's sampling window (this module's iowait window, the contention guard's
# per-core windows before the run and between workers) may be set in one place, e.g.
# short in tests so that each run does not pay about a second of sleeping per guard.
# Unset (the default), each guard keeps its own window; the reading records the one used.
WINDOW_ENV = "EMBEDBENCH_CONTENTION_WINDOW_S"


def guard_window_s(default: float) -> float:
    """``default``, or the seconds in ``EMBEDBENCH_CONTENTION_WINDOW_S`` when it is set.

    Raises ``ConfigError`` when the variable is set to anything but a positive number.
    """
    raw = os.environ.get(WINDOW_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{WINDOW_ENV} must be a positive number of seconds, got {raw!r}")
    return value


# /proc/stat cpu columns: user nice system idle iowait irq softirq steal guest guest_nice.
# guest and guest_nice are already counted in user and nice, so they are left out.
_IOWAIT_COLUMN = 4
_TOTAL_COLUMNS = (0, 1, 2, 3, 4, 5, 6, 7)

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_writeback_bytes(path: str | Path = PROC_MEMINFO) -> tuple[int, int]:
    """``(dirty, writeback)`` in bytes from ``/proc/meminfo`` (whose values are in kB).

    Raises OSError when the file cannot be read, ValueError when either line is missing
    or malformed.
    """
    found: dict[str, int] = {}
    for line in Path(path).read_text().splitlines():
        name, _, rest = line.partition(":")
        if name not in ("Dirty", "Writeback"):
            continue
        fields = rest.split()
        if not fields or not fields[0].isdigit() or fields[1:] not in ([], ["kB"]):
            raise ValueError(f"{path}: cannot parse {line.strip()!r}")
        found[name] = int(fields[0]) * 1024
    missing = [name for name in ("Dirty", "Writeback") if name not in found]
    if missing:
        raise ValueError(f"{path} has no {' or '.join(missing)} line")
    return found["Dirty"], found["Writeback"]


def read_iowait_jiffies(path: str | Path = PROC_STAT) -> tuple[int, int]:
    """``(iowait, total)`` cumulative jiffies from the aggregate ``cpu`` line of ``/proc/stat``.

    Total = user + nice + system + idle + iowait + irq + softirq + steal (guest columns
    are already inside user and nice). Raises OSError when the file cannot be read,
    ValueError when it has no usable ``cpu`` line.
    """
    for line in Path(path).read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name != "cpu":
            continue
        values = [int(v) for v in rest.split()]
        if len(values) <= _IOWAIT_COLUMN:
            raise ValueError(f"{path}: the cpu line has no iowait column")
        values += [0] * (10 - len(values))
        return values[_IOWAIT_COLUMN], sum(values[i] for i in _TOTAL_COLUMNS)
    raise ValueError(f"{path} has no aggregate cpu line")


def _iowait_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    # The kernel's iowait counter can step backwards (NO_HZ accounting); clamp at zero.
    iowait = max(0, after[0] - before[0])
    total = after[1] - before[1]
    if total <= 0:
        return None
    return min(1.0, iowait / total)


def _size(nbytes: int | None) -> str:
    if nbytes is None:
        return "an unknown amount"
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:.2f} GiB"
    if nbytes >= 2**20:
        return f"{nbytes / 2**20:.0f} MiB"
    return f"{nbytes / 2**10:.0f} KiB"


def _pct(share: float | None) -> str:
    return "unknown" if share is None else f"{100.0 * share:.0f} %"


@dataclass
class IoReading:
    """The I/O guard's reading (for the run metadata, e.g. as ``io_guard``).

    ``dirty_bytes`` and ``writeback_bytes`` come from ``/proc/meminfo``; ``iowait_share``
    is the aggregate iowait fraction over one ``iowait_window_s`` window of
    ``/proc/stat``. Each is None when it could not be read (``reason`` says why, and
    ``source`` is "unavailable" when neither could). ``busy`` is True when a known value
    is above its threshold, None when nothing above threshold was seen but something
    could not be read, else False. ``waited_s`` is how long the guard waited for I/O to
    settle (0 when it was quiet at once). ``allowed`` says whether measuring may go ahead
    (not busy, or ``allow_busy``).
    """

    dirty_bytes: int | None
    writeback_bytes: int | None
    iowait_share: float | None
    dirty_threshold_bytes: int
    iowait_threshold: float
    iowait_window_s: float
    max_wait_s: float
    waited_s: float
    busy: bool | None
    allowed: bool
    allow_busy: bool
    source: str
    reason: str | None = None

    @property
    def pending_bytes(self) -> int | None:
        """Dirty + Writeback: what the kernel still has to write; None if unread."""
        if self.dirty_bytes is None or self.writeback_bytes is None:
            return None
        return self.dirty_bytes + self.writeback_bytes

    @property
    def writeback_busy(self) -> bool:
        pending = self.pending_bytes
        return pending is not None and pending > self.dirty_threshold_bytes

    @property
    def iowait_busy(self) -> bool:
        return self.iowait_share is not None and self.iowait_share > self.iowait_threshold

    def what(self) -> str:
        """What is over its threshold, in words (empty when nothing is)."""
        parts = []
        if self.writeback_busy:
            parts.append(
                f"{_size(self.pending_bytes)} of dirty pages pending writeback "
                f"(Dirty+Writeback in /proc/meminfo; threshold "
                f"{_size(self.dirty_threshold_bytes)})"
            )
        if self.iowait_busy:
            parts.append(
                f"iowait at {_pct(self.iowait_share)} (/proc/stat; threshold "
                f"{_pct(self.iowait_threshold)})"
            )
        return " and ".join(parts)

    @property
    def label(self) -> str | None:
        """A short label for tables when I/O was busy and measured anyway, else None."""
        if not self.busy:
            return None
        return f"busy I/O: {self.what()}, measured with --allow-busy"

    def to_json(self) -> dict[str, object]:
        """Plain JSON values, with ``pending_bytes`` and ``label``."""
        out = asdict(self)
        out["pending_bytes"] = self.pending_bytes
        out["label"] = self.label
        return out


def read_io(
    *,
    allow_busy: bool = False,
    dirty_threshold_bytes: int = DIRTY_THRESHOLD_BYTES,
    iowait_threshold: float = IOWAIT_THRESHOLD,
    iowait_window_s: float | None = None,
    max_wait_s: float = IO_MAX_WAIT_S,
    waited_s: float = 0.0,
    meminfo: str | Path = PROC_MEMINFO,
    proc_stat: str | Path = PROC_STAT,
    sleep: Callable[[float], None] = time.sleep,
) -> IoReading:
    """One reading: meminfo now, iowait over one window (sleeps ``iowait_window_s``,
    default ``IOWAIT_WINDOW_S`` or ``EMBEDBENCH_CONTENTION_WINDOW_S``, see ``guard_window_s``).

    Never raises for unreadable files: what could not be read is None and named in
    ``reason``. ``allowed`` is set as if this were the final reading.
    """
    if iowait_window_s is None:
        iowait_window_s = guard_window_s(IOWAIT_WINDOW_S)
    reasons: list[str] = []
    sources: list[str] = []
    dirty: int | None = None
    writeback: int | None = None
    try:
        dirty, writeback = read_writeback_bytes(meminfo)
        sources.append(str(meminfo))
    except (OSError, ValueError) as exc:
        reasons.append(f"cannot read {meminfo}: {one_line(exc)}")
    share: float | None = None
    try:
        before = read_iowait_jiffies(proc_stat)
        sleep(iowait_window_s)
        share = _iowait_share(before, read_iowait_jiffies(proc_stat))
        sources.append(str(proc_stat))
        if share is None:
            reasons.append(f"no clock ticks counted in {proc_stat} over the window")
    except (OSError, ValueError) as exc:
        reasons.append(f"cannot read {proc_stat}: {one_line(exc)}")
    reading = IoReading(
        dirty_bytes=dirty,
        writeback_bytes=writeback,
        iowait_share=share,
        dirty_threshold_bytes=dirty_threshold_bytes,
        iowait_threshold=iowait_threshold,
        iowait_window_s=iowait_window_s,
        max_wait_s=max_wait_s,
        waited_s=waited_s,
        busy=None,
        allowed=True,
        allow_busy=allow_busy,
        source=", ".join(sources) if sources else "unavailable",
        reason="; ".join(reasons) or None,
    )
    if reading.writeback_busy or reading.iowait_busy:
        reading.busy = True
    elif dirty is not None and share is not None:
        reading.busy = False
    reading.allowed = not reading.busy or allow_busy
    return reading


def _refusal(reading: IoReading) -> str:
    return (
        f"I/O is still busy after waiting {reading.waited_s:.0f} s: {reading.what()}; "
        f"wait until the writer finishes, run `sync`, stop the process that is writing, "
        f"or pass --allow-busy to measure anyway (results are then labelled busy I/O)"
    )


def wait_for_quiet_io(
    *,
    allow_busy: bool = False,
    dirty_threshold_bytes: int = DIRTY_THRESHOLD_BYTES,
    iowait_threshold: float = IOWAIT_THRESHOLD,
    max_wait_s: float = IO_MAX_WAIT_S,
    poll_s: float = IO_POLL_S,
    iowait_window_s: float | None = None,
    log: Log = _stderr,
    meminfo: str | Path = PROC_MEMINFO,
    proc_stat: str | Path = PROC_STAT,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    flush: Callable[[], None] = os.sync,
) -> IoReading:
    """Wait until writeback and iowait are below their thresholds; refuse if they stay up.

    Busy means Dirty+Writeback in ``/proc/meminfo`` above ``dirty_threshold_bytes``
    (default 64 MiB) or the aggregate iowait share of ``/proc/stat`` over one
    ``iowait_window_s`` window (default: see ``read_io``) above ``iowait_threshold``
    (default 20 %); see the
    module constants for why those values. When busy, logs ONE line saying what it
    waits for; with dirty pages pending it asks the kernel to write them now
    (``flush``, default ``os.sync``: left alone, the kernel starts writing dirty pages
    only after they are 30 s old), then polls every ``poll_s`` s for up to
    ``max_wait_s`` s (default 60).
    Quiet in time: returns the reading with ``waited_s``. Still busy: raises
    ``IoBusyError`` (one line: how much is pending, how long it waited, what to do).

    With ``allow_busy`` it neither waits nor raises (measure anyway, as with a busy
    core): the reading's ``label`` marks the results when I/O was busy. When the
    /proc files cannot be read the reading says so (``source`` "unavailable",
    ``reason``) and allows the run: nothing is made up.
    """
    if dirty_threshold_bytes < 0:
        raise ConfigError(f"dirty threshold must be >= 0 bytes, got {dirty_threshold_bytes}")
    if not 0.0 < iowait_threshold <= 1.0:
        raise ConfigError(f"iowait threshold must be in (0, 1], got {iowait_threshold}")
    if iowait_window_s is None:
        iowait_window_s = guard_window_s(IOWAIT_WINDOW_S)
    if max_wait_s < 0 or poll_s <= 0 or iowait_window_s <= 0:
        raise ConfigError(
            f"need max_wait_s >= 0 and positive poll_s and iowait_window_s, got "
            f"{max_wait_s}, {poll_s}, {iowait_window_s}"
        )

    def sample(waited: float) -> IoReading:
        return read_io(
            allow_busy=allow_busy,
            dirty_threshold_bytes=dirty_threshold_bytes,
            iowait_threshold=iowait_threshold,
            iowait_window_s=iowait_window_s,
            max_wait_s=max_wait_s,
            waited_s=waited,
            meminfo=meminfo,
            proc_stat=proc_stat,
            sleep=sleep,
        )

    start = clock()
    reading = sample(0.0)
    if not reading.busy or allow_busy:
        return reading
    log(
        f"waiting up to {max_wait_s:g} s for I/O to settle: {reading.what()}"
        + ("; writing dirty pages back now (sync) ..." if reading.writeback_busy else " ...")
    )
    if reading.writeback_busy:
        flush()
        reading = sample(clock() - start)
    # Bounded by the clock and, should the clock stand still, by a count of polls.
    polls_left = math.ceil(max_wait_s / poll_s) + 1
    while reading.busy and polls_left > 0:
        waited = clock() - start
        if waited >= max_wait_s:
            break
        sleep(min(poll_s, max_wait_s - waited))
        reading = sample(clock() - start)
        polls_left -= 1
    reading.waited_s = clock() - start
    if reading.busy:
        raise IoBusyError(_refusal(reading), reading)
    return reading
