"""Plain JSON values from what the statistics produce: the one converter.

numpy scalars become Python numbers, non-finite floats become None (JSON has no NaN),
tuples become lists, mapping keys become strings. No torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["plain"]


def plain(value: Any) -> Any:
    """``value`` with every nested number, sequence and mapping made plain JSON."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
