"""Statistics on numbers only: block medians, the PR's reduction, intervals, tests, a verdict.

Pure functions; no files, no torch. Each variant's figure is the PR's: the median
over blocks of each block's median host latency (per worker process, then their
geometric mean), and the PR's reduction is ``100 * (1 - fixed / baseline)`` of those
(``pr_reduction_pct``). The headline ``reduction_pct`` is the estimate of the interval
the verdict uses, so it always lies inside that interval: with workers the two are the
same number; in one process the PR's ratio of medians is not the Hodges–Lehmann
centre and can lie outside its interval, so the headline is the Hodges–Lehmann estimate.

One interval per comparison, and the verdict, the gate and the MDE all use it:

- **several worker processes** (the default design): each worker's own headline
  ``θ_w = ln(median fixed_w / median baseline_w)`` over its blocks, and a Student t
  interval of their mean with W − 1 degrees of freedom. Its spread holds everything
  that differs between processes and moments (memory placement, heap layout,
  temporal regimes) as well as the block noise inside each worker, so it predicts
  a rerun; its variance is never taken below what the block noise inside the workers
  gives (``within_worker_variance``), so workers that agree by chance do not narrow it
  (see ``worker_t_interval``);
- **one process** (``processes=1``, the original design, and ``paired_benchmark`` with
  a dict of callables):
  the Hodges–Lehmann interval of the per-block log-ratios, exact and
  distribution-free, labelled with its achieved level (below 95 % for n <= 5). It
  sees only the noise inside that process.

Beside the headline, the paired analysis works on per-block log-ratios
``d_b = ln(fixed_b / baseline_b)`` of the block medians (one number per block,
so the block, not the call, is the unit of replication):

- Hodges–Lehmann estimate (median of the Walsh averages) with its exact
  distribution-free interval from the signed-rank distribution;
- Wilcoxon signed-rank p-value (scipy; exact for small n), and whether n blocks
  can reach significance at all (smallest two-sided p is ``2 / 2**n``).

The minimum detectable effect is the true reduction that the verdict rule itself
calls ``faster`` with probability 0.8 (noncentral t; checked by simulation in the
tests). A log-ratio ``d`` converts to a reduction as ``100 * (1 - exp(d))``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from embedbench.harness.robust import median, robust_sd
from embedbench.jsonvalues import plain

__all__ = [
    "ALPHA",
    "BETWEEN_PROCESSES",
    "CONFIDENCE",
    "FASTER",
    "INVALID",
    "NO_DIFFERENCE",
    "POWER",
    "SLOWER",
    "WITHIN_PROCESS",
    "HodgesLehmann",
    "PairSummary",
    "PairedStats",
    "ReductionDifference",
    "ReductionInterval",
    "block_medians",
    "combined_median",
    "design_mde_pct",
    "detectable_log_effect",
    "hodges_lehmann",
    "hodges_lehmann_interval",
    "labelled_level",
    "log_ratios",
    "log_to_reduction_pct",
    "median_of_block_medians",
    "min_achievable_p",
    "paired_statistics",
    "percentiles",
    "reduction_difference",
    "reduction_pct",
    "signed_rank_cdf",
    "significance_reachable",
    "summarize_pair",
    "verdict",
    "wilcoxon_p",
    "within_worker_variance",
    "worker_t_interval",
]

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.8
# Up to this many blocks the signed-rank null distribution is computed exactly.
_EXACT_SIGNED_RANK_MAX_N = 1000

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no detectable difference"
INVALID = "invalid"


def block_medians(blocks: Sequence[Sequence[float]]) -> np.ndarray:
    """The median of each block's samples."""
    if len(blocks) == 0:
        raise ValueError("no blocks to summarize")
    return np.array([median(b) for b in blocks])


def median_of_block_medians(blocks: Sequence[Sequence[float]]) -> float:
    """The PR's summary statistic for one variant."""
    return float(np.median(block_medians(blocks)))


def _groups(labels: Sequence[int]) -> list[list[int]]:
    """Block indices per worker, in worker order."""
    order = sorted(set(labels))
    return [[i for i, lab in enumerate(labels) if lab == w] for w in order]


def combined_median(medians: Sequence[float], workers: Sequence[int] | None = None) -> float:
    """The PR's statistic per process, combined over processes: each worker's median of
    its block medians, then their geometric mean (one process: the PR's statistic itself).

    A geometric mean, so that the reduction of the combined figures is exactly the mean
    of the workers' own log-ratios, the centre of the between-process interval.
    """
    arr = np.asarray(medians, dtype=float)
    labels = [0] * arr.size if workers is None else list(workers)
    if len(labels) != arr.size:
        raise ValueError(f"need one worker index per block: {len(labels)} for {arr.size}")
    per_worker = [float(np.median(arr[group])) for group in _groups(labels)]
    if len(per_worker) == 1:
        return per_worker[0]
    return float(np.exp(np.mean(np.log(per_worker))))


def reduction_pct(baseline: float, fixed: float) -> float:
    """100 × (1 − fixed / baseline): positive when the fixed variant is faster."""
    if baseline <= 0:
        raise ValueError(f"baseline latency must be positive, got {baseline}")
    return 100.0 * (1.0 - fixed / baseline)


def log_to_reduction_pct(d: float) -> float:
    """The reduction % that a log-ratio ``ln(fixed / baseline)`` stands for."""
    return 100.0 * (1.0 - math.exp(d))


def _paired_arrays(
    baseline_medians: Sequence[float], fixed_medians: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    base = np.asarray(baseline_medians, dtype=float)
    fixed = np.asarray(fixed_medians, dtype=float)
    if base.shape != fixed.shape or base.ndim != 1 or base.size == 0:
        raise ValueError("baseline and fixed need the same, non-zero number of blocks")
    return base, fixed


# --- paired log-ratio analysis -------------------------------------------------------------


def log_ratios(baseline_medians: Sequence[float], fixed_medians: Sequence[float]) -> np.ndarray:
    """Per-block paired log-ratios ``d_b = ln(fixed_b / baseline_b)`` (negative: fixed faster)."""
    base, fixed = _paired_arrays(baseline_medians, fixed_medians)
    if np.any(base <= 0) or np.any(fixed <= 0):
        raise ValueError("block medians must be positive to take log-ratios")
    return np.log(fixed / base)


def signed_rank_cdf(n: int) -> np.ndarray:
    """``P(T+ <= t)`` for t = 0 … n(n+1)/2 under the null of the signed-rank statistic.

    Exact: each rank 1…n enters T+ with probability 1/2, convolved one rank at a time.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    top = 0
    for rank in range(1, n + 1):
        shifted = pmf[: top + 1].copy()
        pmf[: top + 1] *= 0.5
        pmf[rank : rank + top + 1] += 0.5 * shifted
        top += rank
    return np.cumsum(pmf)


def _walsh_averages(d: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


@dataclass(frozen=True)
class HodgesLehmann:
    """Hodges–Lehmann shift estimate of log-ratios with its distribution-free interval.

    ``confidence`` is the interval's achieved coverage (at least the nominal one
    whenever n allows it; below it for n too small, e.g. n <= 5 at 95 %).
    """

    estimate: float
    ci: tuple[float, float]
    confidence: float
    n: int


def hodges_lehmann(d: Sequence[float], *, confidence: float = CONFIDENCE) -> HodgesLehmann:
    """Median of the Walsh averages of ``d`` and the signed-rank interval around it.

    The interval is ``[W_(k), W_(M+1-k)]`` of the M = n(n+1)/2 sorted Walsh
    averages, with k − 1 the largest t where ``P(T+ <= t) <= (1 − confidence)/2``
    (exact null distribution up to n = 1000, normal approximation above); k is
    kept at most the middle rank, so the estimate lies inside the interval for
    every n (1 and 2 included), with ties or equal values too. It inverts the
    Wilcoxon signed-rank test, so it excludes 0 exactly when that test rejects;
    its coverage holds for any continuous distribution of d that is symmetric
    about its centre, which paired blocks of exchangeable variants give.

    Chosen over a percentile bootstrap of median(d): with the ~20 blocks of a
    run the bootstrap distribution of a median is coarse and its percentile
    interval under-covers, and it needs a seed; this interval is exact at any
    n, deterministic, and the estimate is both robust (29 % breakdown) and
    nearly as efficient as the mean for normal data.
    """
    arr = np.asarray(d, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("need at least one log-ratio")
    n = arr.size
    walsh = _walsh_averages(arr)
    m = walsh.size
    tail = (1.0 - confidence) / 2.0
    if n <= _EXACT_SIGNED_RANK_MAX_N:
        cdf = signed_rank_cdf(n)
        below = np.nonzero(cdf <= tail)[0]
        c = int(below[-1]) if below.size else 0
        achieved = 1.0 - 2.0 * float(cdf[c])
    else:
        mean = n * (n + 1) / 4.0
        sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
        c = max(0, math.floor(mean - sps.norm.ppf(1.0 - tail) * sd - 0.5))
        achieved = 1.0 - 2.0 * float(sps.norm.cdf((c + 0.5 - mean) / sd))
    c = min(c, (m - 1) // 2)
    return HodgesLehmann(
        estimate=float(np.median(walsh)),
        ci=(float(walsh[c]), float(walsh[m - 1 - c])),
        confidence=achieved,
        n=n,
    )


def min_achievable_p(n: int) -> float:
    """Smallest two-sided p-value a signed-rank (or sign) test over n pairs can give: 2/2^n."""
    if n < 1:
        return 1.0
    return min(1.0, 2.0 / 2.0**n)


def significance_reachable(n: int, alpha: float = ALPHA) -> bool:
    """Whether n blocks can reach a two-sided p < ``alpha`` at all (n >= 6 for 0.05)."""
    return min_achievable_p(n) < alpha


def _wilcoxon_method(d: np.ndarray) -> str:
    """The method scipy's ``method="auto"`` picks for ``d`` (mirrors scipy >= 1.13)."""
    n = d.size
    nonzero = d[d != 0]
    ties = np.unique(np.abs(nonzero)).size < nonzero.size
    if n > 50:
        return "asymptotic"
    if not ties and nonzero.size == n:
        return "exact"
    return "permutation" if n <= 13 else "asymptotic"


def wilcoxon_p(d: Sequence[float]) -> tuple[float | None, str]:
    """Two-sided Wilcoxon signed-rank p-value of ``d`` against 0, and the method used.

    scipy's automatic choice: exact for n <= 50 without ties or zeros, an exact
    permutation for n <= 13 with them, the normal approximation otherwise. All
    zeros give p = 1; no data gives ``(None, "none")``.
    """
    arr = np.asarray(d, dtype=float)
    if arr.size == 0:
        return None, "none"
    if not np.any(arr != 0):
        return 1.0, "all zero"
    method = _wilcoxon_method(arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        result = sps.wilcoxon(arr, alternative="two-sided", method="auto")
    return float(result.pvalue), method


# --- the interval the verdict uses -----------------------------------------------------------

BETWEEN_PROCESSES = "between-process t"
WITHIN_PROCESS = "Hodges–Lehmann, one process"
# Asymptotic relative efficiency of the signed-rank test against the t test for normal
# data: the Hodges–Lehmann rule needs pi/3 times as many blocks for the same power.
_SIGNED_RANK_EFFICIENCY = 3.0 / math.pi


def _noncentrality_for_power(df: float, critical: float, power: float) -> float:
    """The noncentrality at which a t statistic with ``df`` exceeds ``critical`` w.p. ``power``.

    One tail only: at an effect that is detected with probability ``power`` the other
    tail's share is negligible (below 1e-3 for every df >= 1 at power 0.8).
    """

    def shortfall(ncp: float) -> float:
        return float(sps.nct.sf(critical, df, ncp)) - power

    high = max(1.0, critical)
    while shortfall(high) < 0:
        high *= 1.5
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-6))


def _log_to_mde_pct(m: float) -> float:
    return 100.0 * (1.0 - math.exp(-m))


def detectable_log_effect(
    sd: float,
    n: int,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    efficiency: float = 1.0,
) -> float:
    """Smallest |mean log-ratio| a two-sided t rule over n units detects with ``power``.

    Exact for the t interval (noncentral t with n − 1 degrees of freedom, two-sided
    level ``alpha``); ``efficiency`` < 1 scales n for a less efficient test (the
    signed-rank test: 3/π under normality).
    """
    if n < 2:
        raise ValueError(f"a minimum detectable effect needs at least 2 units, got {n}")
    if sd < 0:
        raise ValueError(f"sd must be non-negative, got {sd}")
    df = n - 1
    critical = float(sps.t.ppf(1.0 - alpha / 2.0, df))
    ncp = _noncentrality_for_power(df, critical, power)
    return ncp * sd / math.sqrt(n * efficiency)


def design_mde_pct(
    block_log_ratios: Sequence[float],
    *,
    blocks_per_worker: int,
    workers: int,
    power: float = POWER,
) -> float | None:
    """The reduction % a design of ``workers`` workers of ``blocks_per_worker`` blocks calls
    ``faster`` with ``power``, if each worker's headline varied only by the block noise
    that ``block_log_ratios`` (one worker's per-block log-ratios) show: a lower bound, since
    what differs between processes adds to it. None with fewer than 2 log-ratios."""
    d = np.asarray(block_log_ratios, dtype=float)
    if d.size < 2 or workers < 2 or blocks_per_worker < 1:
        return None
    sd_worker = float(np.std(d, ddof=1)) / math.sqrt(blocks_per_worker)
    return _log_to_mde_pct(detectable_log_effect(sd_worker, workers, power=power))


@dataclass(frozen=True)
class ReductionInterval:
    """The one interval of a comparison: reduction % bounds, achieved level, method, MDE.

    ``units`` counts what the interval is built from (worker processes for the
    between-process t, blocks for Hodges–Lehmann); ``estimate_pct`` is the point
    estimate of the same method, always inside ``[low, high]`` and the run's headline:
    the mean of the workers' own log-ratios (the PR's ratio of the combined medians), or
    the HL estimate (close to, but not, the PR's ratio of medians in one process).
    ``mde_pct`` is the true reduction this rule calls ``faster`` with probability
    0.8, from the noise the interval saw (None when it cannot be told).
    """

    low: float
    high: float
    level: float
    method: str
    units: int
    estimate_pct: float
    mde_pct: float | None
    unit_reductions_pct: tuple[float, ...] = ()

    @property
    def bounds(self) -> tuple[float, float]:
        """(low, high) in reduction %."""
        return self.low, self.high


def within_worker_variance(
    baseline_by_worker: Sequence[Sequence[float]],
    fixed_by_worker: Sequence[Sequence[float]],
) -> float | None:
    """The variance a worker's headline gets from its block noise alone: the per-block
    log-ratios' deviations from their worker's mean, pooled over the workers, their robust
    scale (1.4826 × MAD, so one slow block does not set it) squared over a worker's
    blocks. None where no worker has two blocks."""
    deviations: list[np.ndarray] = []
    inverse_blocks: list[float] = []
    for b, f in zip(baseline_by_worker, fixed_by_worker, strict=True):
        d = log_ratios(b, f)
        if d.size < 2:
            continue
        deviations.append((d - d.mean()) * math.sqrt(d.size / (d.size - 1)))
        inverse_blocks.append(1.0 / d.size)
    if not deviations:
        return None
    scale = robust_sd(np.concatenate(deviations), centre=0.0)
    return scale**2 * float(np.mean(inverse_blocks))


def worker_t_interval(
    baseline_by_worker: Sequence[Sequence[float]],
    fixed_by_worker: Sequence[Sequence[float]],
    *,
    confidence: float = CONFIDENCE,
    power: float = POWER,
) -> ReductionInterval:
    """The between-process interval from each worker's block medians (one list per worker).

    Each worker w contributes its own headline ``θ_w = ln(median fixed_w /
    median baseline_w)``; the interval is ``mean θ ± t_{W−1} · sd(θ) / √W``. With
    θ_w = μ + u_w + e_w (a worker-level random effect u and the worker's own block
    noise e), the sample variance of the θ_w estimates Var(u) + Var(e) exactly, so
    the interval needs no estimate of how the noise splits between the levels, and
    its coverage is exact for normal θ_w and equal blocks per worker. But with the few
    workers a run can afford (4 df) that variance is itself noisy, and when the workers
    happen to agree closely the interval is narrower than the block noise inside each
    worker allows: such runs gave most wrong calls on a case whose truth is zero
    (docs/archive/PERFORMANCE-2026-11.md, "An interval no narrower than the block noise"). So the
    variance is never taken below ``within_worker_variance``, the variance that the
    block noise alone gives a worker's headline: the modified Hartung–Knapp rule of
    random-effects meta-analysis with few studies (Röver, Knapp and Friede 2015),
    conservative where the workers agree by chance and unchanged where they differ by
    more than their block noise. A two-stage
    bootstrap counts the block noise twice and, with the few workers a run can
    afford, resamples too few units to cover (0.90–0.92 at 5 workers when the worker
    effect dominates, in a simulation of the tests' model); the t interval does not
    depend on a seed.
    """
    if len(baseline_by_worker) != len(fixed_by_worker):
        raise ValueError("need the same workers for baseline and fixed")
    if len(baseline_by_worker) < 2:
        raise ValueError("a between-process interval needs at least 2 workers")
    theta = np.array(
        [
            math.log(float(np.median(f)) / float(np.median(b)))
            for b, f in zip(baseline_by_worker, fixed_by_worker, strict=True)
        ]
    )
    if not np.all(np.isfinite(theta)):
        raise ValueError("block medians must be positive to take log-ratios")
    n = theta.size
    centre = float(np.mean(theta))
    floor = within_worker_variance(baseline_by_worker, fixed_by_worker)
    sd = math.sqrt(max(float(np.var(theta, ddof=1)), floor or 0.0))
    half = float(sps.t.ppf(0.5 + confidence / 2.0, n - 1)) * sd / math.sqrt(n)
    mde = detectable_log_effect(sd, n, alpha=1.0 - confidence, power=power)
    return ReductionInterval(
        low=log_to_reduction_pct(centre + half),
        high=log_to_reduction_pct(centre - half),
        level=confidence,
        method=BETWEEN_PROCESSES,
        units=n,
        estimate_pct=log_to_reduction_pct(centre),
        mde_pct=_log_to_mde_pct(mde),
        unit_reductions_pct=tuple(log_to_reduction_pct(float(t)) for t in theta),
    )


def hodges_lehmann_interval(
    baseline_medians: Sequence[float],
    fixed_medians: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    power: float = POWER,
) -> ReductionInterval:
    """The one-process interval: Hodges–Lehmann of the per-block log-ratios.

    Its ``level`` is the achieved coverage of the exact signed-rank interval (at
    least ``confidence`` from 6 blocks up; 93.75 % at 5 blocks, less below). The
    MDE is that of the signed-rank rule: the t rule's, with n scaled by 3/π.
    """
    d = log_ratios(baseline_medians, fixed_medians)
    hl = hodges_lehmann(d, confidence=confidence)
    low_log, high_log = hl.ci
    mde = None
    if d.size >= 2:
        m = detectable_log_effect(
            float(np.std(d, ddof=1)),
            d.size,
            alpha=1.0 - hl.confidence,
            power=power,
            efficiency=_SIGNED_RANK_EFFICIENCY,
        )
        mde = _log_to_mde_pct(m)
    return ReductionInterval(
        low=log_to_reduction_pct(high_log),
        high=log_to_reduction_pct(low_log),
        level=hl.confidence,
        method=WITHIN_PROCESS,
        units=int(d.size),
        estimate_pct=log_to_reduction_pct(hl.estimate),
        mde_pct=mde,
    )


def labelled_level(level: float) -> float:
    """The level an interval is labelled with: 95 % when it covers at least that (an exact
    signed-rank interval achieves a little more, e.g. 95.16 % at 20 blocks), else its
    true, lower level (93.75 % for Hodges–Lehmann over 5 blocks)."""
    return CONFIDENCE if level >= CONFIDENCE - 1e-9 else float(level)


def verdict(
    ci: tuple[float, float],
    *,
    level: float = CONFIDENCE,
    valid: bool = True,
) -> str:
    """``faster``/``slower`` only when a >= 95 % interval excludes 0.

    ``ci`` is an interval of the reduction % (positive: fixed faster) with achieved
    coverage ``level``. An interval below the nominal level (Hodges–Lehmann over
    5 blocks or fewer) names no direction. The noise is counted once, in the
    interval: nothing else widens it (an A/A check is reported beside it).
    """
    if not valid:
        return INVALID
    if level < CONFIDENCE - 1e-9:
        return NO_DIFFERENCE
    low, high = ci
    if low > 0:
        return FASTER
    if high < 0:
        return SLOWER
    return NO_DIFFERENCE


@dataclass(frozen=True)
class PairedStats:
    """The paired log-ratio analysis of one comparison (see the module docstring)."""

    log_ratios: tuple[float, ...]
    hl_log: float
    hl_ci_log: tuple[float, float]
    hl_confidence: float
    hl_reduction_pct: float
    hl_ci95_pct: tuple[float, float]
    wilcoxon_p: float | None
    wilcoxon_method: str
    significance_reachable: bool
    min_achievable_p: float


def paired_statistics(
    baseline_medians: Sequence[float],
    fixed_medians: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
) -> PairedStats:
    """Log-ratios, Hodges–Lehmann estimate and interval, and Wilcoxon p from block medians."""
    d = log_ratios(baseline_medians, fixed_medians)
    hl = hodges_lehmann(d, confidence=confidence)
    p, method = wilcoxon_p(d)
    low_log, high_log = hl.ci
    return PairedStats(
        log_ratios=tuple(float(x) for x in d),
        hl_log=hl.estimate,
        hl_ci_log=hl.ci,
        hl_confidence=hl.confidence,
        hl_reduction_pct=log_to_reduction_pct(hl.estimate),
        hl_ci95_pct=(log_to_reduction_pct(high_log), log_to_reduction_pct(low_log)),
        wilcoxon_p=p,
        wilcoxon_method=method,
        significance_reachable=significance_reachable(d.size, ALPHA),
        min_achievable_p=min_achievable_p(d.size),
    )


@dataclass(frozen=True)
class PairSummary:
    """The summary of one paired comparison.

    ``host_us`` is the median of block medians per variant (in each worker process, then
    their geometric mean, see ``combined_median``; one process: exactly the PR's), and
    ``pr_reduction_pct`` the PR's ``100 (1 − fixed / baseline)`` of it. ``reduction_pct``,
    the headline, is the estimate of the verdict's interval (``interval.estimate_pct``),
    so it lies inside it: with workers it equals ``pr_reduction_pct`` (up to float
    rounding); in one process it is the Hodges–Lehmann estimate.
    ``pooled_reduction_pct`` is the PR's statistic over every block pooled across
    workers, kept for comparison: when processes differ in speed, pooling mixes their
    levels and it moves more between runs than the headline does. ``interval`` is the
    one interval the verdict, the gate and the MDE use (``reduction_ci95_pct`` in the
    JSON, with ``ci_level`` and ``interval_method``). The ``hl_*`` and ``wilcoxon_*``
    fields are the paired analysis of all blocks pooled, a within-process view kept
    beside it.
    """

    host_us: dict[str, float]
    reduction_pct: float
    interval: ReductionInterval
    verdict: str
    blocks: int
    workers: int
    pr_reduction_pct: float
    pooled_reduction_pct: float | None = None
    log_ratios: tuple[float, ...] = ()
    hl_reduction_pct: float | None = None
    hl_ci95_pct: tuple[float, float] | None = None
    hl_confidence: float | None = None
    wilcoxon_p: float | None = None
    wilcoxon_method: str | None = None
    significance_reachable: bool = False

    @property
    def reduction_ci95_pct(self) -> tuple[float, float]:
        """The verdict's interval (its true level is ``interval.level``)."""
        return self.interval.bounds

    @property
    def mde_pct(self) -> float | None:
        """The verdict rule's minimum detectable reduction (80 % power)."""
        return self.interval.mde_pct

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (tuples as lists, non-finite floats as None)."""
        interval = self.interval
        return plain(
            {
                "host_us": dict(self.host_us),
                "reduction_pct": self.reduction_pct,
                "pr_reduction_pct": self.pr_reduction_pct,
                "reduction_ci95_pct": interval.bounds,
                "ci_level": interval.level,
                "interval_method": interval.method,
                "interval_units": interval.units,
                "interval_estimate_pct": interval.estimate_pct,
                "worker_reduction_pct": list(interval.unit_reductions_pct) or None,
                "verdict": self.verdict,
                "blocks": self.blocks,
                "workers": self.workers,
                "pooled_reduction_pct": self.pooled_reduction_pct,
                "log_ratios": self.log_ratios,
                "hl_reduction_pct": self.hl_reduction_pct,
                "hl_ci95_pct": self.hl_ci95_pct,
                "hl_confidence": self.hl_confidence,
                "wilcoxon_p": self.wilcoxon_p,
                "wilcoxon_method": self.wilcoxon_method,
                "significance_reachable": self.significance_reachable,
                "mde_pct": interval.mde_pct,
            }
        )


def summarize_pair(
    baseline_blocks: Sequence[Sequence[float]],
    fixed_blocks: Sequence[Sequence[float]],
    *,
    workers: Sequence[int] | None = None,
    valid: bool = True,
    confidence: float = CONFIDENCE,
    power: float = POWER,
) -> PairSummary:
    """Headline figures for one case: per-variant medians, reduction, the interval, verdict.

    The headline reduction is the interval's own estimate; the PR's ratio of the
    per-variant medians is ``pr_reduction_pct`` beside it.

    ``baseline_blocks[i]`` and ``fixed_blocks[i]`` are the samples of block ``i``;
    ``workers[i]`` is the worker process that ran it (None: one process). With
    two or more workers the interval is the between-process t, else Hodges–Lehmann.
    """
    base_medians = block_medians(baseline_blocks)
    fixed_medians = block_medians(fixed_blocks)
    if workers is not None and len(workers) != base_medians.size:
        raise ValueError(f"need one worker index per block: {len(workers)} for {base_medians.size}")
    labels = list(workers) if workers is not None else [0] * base_medians.size
    groups = _groups(labels)
    if len(groups) >= 2:
        interval = worker_t_interval(
            [base_medians[g] for g in groups],
            [fixed_medians[g] for g in groups],
            confidence=confidence,
            power=power,
        )
    else:
        interval = hodges_lehmann_interval(
            base_medians, fixed_medians, confidence=confidence, power=power
        )
    paired = paired_statistics(base_medians, fixed_medians, confidence=confidence)
    base = combined_median(base_medians, labels)
    fixed = combined_median(fixed_medians, labels)
    pooled = (float(np.median(base_medians)), float(np.median(fixed_medians)))
    return PairSummary(
        host_us={"baseline": base, "fixed": fixed},
        reduction_pct=interval.estimate_pct,
        interval=interval,
        verdict=verdict(interval.bounds, level=interval.level, valid=valid),
        blocks=int(base_medians.size),
        workers=len(groups),
        pr_reduction_pct=reduction_pct(base, fixed),
        pooled_reduction_pct=reduction_pct(*pooled),
        log_ratios=paired.log_ratios,
        hl_reduction_pct=paired.hl_reduction_pct,
        hl_ci95_pct=paired.hl_ci95_pct,
        hl_confidence=paired.hl_confidence,
        wilcoxon_p=paired.wilcoxon_p,
        wilcoxon_method=paired.wilcoxon_method,
        significance_reachable=paired.significance_reachable,
    )


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Named percentiles, e.g. {"p5": .., "p50": .., "p95": ..}."""
    arr = np.asarray(values, dtype=float)
    return {f"p{q:g}": float(np.percentile(arr, q)) for q in (5, 50, 95)}


@dataclass(frozen=True)
class ReductionDifference:
    """Run B's reduction minus run A's, in percentage points, with its interval.

    ``units`` counts each run's worker processes; ``df`` is Welch's degrees of freedom
    (infinite when neither run's workers vary).
    """

    difference_pp: float
    low: float
    high: float
    level: float
    df: float
    units: tuple[int, int]

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly on one side of 0 (the runs differ)."""
        return self.low > 0.0 or self.high < 0.0


def reduction_difference(
    reductions_a: Sequence[float],
    reductions_b: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
) -> ReductionDifference:
    """B − A of two independent runs' headline reductions (%), from their workers' own.

    Each run's headline is ``100 (1 − e^θ̄)`` with θ̄ the mean of its workers' log-ratios
    ``θ_w = ln(1 − r_w / 100)`` (the centre of its between-process t interval). The
    standard error of each headline in percentage points is the delta method's
    ``100 e^θ̄ · sd(θ) / √W``; the interval is Welch's t over the two, so a machine or
    day that moves the reduction beyond both runs' own noise shows as an interval
    without 0. Needs at least 2 workers per run.
    """
    a = np.asarray(reductions_a, dtype=float)
    b = np.asarray(reductions_b, dtype=float)
    if a.size < 2 or b.size < 2:
        raise ValueError(
            f"a difference between runs needs at least 2 workers per run, got {a.size} and {b.size}"
        )
    if np.any(a >= 100.0) or np.any(b >= 100.0):
        raise ValueError("worker reductions must be below 100 %")
    parts = []
    for r in (a, b):
        theta = np.log1p(-r / 100.0)
        centre = float(np.mean(theta))
        scale = 100.0 * math.exp(centre)
        parts.append(
            (log_to_reduction_pct(centre), scale**2 * float(np.var(theta, ddof=1)) / theta.size)
        )
    (estimate_a, var_a), (estimate_b, var_b) = parts
    difference = estimate_b - estimate_a
    total = var_a + var_b
    if total == 0.0:
        return ReductionDifference(
            difference, difference, difference, confidence, math.inf, (a.size, b.size)
        )
    df = total**2 / (var_a**2 / (a.size - 1) + var_b**2 / (b.size - 1))
    half = float(sps.t.ppf(0.5 + confidence / 2.0, df)) * math.sqrt(total)
    return ReductionDifference(
        difference, difference - half, difference + half, confidence, df, (a.size, b.size)
    )
