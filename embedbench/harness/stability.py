"""Host stability from the canary: is the machine's speed steady enough to trust a run?

Pure functions on numbers; no I/O, no torch. Two readings, one rule each:

- a **probe** (``read_probe``): a burst of consecutive canary copies before a worker's
  timer floor and before every case. Quiet when the copies agree with each other
  (``spread``: (p90 − p10) / median) and their median is not well above the quietest
  level this worker has seen (``level``). The runner waits for a quiet probe, up to a
  bound, and refuses the run if none comes;
- the **run** (``assess_host``): every canary read at every block edge of every worker.
  Stable when, within each worker, the reads agree (``spread``, as for a probe) and
  the workers' median levels agree with each other (``between_workers``). A run whose
  probes were not quiet (measured with ``--allow-busy``) is noisy too.

The verdict is ``stable`` or ``noisy``. It is decided from the canary's effect alone:
busy other cores (from ``/proc/stat``) are recorded beside it as the likely cause, never
as the reason, because on a many-core GPU box busy unrelated cores are normal.
The thresholds and the measurements behind them are in docs/PERFORMANCE.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

STABLE = "stable"
NOISY = "noisy"

# A probe's copies: (p90 − p10) / median above this is not quiet.
PROBE_SPREAD_LIMIT = 0.25
# A probe's median over the quietest probe median of this worker, minus 1.
PROBE_LEVEL_LIMIT = 0.15
# Within one worker, over every canary read at its block edges: (p90 − p10) / median.
RUN_SPREAD_LIMIT = 0.35
# Between workers: the slowest worker's median canary over the fastest's, minus 1.
RUN_LEVEL_LIMIT = 0.15
# How long the runner waits for a quiet probe before it refuses, and how often it looks.
WAIT_MAX_S = 30.0
WAIT_POLL_S = 1.0
# Fewer reads than this say nothing about a spread.
MIN_READS = 5


def spread(values: Sequence[float]) -> float:
    """(p90 − p10) / median of ``values``: how much they disagree, scale-free."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no canary reads")
    p10, p50, p90 = np.percentile(arr, [10, 50, 90])
    return float((p90 - p10) / p50) if p50 > 0 else float("inf")


@dataclass(frozen=True)
class ProbeReading:
    """One probe: its median copy time, spread, level over the reference, and the rule's
    answer (``reason`` says why it is not quiet)."""

    median_us: float
    spread: float
    level: float | None
    reference_us: float | None
    quiet: bool
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return asdict(self)


def read_probe(
    samples_us: Sequence[float],
    reference_us: float | None = None,
    *,
    spread_limit: float = PROBE_SPREAD_LIMIT,
    level_limit: float = PROBE_LEVEL_LIMIT,
) -> ProbeReading:
    """Judge one probe's copies against each other and against ``reference_us`` (the
    quietest probe median seen so far; None for the first probe)."""
    median = float(np.median(np.asarray(samples_us, dtype=float)))
    dispersion = spread(samples_us)
    level = None if not reference_us else median / reference_us - 1.0
    reason = None
    if dispersion > spread_limit:
        reason = (
            f"canary copies disagree: spread {100 * dispersion:.0f} % "
            f"(limit {100 * spread_limit:.0f} %)"
        )
    elif level is not None and level > level_limit:
        reason = (
            f"canary {100 * level:.0f} % slower than this worker's quietest "
            f"({median:.0f} against {reference_us:.0f} µs; limit {100 * level_limit:.0f} %)"
        )
    return ProbeReading(median, dispersion, level, reference_us, reason is None, reason)


def next_reference(reference_us: float | None, reading: ProbeReading) -> float | None:
    """The quietest level seen, updated with a quiet probe (a noisy one never sets it)."""
    if not reading.quiet:
        return reference_us
    return reading.median_us if reference_us is None else min(reference_us, reading.median_us)


@dataclass(frozen=True)
class WorkerCanary:
    """One worker's canary reads at its block edges: how many, their median and spread."""

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
    other_cores_busy: dict[str, float | None] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    canary_reads: int = 0

    @property
    def noisy(self) -> bool:
        """True when the verdict is noisy."""
        return self.verdict == NOISY

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return asdict(self)


def _field(record: Any, name: str) -> Any:
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)


def canary_reads_by_worker(records: Iterable[Any]) -> dict[int, list[float]]:
    """Every canary read at a block edge, per worker, in record order."""
    reads: dict[int, list[float]] = {}
    for record in records:
        worker = int(_field(record, "worker") or 0)
        for key in ("canary_us_start", "canary_us_end"):
            value = _field(record, key)
            if value is not None:
                reads.setdefault(worker, []).append(float(value))
    return reads


def _thresholds() -> dict[str, float]:
    return {
        "probe_spread": PROBE_SPREAD_LIMIT,
        "probe_level": PROBE_LEVEL_LIMIT,
        "run_spread": RUN_SPREAD_LIMIT,
        "run_between_workers": RUN_LEVEL_LIMIT,
    }


def assess_host(
    records: Iterable[Any],
    *,
    probes: Sequence[Mapping[str, Any]] = (),
    other_cores_busy: Mapping[str, float | None] | None = None,
    spread_limit: float = RUN_SPREAD_LIMIT,
    level_limit: float = RUN_LEVEL_LIMIT,
) -> HostStability:
    """The run's verdict from the canary reads of its records and its probes' readings.

    ``probes`` are probe readings as JSON (``quiet`` is read); ``other_cores_busy`` the
    largest busy share each other allowed core showed in the guards (recorded as the
    likely cause, not used by the rule). With no canary reads at all (an older run, or
    records of the original script) the verdict is stable only if nothing else says
    otherwise, and ``canary_reads`` is 0 so a reader can tell it was not observed.
    """
    reads = canary_reads_by_worker(records)
    workers = [
        WorkerCanary(w, len(v), float(np.median(v)), spread(v))
        for w, v in sorted(reads.items())
        if len(v) >= MIN_READS
    ]
    reasons = []
    for w in workers:
        if w.spread > spread_limit:
            reasons.append(
                f"worker {w.worker}'s canary reads disagree: spread {100 * w.spread:.0f} % "
                f"(limit {100 * spread_limit:.0f} %)"
            )
    between = None
    if len(workers) >= 2:
        levels = [w.median_us for w in workers]
        between = max(levels) / min(levels) - 1.0
        if between > level_limit:
            slow = max(workers, key=lambda w: w.median_us)
            fast = min(workers, key=lambda w: w.median_us)
            reasons.append(
                f"the workers ran at different speeds: worker {slow.worker}'s canary "
                f"{100 * between:.0f} % slower than worker {fast.worker}'s "
                f"(limit {100 * level_limit:.0f} %)"
            )
    not_quiet = [p for p in probes if not p.get("quiet", True)]
    if not_quiet:
        reasons.append(
            f"{len(not_quiet)} of {len(probes)} probes before a worker or case were not quiet "
            "(measured with --allow-busy)"
        )
    return HostStability(
        verdict=NOISY if reasons else STABLE,
        reasons=reasons,
        workers=workers,
        between_workers=between,
        probes_not_quiet=len(not_quiet),
        probes=len(probes),
        other_cores_busy=dict(other_cores_busy or {}),
        thresholds={
            **_thresholds(),
            "run_spread": spread_limit,
            "run_between_workers": level_limit,
        },
        canary_reads=sum(len(v) for v in reads.values()),
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
