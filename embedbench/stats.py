"""Statistics on numbers only: block medians, the PR's reduction, its interval, a verdict.

Pure functions; no files, no torch. The headline statistic is the PR's: the
median over blocks of each block's median host latency, per variant, and
``reduction_pct = 100 * (1 - fixed / baseline)``. Its 95 % interval comes from
a paired block bootstrap: blocks are resampled with replacement, keeping each
block's baseline and fixed medians together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
# A two-sided sign test over n paired blocks can reach p < 0.05 only from n = 6
# (2 * 0.5**6 = 0.031); with fewer blocks no direction is claimed.
MIN_BLOCKS_FOR_VERDICT = 6

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


def bootstrap_reduction_ci(
    baseline_medians: Sequence[float],
    fixed_medians: Sequence[float],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile interval of ``reduction_pct`` under a paired block bootstrap."""
    base = np.asarray(baseline_medians, dtype=float)
    fixed = np.asarray(fixed_medians, dtype=float)
    if base.shape != fixed.shape or base.ndim != 1 or base.size == 0:
        raise ValueError("baseline and fixed need the same, non-zero number of blocks")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, base.size, size=(resamples, base.size))
    ratios = np.median(fixed[picks], axis=1) / np.median(base[picks], axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(100.0 * (1.0 - ratios), [tail, 100.0 - tail])
    return float(low), float(high)


def verdict(ci: tuple[float, float], blocks: int, *, valid: bool = True) -> str:
    """``faster``/``slower`` only when the interval excludes 0 and blocks suffice."""
    if not valid:
        return INVALID
    low, high = ci
    if blocks < MIN_BLOCKS_FOR_VERDICT:
        return NO_DIFFERENCE
    if low > 0:
        return FASTER
    if high < 0:
        return SLOWER
    return NO_DIFFERENCE


@dataclass(frozen=True)
class PairSummary:
    """The summary of one paired comparison."""

    host_us: dict[str, float]
    reduction_pct: float
    reduction_ci95_pct: tuple[float, float]
    verdict: str
    blocks: int


def summarize_pair(
    baseline_blocks: Sequence[Sequence[float]],
    fixed_blocks: Sequence[Sequence[float]],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> PairSummary:
    """Headline figures for one case: per-variant medians, reduction, interval, verdict.

    ``baseline_blocks[i]`` and ``fixed_blocks[i]`` are the samples of block ``i``.
    """
    base_medians = block_medians(baseline_blocks)
    fixed_medians = block_medians(fixed_blocks)
    base = float(np.median(base_medians))
    fixed = float(np.median(fixed_medians))
    ci = bootstrap_reduction_ci(base_medians, fixed_medians, seed=seed, resamples=resamples)
    return PairSummary(
        host_us={"baseline": base, "fixed": fixed},
        reduction_pct=reduction_pct(base, fixed),
        reduction_ci95_pct=ci,
        verdict=verdict(ci, len(base_medians)),
        blocks=len(base_medians),
    )


def percentiles(values: Sequence[float], qs: Sequence[float] = (5, 50, 95)) -> dict[str, float]:
    """Named percentiles, e.g. {"p5": .., "p50": .., "p95": ..}."""
    arr = np.asarray(values, dtype=float)
    return {f"p{q:g}": float(np.percentile(arr, q)) for q in qs}
