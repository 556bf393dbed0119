"""Statistics on numbers only: block medians, the PR's reduction, intervals, tests, a verdict.

Pure functions; no files, no torch. The headline statistic is the PR's: the
median over blocks of each block's median host latency, per variant, and
``reduction_pct = 100 * (1 - fixed / baseline)``. Its 95 % interval comes from
a paired block bootstrap: blocks are resampled with replacement, keeping each
block's baseline and fixed medians together.

Beside the headline, the paired analysis works on per-block log-ratios
``d_b = ln(fixed_b / baseline_b)`` of the block medians (one number per block,
so the block, not the call, is the unit of replication):

- Hodges–Lehmann estimate (median of the Walsh averages) with its exact
  distribution-free interval from the signed-rank distribution;
- Wilcoxon signed-rank p-value (scipy; exact for small n), and whether n blocks
  can reach significance at all (smallest two-sided p is ``2 / 2**n``);
- minimum detectable effect at α = 0.05, power 0.8 from the spread of ``d_b``;
- a verdict that names a direction only when the interval clears a noise band.

A log-ratio ``d`` converts to a reduction as ``100 * (1 - exp(d))``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.8
# A two-sided sign or signed-rank test over n paired blocks can reach p < 0.05 only
# from n = 6 (2 * 0.5**6 = 0.031); with fewer blocks no direction is claimed.
MIN_BLOCKS_FOR_VERDICT = 6
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
    return np.array([float(np.median(np.asarray(b, dtype=float))) for b in blocks])


def median_of_block_medians(blocks: Sequence[Sequence[float]]) -> float:
    """The PR's summary statistic for one variant."""
    return float(np.median(block_medians(blocks)))


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


def bootstrap_reduction_ci(
    baseline_medians: Sequence[float],
    fixed_medians: Sequence[float],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile interval of ``reduction_pct`` under a paired block bootstrap."""
    base, fixed = _paired_arrays(baseline_medians, fixed_medians)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, base.size, size=(resamples, base.size))
    ratios = np.median(fixed[picks], axis=1) / np.median(base[picks], axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(100.0 * (1.0 - ratios), [tail, 100.0 - tail])
    return float(low), float(high)


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
    (exact null distribution up to n = 1000, normal approximation above). It
    inverts the Wilcoxon signed-rank test, so it excludes 0 exactly when that
    test rejects; its coverage holds for any continuous distribution of d that
    is symmetric about its centre, which paired blocks of exchangeable
    variants give.

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


def detectable_log_effect(
    sd: float, n: int, *, alpha: float = ALPHA, power: float = POWER
) -> float:
    """Smallest |mean log-ratio| a paired test detects: (t_{1−α/2} + t_{power}) · sd / √n.

    Student t quantiles with n − 1 degrees of freedom (the usual small-sample
    form of the normal-theory formula); for large n they approach 1.96 + 0.84.
    """
    if n < 2:
        raise ValueError(f"a minimum detectable effect needs at least 2 blocks, got {n}")
    if sd < 0:
        raise ValueError(f"sd must be non-negative, got {sd}")
    df = n - 1
    factor = float(sps.t.ppf(1.0 - alpha / 2.0, df) + sps.t.ppf(power, df))
    return factor * sd / math.sqrt(n)


def min_detectable_effect_pct(
    d: Sequence[float], *, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """Minimum detectable reduction % from the spread of the log-ratios, or None (n < 2).

    ``m = (t_{1−α/2, n−1} + t_{power, n−1}) · sd(d) / √n`` (sd with n − 1), as the
    reduction ``100 · (1 − exp(−m))``: a fixed variant faster than this is found
    with probability ``power`` by a two-sided test at level ``alpha``.
    """
    arr = np.asarray(d, dtype=float)
    if arr.size < 2:
        return None
    m = detectable_log_effect(float(np.std(arr, ddof=1)), arr.size, alpha=alpha, power=power)
    return 100.0 * (1.0 - math.exp(-m))


def noise_band(aa_ci: tuple[float, float] | None = None, *, floor_pct: float = 0.0) -> float:
    """The band (in reduction %) a real difference must clear: max(floor, |A/A interval|).

    An A/A comparison (the same code under both labels) has no real difference,
    so anything inside its interval is noise; the band is the farther end of
    that interval from 0, and never less than ``floor_pct``.
    """
    if floor_pct < 0:
        raise ValueError(f"floor_pct must be non-negative, got {floor_pct}")
    band = floor_pct
    if aa_ci is not None:
        band = max(band, abs(float(aa_ci[0])), abs(float(aa_ci[1])))
    return band


def verdict(
    ci: tuple[float, float],
    blocks: int,
    *,
    valid: bool = True,
    noise_band_pct: float = 0.0,
) -> str:
    """``faster``/``slower`` only when the whole interval clears the noise band.

    ``ci`` is an interval of the reduction % (positive: fixed faster). ``faster``
    needs ``low > noise_band_pct``, ``slower`` needs ``high < -noise_band_pct``;
    with fewer blocks than can reach p < 0.05 (n < 6) no direction is claimed.
    """
    if noise_band_pct < 0:
        raise ValueError(f"noise_band_pct must be non-negative, got {noise_band_pct}")
    if not valid:
        return INVALID
    low, high = ci
    if blocks < MIN_BLOCKS_FOR_VERDICT or not significance_reachable(blocks):
        return NO_DIFFERENCE
    if low > noise_band_pct:
        return FASTER
    if high < -noise_band_pct:
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
    mde_pct: float | None


def paired_statistics(
    baseline_medians: Sequence[float],
    fixed_medians: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    alpha: float = ALPHA,
    power: float = POWER,
) -> PairedStats:
    """Log-ratios, Hodges–Lehmann estimate and interval, Wilcoxon p and MDE from block medians."""
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
        significance_reachable=significance_reachable(d.size, alpha),
        min_achievable_p=min_achievable_p(d.size),
        mde_pct=min_detectable_effect_pct(d, alpha=alpha, power=power),
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def interval_hull(
    ci: tuple[float, float], other: tuple[float, float] | None
) -> tuple[float, float]:
    """The smallest interval holding both ``ci`` and ``other`` (``ci`` alone without it)."""
    if other is None:
        return ci
    return min(ci[0], other[0]), max(ci[1], other[1])


@dataclass(frozen=True)
class PairSummary:
    """The summary of one paired comparison.

    ``reduction_pct`` (ratio of the medians of block medians) and its bootstrap
    ``reduction_ci95_pct`` are the PR-compatible headline. The ``hl_*``,
    ``wilcoxon_*`` and ``mde_pct`` fields come from the paired log-ratios.
    ``verdict`` uses the hull of both intervals: a direction is named only when
    the headline and the Hodges–Lehmann interval both clear ``noise_band_pct``.
    """

    host_us: dict[str, float]
    reduction_pct: float
    reduction_ci95_pct: tuple[float, float]
    verdict: str
    blocks: int
    log_ratios: tuple[float, ...] = ()
    hl_reduction_pct: float | None = None
    hl_ci95_pct: tuple[float, float] | None = None
    hl_confidence: float | None = None
    wilcoxon_p: float | None = None
    wilcoxon_method: str | None = None
    significance_reachable: bool = False
    mde_pct: float | None = None
    noise_band_pct: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (tuples as lists, non-finite floats as None)."""
        return _json_value(
            {
                "host_us": dict(self.host_us),
                "reduction_pct": self.reduction_pct,
                "reduction_ci95_pct": self.reduction_ci95_pct,
                "verdict": self.verdict,
                "blocks": self.blocks,
                "log_ratios": self.log_ratios,
                "hl_reduction_pct": self.hl_reduction_pct,
                "hl_ci95_pct": self.hl_ci95_pct,
                "hl_confidence": self.hl_confidence,
                "wilcoxon_p": self.wilcoxon_p,
                "wilcoxon_method": self.wilcoxon_method,
                "significance_reachable": self.significance_reachable,
                "mde_pct": self.mde_pct,
                "noise_band_pct": self.noise_band_pct,
            }
        )


def summarize_pair(
    baseline_blocks: Sequence[Sequence[float]],
    fixed_blocks: Sequence[Sequence[float]],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    noise_band_pct: float = 0.0,
    valid: bool = True,
) -> PairSummary:
    """Headline figures for one case: per-variant medians, reduction, intervals, verdict.

    ``baseline_blocks[i]`` and ``fixed_blocks[i]`` are the samples of block ``i``.
    """
    base_medians = block_medians(baseline_blocks)
    fixed_medians = block_medians(fixed_blocks)
    base = float(np.median(base_medians))
    fixed = float(np.median(fixed_medians))
    ci = bootstrap_reduction_ci(base_medians, fixed_medians, seed=seed, resamples=resamples)
    paired = paired_statistics(base_medians, fixed_medians)
    hull = interval_hull(ci, paired.hl_ci95_pct)
    return PairSummary(
        host_us={"baseline": base, "fixed": fixed},
        reduction_pct=reduction_pct(base, fixed),
        reduction_ci95_pct=ci,
        verdict=verdict(hull, len(base_medians), valid=valid, noise_band_pct=noise_band_pct),
        blocks=len(base_medians),
        log_ratios=paired.log_ratios,
        hl_reduction_pct=paired.hl_reduction_pct,
        hl_ci95_pct=paired.hl_ci95_pct,
        hl_confidence=paired.hl_confidence,
        wilcoxon_p=paired.wilcoxon_p,
        wilcoxon_method=paired.wilcoxon_method,
        significance_reachable=paired.significance_reachable,
        mde_pct=paired.mde_pct,
        noise_band_pct=noise_band_pct,
    )


def percentiles(values: Sequence[float], qs: Sequence[float] = (5, 50, 95)) -> dict[str, float]:
    """Named percentiles, e.g. {"p5": .., "p50": .., "p95": ..}."""
    arr = np.asarray(values, dtype=float)
    return {f"p{q:g}": float(np.percentile(arr, q)) for q in qs}
