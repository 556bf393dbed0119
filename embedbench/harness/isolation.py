"""Process isolation for measurement: one pinned core, one torch thread, no gc; contention guard.

``isolated()`` is a context manager that restores the caller's CPU affinity,
torch thread count and gc state on exit, also when the body raises.

``check_contention()`` reads per-core jiffies from ``/proc/stat`` over short
windows and refuses a core that other work keeps busy (``ContentionError``),
unless told to measure anyway, in which case the reading labels the results.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from embedbench.errors import ConfigError, ContentionError
from embedbench.harness.allocator import steady_allocator
from embedbench.harness.ioguard import guard_window_s
from embedbench.harness.timing import busy_shares

__all__ = [
    "CONTENTION_THRESHOLD",
    "CONTENTION_WINDOWS",
    "CONTENTION_WINDOW_S",
    "PROC_STAT",
    "ContentionReading",
    "IsolationState",
    "allowed_cores",
    "check_contention",
    "isolated",
    "other_cores_reader",
    "read_cpu_jiffies",
    "resolve_cpu_core",
]

PROC_STAT = Path("/proc/stat")
CONTENTION_THRESHOLD = 0.5
CONTENTION_WINDOWS = 2
# Default window; EMBEDBENCH_CONTENTION_WINDOW_S replaces it (see ioguard.guard_window_s).
CONTENTION_WINDOW_S = 0.25


def allowed_cores() -> list[int]:
    """The CPU cores this process may run on, sorted."""
    return sorted(os.sched_getaffinity(0))


def resolve_cpu_core(requested: int | None) -> int:
    """The requested core if it is in the allowed set; default the lowest allowed core."""
    cores = allowed_cores()
    if requested is None:
        return cores[0]
    if requested not in cores:
        raise ConfigError(
            f"cpu core {requested} is not in this process's allowed affinity set {cores}; "
            f"pass --cpu-core with one of them"
        )
    return requested


@dataclass
class IsolationState:
    """What ``isolated`` applied; recorded in the run metadata."""

    cpu_core: int
    torch_threads: int
    interop_threads: int
    interop_threads_set: bool
    gc_disabled: bool
    inference_mode: bool
    allocator: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """Plain JSON values."""
        return asdict(self)


def _set_interop_threads(count: int) -> bool:
    """Set torch's inter-op pool size; torch allows this only before the pool starts."""
    if torch.get_num_interop_threads() == count:
        return True
    try:
        torch.set_num_interop_threads(count)
    except RuntimeError:
        return False
    return torch.get_num_interop_threads() == count


@contextlib.contextmanager
def isolated(cpu_core: int) -> Iterator[IsolationState]:
    """Pin the calling thread to ``cpu_core``, 1 torch thread, gc off, inference mode,
    and glibc's allocator held steady (see ``allocator``; that one lasts past the body)."""
    core = resolve_cpu_core(cpu_core)
    saved_affinity = os.sched_getaffinity(0)
    saved_threads = torch.get_num_threads()
    saved_gc = gc.isenabled()
    interop_ok = _set_interop_threads(1)
    allocator = steady_allocator()
    try:
        os.sched_setaffinity(0, {core})
        torch.set_num_threads(1)
        gc.collect()
        gc.disable()
        with torch.inference_mode():
            yield IsolationState(
                cpu_core=core,
                torch_threads=torch.get_num_threads(),
                interop_threads=torch.get_num_interop_threads(),
                interop_threads_set=interop_ok,
                gc_disabled=not gc.isenabled(),
                inference_mode=torch.is_inference_mode_enabled(),
                allocator=allocator,
            )
    finally:
        if saved_gc:
            gc.enable()
        torch.set_num_threads(saved_threads)
        os.sched_setaffinity(0, saved_affinity)


# --- contention guard -----------------------------------------------------------------------

# /proc/stat per-cpu columns: user nice system idle iowait irq softirq steal guest guest_nice.
# guest and guest_nice are already counted in user and nice, so they are left out.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)
_IDLE_COLUMNS = (3, 4)


def read_cpu_jiffies(path: str | Path = PROC_STAT) -> dict[int, tuple[int, int]]:
    """Per core, cumulative (busy, idle) jiffies from ``/proc/stat``.

    Busy = user + nice + system + irq + softirq + steal; idle = idle + iowait.
    Raises OSError when the file cannot be read, ValueError when it has no per-core lines.
    """
    cores: dict[int, tuple[int, int]] = {}
    for line in Path(path).read_text().splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        values = [int(v) for v in rest.split()]
        values += [0] * (10 - len(values))
        busy = sum(values[i] for i in _BUSY_COLUMNS)
        idle = sum(values[i] for i in _IDLE_COLUMNS)
        cores[int(name[3:])] = (busy, idle)
    if not cores:
        raise ValueError(f"{path} has no per-core cpuN lines")
    return cores


def other_cores_reader(
    core: int, cores: Iterable[int] | None = None, path: str | Path = PROC_STAT
) -> Callable[[], dict[int, tuple[int, int]] | None]:
    """A reader of the (busy, idle) jiffies of ``cores`` other than ``core`` (default: this
    process's allowed cores, read now, before ``isolated()`` narrows them). It returns None
    when there is no other core or ``/proc/stat`` cannot be read."""
    others = {c for c in (allowed_cores() if cores is None else cores) if c != core}

    def read() -> dict[int, tuple[int, int]] | None:
        if not others:
            return None
        try:
            jiffies = read_cpu_jiffies(path)
        except (OSError, ValueError):
            return None
        return {c: v for c, v in jiffies.items() if c in others} or None

    return read


def _least(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


@dataclass(kw_only=True)
class ContentionReading:
    """The guard's reading for one core (recorded in the run metadata).

    ``busy_share`` is the minimum over the windows of the core's busy fraction
    (None when it could not be observed; ``source`` then says "unavailable" and
    ``reason`` why). ``busy`` is ``busy_share > threshold`` (None if unobserved);
    ``allowed`` says whether measuring may go ahead (not busy, or ``allow_busy``).
    ``other_cores`` holds the same minimum for the other allowed cores.
    """

    core: int
    busy_share: float | None
    windows: list[float | None]
    window_s: float
    threshold: float
    busy: bool | None
    allowed: bool
    allow_busy: bool
    source: str
    reason: str | None = None
    other_cores: dict[int, float | None] = field(default_factory=dict)

    @property
    def label(self) -> str | None:
        """A short label for tables when the core was busy and measured anyway, else None."""
        if not self.busy:
            return None
        return (
            f"busy core: cpu {self.core} was {_pct(self.busy_share)} busy "
            f"(threshold {_pct(self.threshold)}), measured with --allow-busy"
        )

    def to_json(self) -> dict[str, object]:
        """Plain JSON values (core numbers as string keys)."""
        out = asdict(self)
        out["other_cores"] = {str(k): v for k, v in self.other_cores.items()}
        out["label"] = self.label
        return out


def _pct(share: float | None) -> str:
    return "an unknown share" if share is None else f"{100.0 * share:.0f} %"


def _refusal(reading: ContentionReading) -> str:
    idle = sorted(
        (share, core)
        for core, share in reading.other_cores.items()
        if share is not None and share <= reading.threshold
    )
    other = (
        f"choose another --cpu-core (core {idle[0][1]} is {_pct(idle[0][0])} busy)"
        if idle
        else "choose another --cpu-core (no other allowed core is below the threshold now)"
    )
    return (
        f"cpu core {reading.core} is {_pct(reading.busy_share)} busy (least of "
        f"{len(reading.windows)} windows of {reading.window_s:g} s in /proc/stat; threshold "
        f"{_pct(reading.threshold)}): {other}, stop the other load on core {reading.core}, "
        f"or pass --allow-busy to measure anyway (results are then labelled busy)"
    )


def check_contention(
    core: int,
    *,
    threshold: float = CONTENTION_THRESHOLD,
    allow_busy: bool = False,
    windows: int = CONTENTION_WINDOWS,
    window_s: float | None = None,
    candidates: Iterable[int] | None = None,
    proc_stat: str | Path = PROC_STAT,
    sleep: Callable[[float], None] = time.sleep,
    read: Callable[[], dict[int, tuple[int, int]]] | None = None,
) -> ContentionReading:
    """Sample the busy share of ``core`` over ``windows`` × ``window_s`` s; refuse a busy core.

    The minimum over the windows is used, so one short burst does not refuse a
    core, while sustained load does. Raises ``ContentionError`` (one line: which
    core, how busy, how to proceed) when the core is busy and ``allow_busy`` is
    False. When ``/proc/stat`` cannot be read the reading says so and allows
    the run: nothing is made up. ``candidates`` are the cores worth suggesting
    instead (default: this process's allowed cores; pass the original set when
    calling from inside ``isolated()``, which narrows the affinity to one core).
    ``window_s`` defaults to ``CONTENTION_WINDOW_S`` (0.25 s), or to the seconds in
    ``EMBEDBENCH_CONTENTION_WINDOW_S`` when that is set; the reading records it. ``read``
    replaces the read of ``proc_stat`` (a simulated host's jiffies).
    """
    read_jiffies = read if read is not None else lambda: read_cpu_jiffies(proc_stat)
    if window_s is None:
        window_s = guard_window_s(CONTENTION_WINDOW_S)
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"contention threshold must be in (0, 1], got {threshold}")
    if windows < 1 or window_s <= 0:
        raise ConfigError(
            f"need at least one window of positive length, got {windows} x {window_s}"
        )

    def unavailable(reason: str) -> ContentionReading:
        return ContentionReading(
            core=core,
            busy_share=None,
            windows=[],
            window_s=window_s,
            threshold=threshold,
            busy=None,
            allowed=True,
            allow_busy=allow_busy,
            source="unavailable",
            reason=reason,
        )

    try:
        snapshot = read_jiffies()
    except (OSError, ValueError) as exc:
        return unavailable(f"cannot read {proc_stat}: {' '.join(str(exc).split())}")
    if core not in snapshot:
        return unavailable(f"core {core} is not listed in {proc_stat}")
    per_window: list[dict[int, float | None]] = []
    for _ in range(windows):
        sleep(window_s)
        try:
            after = read_jiffies()
        except (OSError, ValueError) as exc:
            return unavailable(f"cannot read {proc_stat}: {' '.join(str(exc).split())}")
        per_window.append(busy_shares(snapshot, after))
        snapshot = after
    shares = [w.get(core) for w in per_window]
    busy_share = _least(shares)
    try:
        pool = allowed_cores() if candidates is None else sorted(set(candidates))
    except OSError:
        pool = []
    others = [c for c in pool if c != core]
    other_cores = {c: _least([w.get(c) for w in per_window]) for c in others}
    busy = None if busy_share is None else busy_share > threshold
    reading = ContentionReading(
        core=core,
        busy_share=busy_share,
        windows=shares,
        window_s=window_s,
        threshold=threshold,
        busy=busy,
        allowed=not busy or allow_busy,
        allow_busy=allow_busy,
        source=str(proc_stat),
        reason=None if busy_share is not None else "no clock ticks counted in the windows",
        other_cores=other_cores,
    )
    if not reading.allowed:
        raise ContentionError(_refusal(reading), reading)
    return reading
