"""Host stability from the canary: is the machine's speed steady enough to trust a run?

Pure functions on numbers; no I/O, no torch. Two readings, one rule each:

- a **probe** (``read_probe``): a burst of consecutive canary reads before a worker's
  timer floor and before every case. Its first copy pays for whatever the work before
  it left in the caches, so it is dropped; over the rest the measuring thread must have
  stayed on the CPU (``off_cpu``: wall time the thread's CPU clock did not see, over the
  wall time), the reads must agree with each other (``spread``: interquartile range over
  median) and their median must not be well above the quietest probe this worker has
  seen (``level``). The runner waits for a quiet probe, up to a bound, and refuses the
  run if none comes;
- the **run** (``assess_host``): every canary read at every block edge. A read after a
  block of lookups is about twice one after a block of empty calls (the lookups evict the
  canary's buffers), so reads are compared within their group, one group per worker,
  case, length and scope: each read over its group's median. Stable when, within each
  worker, those ratios agree (``spread``: p90 − p10); how far the workers' group medians
  stand apart is recorded (``between_workers``: the median over cases of slowest over
  fastest worker, minus 1), not judged. A run is noisy too when more than
  ``WAITED_PROBES_LIMIT`` of its probes were not quiet at once: its workers waited for a
  quiet probe, or measured anyway (``--allow-busy``).

A neighbour that comes and goes is seen by contrast (``neighbour_contrast``): block
halves while the other cores were busy against halves while they idled, over the canary
and over the timed calls themselves (each half's median call).

A neighbour that never pauses leaves nothing inside a run to contrast with. Where this
host has a **reference** (``HostReference``: the median memory level of its recent stable
runs, kept between runs by ``hostref``), the run's own memory level (``memory_level``:
the canary over the pace, a compute-only read that moves with the core's speed and not
with the memory system) must not be well above it (``REFERENCE_LEVEL_LIMIT``).

The calls themselves carry one more effect: the time the measuring thread was off the
CPU inside its own timed calls, above each block's typical (``preemption``). A worker
that lost more than ``PREEMPTED_LIMIT`` of its timed time that way shared its core with
something the ``/proc/stat`` guard let through (bursts on the measuring core, a
hypervisor taking the vCPU).

The verdict is ``stable`` or ``noisy``. It is decided from these effects alone:
busy other cores (from ``/proc/stat``) are recorded beside it as the likely cause, never
as the reason, because on a many-core GPU box busy unrelated cores are normal. The
thresholds sit above the largest value quiet runs showed, with a margin; the
measurements behind them are in docs/archive/PERFORMANCE-2026-11.md, "Interference",
and each threshold's operating point on the simulated host in docs/PERFORMANCE.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from embedbench.harness.preemption import PREEMPTED_LIMIT, preempted_shares
from embedbench.harness.records import field_of
from embedbench.harness.robust import median, robust_sd

__all__ = [
    "MIN_READS",
    "NEIGHBOUR_BUSY_STEP",
    "NEIGHBOUR_EFFECT_LIMIT",
    "NEIGHBOUR_IDLE_STEP",
    "NEIGHBOUR_MIN_READS",
    "NEIGHBOUR_P_LIMIT",
    "NOISY",
    "PREEMPTED_LIMIT",
    "PROBE_LEVEL_LIMIT",
    "PROBE_OFF_CPU_LIMIT",
    "PROBE_SPREAD_LIMIT",
    "REFERENCE_IDLE_FLOOR",
    "REFERENCE_KEEP",
    "REFERENCE_LEVEL_FLOOR",
    "REFERENCE_LEVEL_LIMIT",
    "REFERENCE_MAX_AGE_S",
    "REFERENCE_MIN_RUNS",
    "REFERENCE_REASON_START",
    "REFERENCE_SPREADS",
    "REFERENCE_SPREAD_RUNS",
    "RUN_SPREAD_LIMIT",
    "STABLE",
    "WAITED_PROBES_LIMIT",
    "WAIT_MAX_S",
    "WAIT_POLL_S",
    "Group",
    "HostReference",
    "HostStability",
    "NeighbourContrast",
    "ProbeReading",
    "WorkerCanary",
    "assess_host",
    "busiest_other_cores",
    "busy_throughout",
    "canary_end_us",
    "canary_level_us",
    "canary_reads",
    "iqr_spread",
    "joins_reference",
    "likely_cause",
    "median_call_us",
    "memory_level",
    "neighbour_contrast",
    "next_reference",
    "off_cpu_share",
    "read_probe",
    "reference_from",
    "spread",
    "with_pace",
]

STABLE = "stable"
NOISY = "noisy"

# The limits sit above what quiet runs of the gather canary showed on the CI machine
# (docs/archive/PERFORMANCE-2026-11.md, "Interference"); the quiet figures are in brackets.
# A probe's reads after the first: (q75 − q25) / median above this is not quiet (quiet
# probes: 0.19 at their 90th percentile, 0.34 at most; under CPU bursts: 1.4 at p90).
PROBE_SPREAD_LIMIT = 0.45
# A probe's reads after the first: the share of their time that the measuring thread
# spent off the CPU, above this is not quiet: another task shares the measuring core.
# On the AMD EPYC guest, 17-read probes with a busy gap between them: quiet, at most 1.5
# and 3.8 % in two sets of 400; under CPU bursts on the core (50 ms in every 150), 135 of
# 400 above 20 %, at up to 59 % (a probe that a burst hits loses about half); under a
# memory hog on the other core, 1 of 400 above 20 % (21.8 %).
PROBE_OFF_CPU_LIMIT = 0.20
# A probe's median over the quietest probe median of this worker, minus 1 (quiet probes:
# 0.36 at their 90th percentile, 0.90 at most, 2 of 245 above 0.6).
PROBE_LEVEL_LIMIT = 0.60
# Within one worker, over its group-normalised canary reads: p90 − p10 (quiet runs: at
# most 0.35 in any worker).
RUN_SPREAD_LIMIT = 0.50
# Between workers, the median over cases of the slowest worker's group median over the
# fastest's, minus 1, is recorded (``between_workers``) and is no rule: workers that run
# at different speeds widen the interval over workers, which carries that spread, and the
# outlier-worker diagnostic names one that stands apart. As a rule (above 0.45) it gave
# 3 of the 4 quiet real runs' false alarms and, on the simulated host, labelled no run
# that another rule did not (docs/PERFORMANCE.md, "Each threshold's operating point").
# More probes than this that were not quiet at their first burst of reads (so the worker
# waited, or measured anyway with --allow-busy) make the run noisy (quiet runs: at most 3
# of their 35 at the old probe limits; under CPU bursts on the measuring core: 11).
WAITED_PROBES_LIMIT = 3
# A neighbour seen by its effect: block halves while the other cores were busier (at least
# NEIGHBOUR_BUSY_STEP cores above the run's idle floor) against halves at the floor (within
# NEIGHBOUR_IDLE_STEP), their canary reads over their (case, length, scope, variant)
# median. A contrast above NEIGHBOUR_EFFECT_LIMIT with a one-sided rank-sum p below
# NEIGHBOUR_P_LIMIT, over at least NEIGHBOUR_MIN_READS reads a side, makes the run noisy.
# The limit sits above every contrast another core spinning on and off (busy, touching no
# memory) gave on the CI machine, −2.3 to +3.5 % in 7 tries; a memory hog there gave −0.4
# to +11.5 % in 9, and moved the lookups by at most 2.1 % (docs/archive/PERFORMANCE-2026-11.md,
# "A neighbour seen by its effect"). The same
# rule reads the timed calls themselves (each block half's median call): on the AMD guest
# a memory hog toggled on the other core moved the calls and the canary by different
# amounts in the same run (+0.7 to +11.6 % against +1.0 to +8.2 %).
NEIGHBOUR_BUSY_STEP = 0.75
NEIGHBOUR_IDLE_STEP = 0.25
NEIGHBOUR_EFFECT_LIMIT = 0.05
NEIGHBOUR_P_LIMIT = 0.01
NEIGHBOUR_MIN_READS = 10
# A run's memory level over this host's reference, minus 1, above this makes it noisy.
# The reference is the median level of the last REFERENCE_KEEP stable runs of the same
# host, core and canary within REFERENCE_MAX_AGE_S, and needs REFERENCE_MIN_RUNS of them.
# Quiet default runs read −6.2 to +7.2 % over their reference, runs under a memory hog
# always on +10.4 to +30.8 % (docs/archive/PERFORMANCE-2026-11.md, "A neighbour that never pauses").
REFERENCE_LEVEL_LIMIT = 0.10
# Once the reference holds REFERENCE_SPREAD_RUNS runs, the limit follows their own spread:
# REFERENCE_SPREADS times their robust relative SD (1.4826 × MAD over the median), never
# under REFERENCE_LEVEL_FLOOR (the smallest effect the neighbour rule labels) nor over
# REFERENCE_LEVEL_LIMIT. A host whose quiet runs agree closely (within 1-2 %) then sees a
# neighbour that slows its memory by 5-10 %, which the fixed 10 % let through in most
# always-on runs; a host whose quiet level drifts keeps the 10 %
# (docs/archive/PERFORMANCE-2026-11.md, "A limit that follows the host's own spread").
REFERENCE_LEVEL_FLOOR = 0.05
REFERENCE_SPREADS = 4.0
REFERENCE_SPREAD_RUNS = 5
REFERENCE_MIN_RUNS = 3
REFERENCE_KEEP = 10
REFERENCE_MAX_AGE_S = 3600.0
# Only a run whose other cores sat near idle in some block halves (their busy time's 10th
# percentile, ``neighbour.idle_floor_cores``, below this many cores) joins the reference:
# one whose neighbour never paused would teach it the neighbour's level.
REFERENCE_IDLE_FLOOR = 0.5
# How the reference rule's reason begins (``benchmarks/host_reference.py --replay`` tells
# it from the other rules' reasons by it).
REFERENCE_REASON_START = "the canary, over the core's own pace,"
# How long the runner waits for a quiet probe before it refuses, and how often it looks.
# Most waits of quiet runs ended at the first look again (7 of 11 in 23 quiet default runs
# on the AMD EPYC guest, polling every second): a transient, over well within a second. A
# probe takes about 10 ms, so looking every quarter second costs the host little and the
# run a quarter of what a one-second poll did.
WAIT_MAX_S = 30.0
WAIT_POLL_S = 0.25
# Fewer reads than this in a worker say nothing about its spread.
MIN_READS = 5


def _relative_range(values: Sequence[float], low: float, high: float) -> float:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no canary reads")
    bottom, middle, top = np.percentile(arr, [low, 50, high])
    return float((top - bottom) / middle) if middle > 0 else float("inf")


def spread(values: Sequence[float]) -> float:
    """(p90 − p10) / median of ``values``: how much they disagree, scale-free."""
    return _relative_range(values, 10, 90)


def iqr_spread(values: Sequence[float]) -> float:
    """(q75 − q25) / median of ``values``."""
    return _relative_range(values, 25, 75)


@dataclass(frozen=True)
class ProbeReading:
    """One probe: its copies' median (the first copy left out), spread, level over the
    reference, and the rule's answer (``reason`` says why it is not quiet); ``pace_us``,
    the median of the pace reads taken right after it (``memory_level``); ``off_cpu``,
    the share of its copies' time the thread was off the CPU (None when not read)."""

    median_us: float
    spread: float
    level: float | None
    reference_us: float | None
    quiet: bool
    reason: str | None = None
    samples_us: tuple[float, ...] = ()
    pace_us: float | None = None
    off_cpu: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {**asdict(self), "samples_us": [round(s, 2) for s in self.samples_us]}


def _after_first(samples: Sequence[float]) -> list[float]:
    """A burst's reads without its first, which pays for what ran before it (all of them
    when there are two or fewer)."""
    return list(samples[1:]) if len(samples) > 2 else list(samples)


def off_cpu_share(samples_us: Sequence[float], off_cpu_us: Sequence[float]) -> float:
    """The share of the probe's time (its reads but the first, and the time off the CPU
    around them, ``off_cpu_us``, one per read) that the thread spent off the CPU."""
    wall, lost = float(sum(_after_first(samples_us))), float(sum(_after_first(off_cpu_us)))
    return lost / (wall + lost) if wall + lost > 0 else 0.0


def read_probe(
    samples_us: Sequence[float],
    reference_us: float | None = None,
    *,
    off_cpu_us: Sequence[float] | None = None,
    spread_limit: float = PROBE_SPREAD_LIMIT,
    level_limit: float = PROBE_LEVEL_LIMIT,
    off_cpu_limit: float = PROBE_OFF_CPU_LIMIT,
) -> ProbeReading:
    """Judge one probe's copies (all but the first): the thread's time off the CPU around
    them (``off_cpu_us``, one per copy, where read), their
    agreement, and their level against ``reference_us`` (the quietest probe median seen
    so far; None for the first probe)."""
    kept = _after_first(samples_us)
    median = float(np.median(np.asarray(kept, dtype=float)))
    dispersion = iqr_spread(kept)
    level = None if not reference_us else median / reference_us - 1.0
    off_cpu = None if off_cpu_us is None else off_cpu_share(samples_us, off_cpu_us)
    reason = None
    if off_cpu is not None and off_cpu > off_cpu_limit:
        reason = (
            f"the measuring thread was off the CPU for {100 * off_cpu:.0f} % of the probe "
            f"(limit {100 * off_cpu_limit:.0f} %): another task shares the measuring core"
        )
    elif dispersion > spread_limit:
        reason = (
            f"canary reads disagree: spread {100 * dispersion:.0f} % "
            f"(limit {100 * spread_limit:.0f} %)"
        )
    elif level is not None and level > level_limit:
        reason = (
            f"canary {100 * level:.0f} % slower than this worker's quietest "
            f"({median:.0f} against {reference_us:.0f} µs; limit {100 * level_limit:.0f} %)"
        )
    return ProbeReading(
        median,
        dispersion,
        level,
        reference_us,
        reason is None,
        reason,
        tuple(samples_us),
        off_cpu=off_cpu,
    )


def with_pace(reading: ProbeReading, pace_samples_us: Sequence[float]) -> ProbeReading:
    """``reading`` with the median of the pace reads taken right after it (the first left
    out, as a probe's first copy is)."""
    kept = _after_first(pace_samples_us)
    if not kept:
        return reading
    return replace(reading, pace_us=float(np.median(np.asarray(kept, dtype=float))))


def next_reference(reference_us: float | None, reading: ProbeReading) -> float | None:
    """The quietest level seen, updated with a quiet probe (a noisy one never sets it)."""
    if not reading.quiet:
        return reference_us
    return reading.median_us if reference_us is None else min(reference_us, reading.median_us)


@dataclass(frozen=True)
class WorkerCanary:
    """One worker's canary reads at its block edges: how many, their median (µs) and the
    spread of the reads over their group's median."""

    worker: int
    reads: int
    median_us: float
    spread: float


@dataclass
class HostStability:
    """The run's host-stability reading (``host_stability`` in metadata.json)."""

    verdict: str
    reasons: list[str]
    workers: list[WorkerCanary]
    between_workers: float | None
    probes_not_quiet: int
    probes: int
    probes_waited: int = 0
    other_cores_busy: dict[str, float | None] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    canary_reads: int = 0
    neighbour: dict[str, Any] | None = None
    # The same contrast over the timed calls themselves: each block half's median call.
    neighbour_calls: dict[str, Any] | None = None
    memory_level: float | None = None
    host_reference: dict[str, Any] | None = None
    # Each worker's preempted share of its timed calls (``preemption``), by worker index
    # as a string; empty where no CPU call was judged (a device run, an older run).
    preempted: dict[str, float] = field(default_factory=dict)

    @property
    def noisy(self) -> bool:
        """True when the verdict is noisy."""
        return self.verdict == NOISY

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return asdict(self)


Group = tuple[int, str, int, str]


def canary_reads(records: Iterable[Any]) -> dict[Group, list[float]]:
    """Every canary read at a block edge, per (worker, case, tokens, scope), in order."""
    reads: dict[Group, list[float]] = {}
    for record in records:
        group = (
            int(field_of(record, "worker") or 0),
            str(field_of(record, "case")),
            int(field_of(record, "tokens") or 0),
            str(field_of(record, "scope")),
        )
        for key in ("canary_us_start", "canary_us_end"):
            value = field_of(record, key)
            if value is not None:
                reads.setdefault(group, []).append(float(value))
    return reads


def canary_level_us(records: Iterable[Any]) -> float | None:
    """The host's speed while ``records`` were timed: the median of their canary reads
    (µs; None when they carry none). A case's reduction is stated at this level."""
    values = [v for group in canary_reads(records).values() for v in group]
    return float(np.median(values)) if values else None


def _workers(groups: dict[Group, list[float]]) -> list[WorkerCanary]:
    raw: dict[int, list[float]] = {}
    normalised: dict[int, list[float]] = {}
    for (worker, *_), values in groups.items():
        centre = float(np.median(values))
        raw.setdefault(worker, []).extend(values)
        normalised.setdefault(worker, []).extend(v / centre for v in values)
    return [
        WorkerCanary(w, len(raw[w]), float(np.median(raw[w])), spread(normalised[w]))
        for w in sorted(raw)
        if len(raw[w]) >= MIN_READS
    ]


def _between_workers(groups: dict[Group, list[float]]) -> tuple[float | None, str | None]:
    """Median over cases of slowest/fastest worker's group median − 1, and the case where
    the workers differed most."""
    by_case: dict[tuple[str, int, str], dict[int, float]] = {}
    for (worker, case, tokens, scope), values in groups.items():
        by_case.setdefault((case, tokens, scope), {})[worker] = float(np.median(values))
    ratios = {
        key: max(m.values()) / min(m.values()) - 1.0
        for key, m in by_case.items()
        if len(m) >= 2 and min(m.values()) > 0
    }
    if not ratios:
        return None, None
    worst = max(ratios, key=ratios.__getitem__)
    return float(np.median(list(ratios.values()))), f"{worst[0]}@{worst[1]}"


def _medians(pairs: Iterable[tuple[Any, float]]) -> dict[Any, float]:
    """The median of the values under each key."""
    values: dict[Any, list[float]] = {}
    for key, value in pairs:
        values.setdefault(key, []).append(value)
    return {key: float(np.median(v)) for key, v in values.items()}


@dataclass(frozen=True)
class NeighbourContrast:
    """The canary while the other cores were busier than their idle floor against while
    they sat at it: how many block halves each side, the floor (in cores), the contrast
    (median busier over median idle, minus 1; None with too few reads a side) and its
    one-sided rank-sum p."""

    busy_reads: int
    idle_reads: int
    idle_floor_cores: float
    effect: float | None
    p_value: float | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return asdict(self)


def canary_end_us(record: Any) -> float | None:
    """The canary read at a block half's end (µs; None where it was not taken)."""
    value = field_of(record, "canary_us_end")
    return None if value is None else float(value)


def median_call_us(record: Any) -> float | None:
    """The median host latency of a block half's timed calls (µs; None without calls)."""
    samples = field_of(record, "samples_us")
    if not samples:
        return None
    if isinstance(samples[0], (list, tuple, np.ndarray)):
        return median(row[0] for row in samples)
    return median(samples)


def neighbour_contrast(
    records: Iterable[Any],
    *,
    value: Callable[[Any], float | None] = canary_end_us,
    busy_step: float = NEIGHBOUR_BUSY_STEP,
    idle_step: float = NEIGHBOUR_IDLE_STEP,
    min_reads: int = NEIGHBOUR_MIN_READS,
) -> NeighbourContrast | None:
    """Does the canary slow down when the other cores are busy? Each record's end read
    (or what ``value`` reads of it: ``median_call_us``, the block half's own calls) over its
    (case, tokens, scope, variant) median, split by the other cores' busy time over that
    block half (``other_cores_busy``). A neighbour that comes and goes shows as a contrast
    the host's slow drift cannot: both sides are spread over the same minutes. None when
    no record carries both readings."""
    reads: list[tuple[int, tuple[str, int, str, str], float, float]] = []
    for record in records:
        canary, busy = value(record), field_of(record, "other_cores_busy")
        if canary is None or busy is None:
            continue
        group = (
            str(field_of(record, "case")),
            int(field_of(record, "tokens") or 0),
            str(field_of(record, "scope")),
            str(field_of(record, "variant")),
        )
        reads.append((int(field_of(record, "worker") or 0), group, float(canary), float(busy)))
    if not reads:
        return None
    # Each read over its group's median (what the block half did), then over its worker's
    # median of those (workers differ in level, by their own pages of the table).
    centre = _medians((group, canary) for _, group, canary, _ in reads)
    scaled = [
        (worker, canary / centre[group], busy)
        for worker, group, canary, busy in reads
        if centre[group] > 0
    ]
    level = _medians((worker, ratio) for worker, ratio, _ in scaled)
    ratios = [(ratio / level[worker], busy) for worker, ratio, busy in scaled if level[worker] > 0]
    if not ratios:
        return None
    floor = float(np.percentile([busy for _, busy in ratios], 10))
    idle = [ratio for ratio, busy in ratios if busy <= floor + idle_step]
    busier = [ratio for ratio, busy in ratios if busy >= floor + busy_step]
    effect = p_value = None
    if len(idle) >= min_reads and len(busier) >= min_reads:
        effect = float(np.median(busier) / np.median(idle) - 1.0)
        from scipy import stats as sps  # not at the top: every worker imports this module

        p_value = float(sps.mannwhitneyu(busier, idle, alternative="greater").pvalue)
    return NeighbourContrast(len(busier), len(idle), floor, effect, p_value)


def _neighbour_reason(
    contrast: NeighbourContrast | None,
    effect_limit: float,
    p_limit: float,
    what: str = "the canary",
) -> str | None:
    if contrast is None or contrast.effect is None or contrast.p_value is None:
        return None
    if contrast.effect <= effect_limit or contrast.p_value >= p_limit:
        return None
    return (
        f"{what} read {100 * contrast.effect:.0f} % slower in the "
        f"{contrast.busy_reads} block halves while other cores were busy than in the "
        f"{contrast.idle_reads} while they were idle (rank-sum p {contrast.p_value:.1g}; "
        f"limit {100 * effect_limit:.0f} %): a neighbour sharing the memory system"
    )


def memory_level(probes: Iterable[Mapping[str, Any]]) -> float | None:
    """The memory system's speed over a run: the median over its probes of their canary
    median over their pace median (None when no probe carries a pace)."""
    ratios = [
        float(p["median_us"]) / float(p["pace_us"])
        for p in probes
        if p.get("pace_us") and p.get("median_us")
    ]
    return float(np.median(ratios)) if ratios else None


@dataclass(frozen=True)
class HostReference:
    """This host's quiet memory level: the median of its recent stable runs' levels (None
    with fewer than ``REFERENCE_MIN_RUNS``), how many runs, the oldest one's time and the
    runs' robust relative spread (None with fewer than ``REFERENCE_SPREAD_RUNS``)."""

    level: float | None
    runs: int
    since: float | None = None
    spread: float | None = None

    def limit(self) -> float:
        """How far above the level a run may read: ``REFERENCE_SPREADS`` spreads, within
        ``REFERENCE_LEVEL_FLOOR`` and ``REFERENCE_LEVEL_LIMIT`` (the latter until the
        reference has a spread)."""
        if self.spread is None:
            return REFERENCE_LEVEL_LIMIT
        wide = REFERENCE_SPREADS * self.spread
        return min(REFERENCE_LEVEL_LIMIT, max(REFERENCE_LEVEL_FLOOR, wide))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return asdict(self)


def reference_from(
    history: Sequence[Mapping[str, Any]],
    now: float,
    *,
    keep: int = REFERENCE_KEEP,
    max_age_s: float = REFERENCE_MAX_AGE_S,
    min_runs: int = REFERENCE_MIN_RUNS,
) -> HostReference:
    """The reference from stored entries (``level``, ``time`` in epoch seconds, oldest
    first): the last ``keep`` of those at most ``max_age_s`` old."""
    recent = [
        h
        for h in history
        if h.get("level") and h.get("time") is not None and 0 <= now - h["time"] <= max_age_s
    ][-keep:]
    if len(recent) < min_runs:
        return HostReference(None, len(recent))
    levels = np.asarray([float(h["level"]) for h in recent])
    level = float(np.median(levels))
    spread = None
    if len(recent) >= REFERENCE_SPREAD_RUNS:
        spread = robust_sd(levels, centre=level) / level
    return HostReference(level, len(recent), float(recent[0]["time"]), spread)


def joins_reference(reading: Mapping[str, Any]) -> bool:
    """Whether a finished run's ``host_stability`` may join this host's reference: stable,
    with a memory level, and its other cores near idle for part of it (never a run whose
    neighbour, however harmless it looked, was there the whole time)."""
    floor = (reading.get("neighbour") or {}).get("idle_floor_cores")
    return (
        reading.get("verdict") == STABLE
        and bool(reading.get("memory_level"))
        and floor is not None
        and floor < REFERENCE_IDLE_FLOOR
    )


def _reference_reading(
    level: float | None, reference: HostReference | None
) -> tuple[dict[str, Any] | None, str | None]:
    if reference is None:
        return None, None
    limit = reference.limit()
    reading: dict[str, Any] = {**reference.to_json(), "over": None, "limit": limit}
    if level is None or not reference.level:
        return reading, None
    over = level / reference.level - 1.0
    reading["over"] = over
    if over <= limit:
        return reading, None
    return reading, (
        f"{REFERENCE_REASON_START} ran {100 * over:.0f} % slower than this "
        f"host's quiet reference (the median of its last {reference.runs} stable runs; "
        f"limit {100 * limit:.0f} %): a neighbour that never paused, or a slower host"
    )


def _preempted_reason(shares: Mapping[int, float], limit: float) -> str | None:
    """One sentence naming the workers that lost more than ``limit`` of their timed
    calls' time off the CPU, or None."""
    over = {w: share for w, share in shares.items() if share > limit}
    if not over:
        return None
    worst = max(over, key=over.__getitem__)
    who = (
        f"worker {worst}"
        if len(over) == 1
        else f"{len(over)} of {len(shares)} workers (worker {worst} most)"
    )
    return (
        f"{who} lost up to {100 * over[worst]:.0f} % of the timed calls' time off the CPU: "
        f"preempted on the measuring core (limit {100 * limit:.0f} %)"
    )


def _thresholds() -> dict[str, float]:
    return {
        "probes_waited": WAITED_PROBES_LIMIT,
        "probe_spread": PROBE_SPREAD_LIMIT,
        "probe_level": PROBE_LEVEL_LIMIT,
        "probe_off_cpu": PROBE_OFF_CPU_LIMIT,
        "run_spread": RUN_SPREAD_LIMIT,
        "neighbour_effect": NEIGHBOUR_EFFECT_LIMIT,
        "neighbour_p": NEIGHBOUR_P_LIMIT,
        "reference_level": REFERENCE_LEVEL_LIMIT,
        "reference_level_floor": REFERENCE_LEVEL_FLOOR,
        "reference_spreads": REFERENCE_SPREADS,
        "preempted": PREEMPTED_LIMIT,
    }


def assess_host(
    records: Iterable[Any],
    *,
    probes: Sequence[Mapping[str, Any]] = (),
    other_cores_busy: Mapping[str, float | None] | None = None,
    reference: HostReference | None = None,
    spread_limit: float = RUN_SPREAD_LIMIT,
) -> HostStability:
    """The run's verdict from the canary reads of its records and its probes' readings.

    ``probes`` are probe readings as JSON (``quiet`` is read); ``other_cores_busy`` the
    largest busy share each other allowed core showed in the guards (recorded as the
    likely cause, not used by the rule); ``reference`` this host's quiet memory level
    (None: not kept, as in ``paired_benchmark``). With no canary reads at all (an older run, or
    records of the original script) the verdict is stable only if nothing else says
    otherwise, and ``canary_reads`` is 0 so a reader can tell it was not observed.
    """
    records = list(records)
    groups = canary_reads(records)
    workers = _workers(groups)
    reasons = [
        f"worker {w.worker}'s canary reads disagree: spread {100 * w.spread:.0f} % "
        f"(limit {100 * spread_limit:.0f} %)"
        for w in workers
        if w.spread > spread_limit
    ]
    between, _worst = _between_workers(groups)
    preempted = preempted_shares(records)
    lost = _preempted_reason(preempted, PREEMPTED_LIMIT)
    if lost:
        reasons.append(lost)
    neighbour = neighbour_contrast(records)
    seen = _neighbour_reason(neighbour, NEIGHBOUR_EFFECT_LIMIT, NEIGHBOUR_P_LIMIT)
    if seen:
        reasons.append(seen)
    calls = neighbour_contrast(records, value=median_call_us)
    seen = _neighbour_reason(calls, NEIGHBOUR_EFFECT_LIMIT, NEIGHBOUR_P_LIMIT, "the timed calls")
    if seen:
        reasons.append(seen)
    # One rule with or without --allow-busy: a probe that was not quiet at once (the
    # worker waited, or measured anyway) counts; a few are what a quiet host shows.
    not_quiet = [p for p in probes if not p.get("quiet", True)]
    waited = [p for p in probes if p.get("attempts", 1) > 1 or not p.get("quiet", True)]
    if len(waited) > WAITED_PROBES_LIMIT:
        how = "were not quiet (measured with --allow-busy)" if not_quiet else "had to wait"
        reasons.append(
            f"{len(waited)} of {len(probes)} probes before a worker or case {how} "
            f"(limit {WAITED_PROBES_LIMIT})"
        )
    level = memory_level(probes)
    host_reference, slower = _reference_reading(level, reference)
    if slower:
        reasons.append(slower)
    return HostStability(
        verdict=NOISY if reasons else STABLE,
        reasons=reasons,
        workers=workers,
        between_workers=between,
        probes_not_quiet=len(not_quiet),
        probes=len(probes),
        probes_waited=len(waited),
        other_cores_busy=dict(other_cores_busy or {}),
        thresholds={
            **_thresholds(),
            "run_spread": spread_limit,
        },
        canary_reads=sum(len(v) for v in groups.values()),
        neighbour=None if neighbour is None else neighbour.to_json(),
        neighbour_calls=None if calls is None else calls.to_json(),
        memory_level=level,
        host_reference=host_reference,
        preempted={str(w): share for w, share in preempted.items()},
    )


def busiest_other_cores(checks: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """The largest busy share each other core showed over the guards' readings
    (``contention_checks`` in metadata.json)."""
    busiest: dict[str, float | None] = {}
    for check in checks:
        for core, share in (check.get("other_cores") or {}).items():
            known = [v for v in (busiest.get(str(core)), share) if v is not None]
            busiest[str(core)] = max(known) if known else None
    return busiest


def likely_cause(other_cores_busy: Mapping[str, float | None], threshold: float = 0.5) -> str:
    """A short phrase naming busy other cores, the usual cause of a noisy canary, or ''."""
    busy = sorted(
        (core, share)
        for core, share in other_cores_busy.items()
        if share is not None and share > threshold
    )
    if not busy:
        return ""
    named = ", ".join(f"cpu {core} {100 * share:.0f} %" for core, share in busy)
    return f"other cores were busy ({named}): a neighbour sharing the memory system"


def busy_throughout(reading: Mapping[str, Any]) -> bool:
    """True when a run's other cores were busy (``likely_cause``) and never idled in any
    block half, so the neighbour rule had nothing to contrast: a neighbour that never
    paused cannot be told from the host's own speed (``reading``: ``host_stability``)."""
    contrast = reading.get("neighbour") or {}
    busy = bool(likely_cause(reading.get("other_cores_busy") or {}))
    return busy and bool(contrast) and not contrast.get("busy_reads")
