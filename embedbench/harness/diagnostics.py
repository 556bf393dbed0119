"""Diagnostics of one paired comparison: is the headline number disturbed by something?

Pure functions on numbers (no files, no timing). From the per-block samples of
both variants, which variant ran first in each block, and the CPU MHz read at
each block's start and end, they report:

- order effect: the median log-ratio over baseline-first blocks against the
  median over fixed-first blocks (Mann–Whitney U over the two groups);
- drift: Spearman rank correlation of the block index with ``d_b`` and with the
  baseline block medians;
- outlier blocks: ``d_b`` outside median ± k · 1.4826 · MAD (or Tukey fences),
  kept in the result but flagged, with the reduction recomputed without them;
- within-block spread: IQR / median of each block, per variant;
- frequency excursion: blocks whose MHz moved more than 2 % from the run's
  median MHz, or "not observable" when there are no readings or they never change.

Every result has ``to_json()`` with plain JSON values (non-finite floats as None).
Log-ratios are ``d_b = ln(fixed_b / baseline_b)``; as a reduction, ``100 (1 − e^d)``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from embedbench.cases import VARIANTS
from embedbench.harness import stats
from embedbench.harness.blocks import HOST, BlockTable
from embedbench.harness.robust import MAD_SCALE, robust_sd
from embedbench.jsonvalues import plain

__all__ = [
    "ALPHA",
    "BASELINE",
    "FIXED",
    "MAD_K",
    "MAD_SCALE",
    "MHZ_TOLERANCE_PCT",
    "MIN_WORKERS_FOR_OUTLIERS",
    "REASON_CANARY",
    "REASON_FAULTS",
    "REASON_FAULTS_FLOOR",
    "TUKEY_K",
    "WORKER_PREDICTION_LEVEL",
    "Drift",
    "FrequencyExcursion",
    "OrderEffect",
    "OutlierWorkers",
    "Outliers",
    "PairDiagnostics",
    "Spread",
    "WorkerFacts",
    "diagnose_pair",
    "diagnose_table",
    "drift",
    "frequency_excursions",
    "order_effect",
    "outlier_blocks",
    "outlier_workers",
    "relative_iqr",
    "within_block_spread",
]

ALPHA = 0.05
MAD_K = 3.0
TUKEY_K = 1.5
MHZ_TOLERANCE_PCT = 2.0
BASELINE, FIXED = VARIANTS


class _JsonMixin:
    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (tuples as lists, non-finite floats as None)."""
        return plain(asdict(self))  # type: ignore[call-overload]


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


# --- order effect ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class OrderEffect(_JsonMixin):
    """Median log-ratio per run order, their difference, and a Mann–Whitney p-value.

    ``difference_pct_points`` = reduction % of baseline-first blocks minus that of
    fixed-first blocks; 0 when the position in the block does not matter.
    """

    n_baseline_first: int
    n_fixed_first: int
    baseline_first_log: float | None
    fixed_first_log: float | None
    baseline_first_reduction_pct: float | None
    fixed_first_reduction_pct: float | None
    difference_pct_points: float | None
    p_value: float | None
    detected: bool
    alpha: float


def order_effect(d: Sequence[float], first: Sequence[str]) -> OrderEffect:
    """Compare ``d`` over blocks where the baseline ran first with blocks where fixed did."""
    arr = np.asarray(d, dtype=float)
    if len(first) != arr.size:
        raise ValueError(f"need one first-variant per block: {len(first)} for {arr.size} blocks")
    order = np.asarray([str(f) for f in first])
    unknown = set(order.tolist()) - {BASELINE, FIXED}
    if unknown:
        raise ValueError(f"first variants must be {BASELINE!r} or {FIXED!r}, got {sorted(unknown)}")
    base_first, fixed_first = arr[order == BASELINE], arr[order == FIXED]
    if base_first.size == 0 or fixed_first.size == 0:
        return OrderEffect(
            n_baseline_first=int(base_first.size),
            n_fixed_first=int(fixed_first.size),
            baseline_first_log=None,
            fixed_first_log=None,
            baseline_first_reduction_pct=None,
            fixed_first_reduction_pct=None,
            difference_pct_points=None,
            p_value=None,
            detected=False,
            alpha=ALPHA,
        )
    bf, ff = float(np.median(base_first)), float(np.median(fixed_first))
    red_bf, red_ff = stats.log_to_reduction_pct(bf), stats.log_to_reduction_pct(ff)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        p = float(sps.mannwhitneyu(base_first, fixed_first, alternative="two-sided").pvalue)
    p_or_none = _finite_or_none(p)
    return OrderEffect(
        n_baseline_first=int(base_first.size),
        n_fixed_first=int(fixed_first.size),
        baseline_first_log=bf,
        fixed_first_log=ff,
        baseline_first_reduction_pct=red_bf,
        fixed_first_reduction_pct=red_ff,
        difference_pct_points=red_bf - red_ff,
        p_value=p_or_none,
        detected=p_or_none is not None and p_or_none < ALPHA,
        alpha=ALPHA,
    )


# --- drift ----------------------------------------------------------------------------------


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    if x.size < 3 or np.all(y == y[0]):
        return None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sps.spearmanr(x, y)
    return _finite_or_none(float(result.statistic)), _finite_or_none(float(result.pvalue))


@dataclass(frozen=True)
class Drift(_JsonMixin):
    """Spearman rank correlation of the block index with ``d_b`` and with baseline medians.

    ``None`` correlations: fewer than 3 blocks, or a constant series.
    """

    rho_log_ratio: float | None
    p_log_ratio: float | None
    rho_baseline: float | None
    p_baseline: float | None
    detected: bool
    alpha: float


def drift(d: Sequence[float], baseline_medians: Sequence[float]) -> Drift:
    """Whether the comparison (``d_b``) or the baseline level moves along the run."""
    arr = np.asarray(d, dtype=float)
    base = np.asarray(baseline_medians, dtype=float)
    if base.shape != arr.shape:
        raise ValueError("need one baseline median per log-ratio")
    index = np.arange(arr.size, dtype=float)
    rho_d, p_d = _spearman(index, arr)
    rho_b, p_b = _spearman(index, base)
    detected = any(p is not None and p < ALPHA for p in (p_d, p_b))
    return Drift(rho_d, p_d, rho_b, p_b, detected, ALPHA)


# --- outliers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outliers(_JsonMixin):
    """Blocks whose log-ratio lies outside the fences; kept, flagged, and a sensitivity line.

    ``reduction_pct_*`` is the PR's statistic (ratio of medians of block medians, all
    blocks pooled) and ``hl_reduction_pct_*`` the Hodges–Lehmann estimate (the
    one-process headline), with all blocks and without the flagged ones (equal when
    nothing is flagged; None when nothing would remain).
    """

    rule: str
    k: float
    center: float
    low: float
    high: float
    flagged: list[int]
    reduction_pct_all: float
    reduction_pct_without: float | None
    hl_reduction_pct_all: float
    hl_reduction_pct_without: float | None


def _fences(d: np.ndarray, rule: str, k: float) -> tuple[float, float, float]:
    center = float(np.median(d))
    if rule == "mad":
        scale = robust_sd(d, center)
        if scale == 0.0:
            # More than half the blocks share one value: fall back to the mean deviation.
            scale = math.sqrt(math.pi / 2.0) * float(np.mean(np.abs(d - center)))
        return center, center - k * scale, center + k * scale
    if rule == "tukey":
        q1, q3 = (float(q) for q in np.percentile(d, [25, 75]))
        return center, q1 - k * (q3 - q1), q3 + k * (q3 - q1)
    raise ValueError(f"outlier rule must be 'mad' or 'tukey', got {rule!r}")


def outlier_blocks(
    baseline_medians: Sequence[float],
    fixed_medians: Sequence[float],
    *,
    rule: str = "mad",
) -> Outliers:
    """Flag blocks by their log-ratio: median ± k·1.4826·MAD (k = 3) or Tukey (k = 1.5)."""
    base = np.asarray(baseline_medians, dtype=float)
    fixed = np.asarray(fixed_medians, dtype=float)
    d = stats.log_ratios(base, fixed)
    k = MAD_K if rule == "mad" else TUKEY_K
    center, low, high = _fences(d, rule, k)
    out = (d < low) | (d > high)
    flagged = [int(i) for i in np.nonzero(out)[0]]
    keep = ~out

    def headline(mask: np.ndarray) -> float:
        return stats.reduction_pct(float(np.median(base[mask])), float(np.median(fixed[mask])))

    def hl(mask: np.ndarray) -> float:
        return stats.log_to_reduction_pct(stats.hodges_lehmann(d[mask]).estimate)

    everything = np.ones_like(keep)
    return Outliers(
        rule=rule,
        k=k,
        center=center,
        low=low,
        high=high,
        flagged=flagged,
        reduction_pct_all=headline(everything),
        reduction_pct_without=headline(keep) if keep.any() else None,
        hl_reduction_pct_all=hl(everything),
        hl_reduction_pct_without=hl(keep) if keep.any() else None,
    )


# --- within-block spread --------------------------------------------------------------------


@dataclass(frozen=True)
class Spread(_JsonMixin):
    """IQR / median of each block's samples, per variant, with the median and max over blocks."""

    per_block: dict[str, list[float | None]]
    median: dict[str, float | None]
    max: dict[str, float | None]


def relative_iqr(samples: Sequence[float]) -> float | None:
    """(Q3 − Q1) / median of one block's samples; None for an empty block or a zero median."""
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0:
        return None
    med = float(np.median(arr))
    if med == 0.0:
        return None
    q1, q3 = np.percentile(arr, [25, 75])
    return float(q3 - q1) / med


def within_block_spread(blocks: Mapping[str, Sequence[Sequence[float]]]) -> Spread:
    """Relative IQR of every block of every variant (``{"baseline": blocks, "fixed": blocks}``)."""
    per_block: dict[str, list[float | None]] = {}
    median: dict[str, float | None] = {}
    largest: dict[str, float | None] = {}
    for name, variant_blocks in blocks.items():
        values = [relative_iqr(b) for b in variant_blocks]
        known = [v for v in values if v is not None]
        per_block[name] = values
        median[name] = float(np.median(known)) if known else None
        largest[name] = float(np.max(known)) if known else None
    return Spread(per_block, median, largest)


# --- frequency excursions -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FrequencyExcursion(_JsonMixin):
    """Blocks whose CPU MHz moved more than ``tolerance_pct`` from the run's median MHz.

    ``observable`` is False (and the other numbers None) when there are no
    readings, or when every reading is the same value: a source that never
    changes (e.g. a VM's nominal /proc/cpuinfo clock) cannot show an excursion.
    """

    observable: bool
    reason: str | None
    tolerance_pct: float
    median_mhz: float | None
    min_mhz: float | None
    max_mhz: float | None
    deviation_pct: list[float | None] | None
    flagged: list[int] | None


def frequency_excursions(
    mhz: Sequence[Sequence[float | None] | None] | None,
) -> FrequencyExcursion:
    """Per block, the largest |MHz − run median| in %, and the blocks above the tolerance.

    ``mhz[b]`` holds the readings of block ``b`` (e.g. start and end of each
    variant); ``None`` entries are readings that could not be taken.
    """
    per_block = [
        [float(x) for x in (readings or ()) if x is not None and math.isfinite(float(x))]
        for readings in (mhz or ())
    ]
    values = [x for block in per_block for x in block]
    if not values:
        return FrequencyExcursion(
            observable=False,
            reason="no CPU frequency readings (source unavailable)",
            tolerance_pct=MHZ_TOLERANCE_PCT,
            median_mhz=None,
            min_mhz=None,
            max_mhz=None,
            deviation_pct=None,
            flagged=None,
        )
    lowest, highest = min(values), max(values)
    if lowest == highest:
        return FrequencyExcursion(
            observable=False,
            reason=f"every reading is {lowest:g} MHz: the source does not show changes",
            tolerance_pct=MHZ_TOLERANCE_PCT,
            median_mhz=lowest,
            min_mhz=lowest,
            max_mhz=highest,
            deviation_pct=None,
            flagged=None,
        )
    center = float(np.median(values))
    deviation: list[float | None] = [
        max(abs(x - center) for x in block) / center * 100.0 if block else None
        for block in per_block
    ]
    flagged = [i for i, dev in enumerate(deviation) if dev is not None and dev > MHZ_TOLERANCE_PCT]
    return FrequencyExcursion(
        observable=True,
        reason=None,
        tolerance_pct=MHZ_TOLERANCE_PCT,
        median_mhz=center,
        min_mhz=lowest,
        max_mhz=highest,
        deviation_pct=deviation,
        flagged=flagged,
    )


# --- everything for one pair ----------------------------------------------------------------


# A worker is an outlier when its headline lies outside the others' prediction interval at
# this level (t with W − 2 df): at 5 workers about 13 of the others' sds away, so a clean
# run flags about 1 worker in 1000, and the rule needs at least 4 workers.
WORKER_PREDICTION_LEVEL = 0.999
MIN_WORKERS_FOR_OUTLIERS = 4
# What names a likely reason: a canary this much above the others' median, page faults
# per call this many times the others' (and at least half a fault a call), a first block
# this much further from the worker's other blocks than they spread.
REASON_CANARY = 0.20
REASON_FAULTS = 2.0
REASON_FAULTS_FLOOR = 0.5


@dataclass(frozen=True)
class WorkerFacts:
    """What one worker's blocks of a case recorded beside their timings."""

    canary_us: float | None = None
    faults_per_call: float | None = None
    block_log_ratios: tuple[float, ...] = ()


@dataclass(frozen=True)
class OutlierWorkers(_JsonMixin):
    """Workers whose own headline the others do not support, with a likely reason each and
    the reduction without them (kept in the headline; flagged, as outlier blocks are)."""

    workers: int
    flagged: list[int]
    reasons: dict[str, str]
    reductions_pct: dict[str, float]
    reduction_pct_without: float | None
    level: float = WORKER_PREDICTION_LEVEL


def _worker_reason(worker: int, facts: Mapping[int, WorkerFacts]) -> str:
    mine = facts.get(worker, WorkerFacts())
    others = [f for w, f in facts.items() if w != worker]
    found = []
    canaries = [f.canary_us for f in others if f.canary_us]
    if mine.canary_us and canaries:
        above = mine.canary_us / float(np.median(canaries)) - 1.0
        if above > REASON_CANARY:
            found.append(f"its canary {100 * above:.0f} % above the others'")
    faults = [f.faults_per_call for f in others if f.faults_per_call is not None]
    if mine.faults_per_call is not None and faults:
        typical = float(np.median(faults))
        if (
            mine.faults_per_call >= REASON_FAULTS_FLOOR
            and mine.faults_per_call > REASON_FAULTS * max(typical, 1e-9)
        ):
            found.append(f"{mine.faults_per_call:.1f} page faults a call against {typical:.1f}")
    d = np.asarray(mine.block_log_ratios, dtype=float)
    if d.size >= 3:
        rest = d[1:]
        scale = max(float(np.max(rest) - np.min(rest)), 1e-12)
        if abs(d[0] - float(np.median(rest))) > scale:
            found.append(
                f"its first block {stats.log_to_reduction_pct(float(d[0])):.1f} % against "
                f"{stats.log_to_reduction_pct(float(np.median(rest))):.1f} % in its others"
            )
    return (
        "; ".join(found) or "no recorded cause (canary, page faults and first block as the others')"
    )


def outlier_workers(
    reductions_pct: Mapping[int, float],
    facts: Mapping[int, WorkerFacts] | None = None,
    *,
    level: float = WORKER_PREDICTION_LEVEL,
) -> OutlierWorkers:
    """Flag each worker whose headline reduction lies outside the ``level`` prediction
    interval of the other workers' (their mean ± t_{W−2} · sd · √(1 + 1/(W−1)), on
    log-ratios), with a likely reason from ``facts`` and the mean without the flagged."""
    workers = sorted(reductions_pct)
    theta = {w: math.log1p(-float(reductions_pct[w]) / 100.0) for w in workers}
    flagged: list[int] = []
    if len(workers) >= MIN_WORKERS_FOR_OUTLIERS:
        factor = float(sps.t.ppf(0.5 + level / 2.0, len(workers) - 2))
        for w in workers:
            others = np.array([theta[o] for o in workers if o != w])
            sd = float(np.std(others, ddof=1))
            if sd > 0 and abs(theta[w] - float(np.mean(others))) > factor * sd * math.sqrt(
                1.0 + 1.0 / others.size
            ):
                flagged.append(w)
    kept = [theta[w] for w in workers if w not in flagged]
    return OutlierWorkers(
        workers=len(workers),
        flagged=flagged,
        reasons={str(w): _worker_reason(w, facts or {}) for w in flagged},
        reductions_pct={str(w): float(reductions_pct[w]) for w in flagged},
        reduction_pct_without=(
            stats.log_to_reduction_pct(float(np.mean(kept))) if flagged and kept else None
        ),
        level=level,
    )


@dataclass(frozen=True)
class PairDiagnostics(_JsonMixin):
    """All diagnostics of one paired comparison (``order_effect`` None without an order)."""

    blocks: int
    log_ratios: list[float]
    order_effect: OrderEffect | None
    drift: Drift
    outliers: Outliers
    spread: Spread
    frequency: FrequencyExcursion

    def notes(self) -> list[str]:
        """One short line per diagnostic that fired, for a report."""
        lines = []
        if self.order_effect is not None and self.order_effect.detected:
            lines.append(
                f"order effect: baseline-first {self.order_effect.baseline_first_reduction_pct:.2f}"
                f" % vs fixed-first {self.order_effect.fixed_first_reduction_pct:.2f} % "
                f"(p = {self.order_effect.p_value:.3g})"
            )
        if self.drift.detected:
            lines.append(
                f"drift: Spearman rho {_fmt(self.drift.rho_log_ratio)} with d_b, "
                f"{_fmt(self.drift.rho_baseline)} with baseline medians"
            )
        if self.outliers.flagged:
            lines.append(
                f"outlier blocks {self.outliers.flagged}: reduction "
                f"{self.outliers.reduction_pct_all:.2f} % with them, "
                f"{_fmt(self.outliers.reduction_pct_without)} % without"
            )
        if self.frequency.observable and self.frequency.flagged:
            lines.append(
                f"CPU frequency moved > {self.frequency.tolerance_pct:g} % in blocks "
                f"{self.frequency.flagged}"
            )
        return lines


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def diagnose_pair(
    baseline_blocks: Sequence[Sequence[float]],
    fixed_blocks: Sequence[Sequence[float]],
    *,
    first: Sequence[str] | None = None,
    mhz: Sequence[Sequence[float | None] | None] | None = None,
) -> PairDiagnostics:
    """All diagnostics from per-block samples, run order (``first``) and MHz readings."""
    base = stats.block_medians(baseline_blocks)
    fixed = stats.block_medians(fixed_blocks)
    d = stats.log_ratios(base, fixed)
    return PairDiagnostics(
        blocks=int(d.size),
        log_ratios=[float(x) for x in d],
        order_effect=None if first is None else order_effect(d, first),
        drift=drift(d, base),
        outliers=outlier_blocks(base, fixed),
        spread=within_block_spread({BASELINE: baseline_blocks, FIXED: fixed_blocks}),
        frequency=frequency_excursions(mhz),
    )


def diagnose_table(table: BlockTable) -> PairDiagnostics:
    """``diagnose_pair`` of a case's block table, on host latency (the headline metric)."""
    return diagnose_pair(
        table.metric(BASELINE, HOST),
        table.metric(FIXED, HOST),
        first=list(table.first),
        mhz=[list(readings) for readings in table.mhz],
    )
