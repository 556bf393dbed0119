"""The summaries a figure draws that the results do not hold: a trend line, a density,
box statistics. numpy and scipy only; ``figuredata`` puts them in the figures' tables, so
both renderers draw the same numbers (docs/interactive.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

__all__ = ["BOX_WHIS", "VIOLIN_POINTS", "VIOLIN_REACH", "box", "theil_sen", "violin"]

VIOLIN_POINTS = 150  # points of a violin's outline (the chart carries each: smooth, and small)
VIOLIN_REACH = 2.0  # a violin runs this many KDE bandwidths past the extreme values
BOX_WHIS = 1.5  # whiskers reach the furthest value within this many IQRs of the box


def theil_sen(y: Sequence[float]) -> np.ndarray:
    """The Theil–Sen line through ``y`` against its index (0, 1, …), at each index."""
    values = np.asarray(y, dtype=float)
    x = np.arange(values.size, dtype=float)
    slope, intercept, _, _ = sps.theilslopes(values, x)
    return intercept + slope * x


def violin(values: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """A violin's outline: a Gaussian KDE of ``values`` (of their log on a log axis) from
    ``VIOLIN_REACH`` bandwidths below the least to as far above the most, so it tapers to
    nothing past the data: the grid (in the values' units) and the density there scaled to
    1 at its peak. None when the values cannot make one (fewer than 2, or all equal)."""
    data = np.log(values) if log else np.asarray(values, dtype=float)
    if data.size < 2 or np.ptp(data) == 0:
        return None
    kde = sps.gaussian_kde(data)
    bandwidth = float(np.sqrt(kde.covariance[0, 0]))
    reach = VIOLIN_REACH * bandwidth
    grid = np.linspace(data.min() - reach, data.max() + reach, VIOLIN_POINTS)
    density = kde(grid)
    return (np.exp(grid) if log else grid), density / density.max()


def box(values: np.ndarray) -> dict[str, float]:
    """A box plot's statistics as matplotlib's ``boxplot`` computes them: the quartiles
    (linear interpolation), the median, and each whisker at the furthest value within
    ``BOX_WHIS`` IQRs of its quartile (the quartile itself when none is)."""
    data = np.asarray(values, dtype=float)
    q1, median, q3 = (float(v) for v in np.percentile(data, [25, 50, 75]))
    iqr = q3 - q1
    below = data[data >= q1 - BOX_WHIS * iqr]
    above = data[data <= q3 + BOX_WHIS * iqr]
    low = q1 if below.size == 0 or below.min() > q1 else float(below.min())
    high = q3 if above.size == 0 or above.max() < q3 else float(above.max())
    return {"q1": q1, "median": median, "q3": q3, "whislo": low, "whishi": high}
