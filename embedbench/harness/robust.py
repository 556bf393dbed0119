"""The robust standard deviation, in one place: 1.4826 × the median absolute deviation.

The factor makes the MAD a consistent estimator of a normal distribution's SD, so one
slow block or run moves it little where it would set an ordinary SD. numpy only: the
worker processes import the modules that use it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["MAD_SCALE", "robust_sd"]

MAD_SCALE = 1.4826


def robust_sd(values: Iterable[float], centre: float | None = None) -> float:
    """1.4826 × the median of |value − centre| (``centre``: the values' median if None)."""
    data = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, float)
    middle = float(np.median(data)) if centre is None else centre
    return MAD_SCALE * float(np.median(np.abs(data - middle)))
