"""The robust standard deviation, in one place: 1.4826 × the median absolute deviation;
and the median of a short list, which the per-block statistics take thousands of times.

The factor makes the MAD a consistent estimator of a normal distribution's SD, so one
slow block or run moves it little where it would set an ordinary SD. numpy only: the
worker processes import the modules that use it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["MAD_SCALE", "median", "robust_sd"]

MAD_SCALE = 1.4826


def robust_sd(values: Iterable[float], centre: float | None = None) -> float:
    """1.4826 × the median of |value − centre| (``centre``: the values' median if None)."""
    data = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, float)
    middle = float(np.median(data)) if centre is None else centre
    return MAD_SCALE * float(np.median(np.abs(data - middle)))


def median(values: Iterable[float]) -> float:
    """The median of ``values`` (the mean of the middle two for an even count), the same
    float as ``np.median`` gives: a sort in C, without numpy's per-call overhead (about
    50 µs), which dominates on a block of tens of calls."""
    ordered = np.sort(values, axis=None) if isinstance(values, np.ndarray) else sorted(values)
    count = len(ordered)
    if not count:
        raise ValueError("the median of no values")
    middle = count // 2
    if count % 2:
        return float(ordered[middle])
    return (float(ordered[middle - 1]) + float(ordered[middle])) / 2
