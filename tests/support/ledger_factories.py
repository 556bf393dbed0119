"""Factories for ``paired_benchmark("support.ledger_factories:NAME", ...)`` (tests only).

Two forms of a small embedding lookup whose counted work is known: the baseline gathers
the same rows twice, the fixed form once (the shape of the PR's change, on a table of
1000 x 8 bf16 and 50 ids).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

TABLE = torch.ones(1000, 8, dtype=torch.bfloat16)
IDS = torch.arange(50)  # int64: gathered as they are, nothing widened
ROWS_BYTES = 50 * 8 * 2


def lookups() -> dict[str, Callable[[], torch.Tensor]]:
    """Baseline: two lookups, the first one thrown away; fixed: one."""

    def baseline() -> torch.Tensor:
        F.embedding(IDS, TABLE)
        return F.embedding(IDS, TABLE)

    def fixed() -> torch.Tensor:
        return F.embedding(IDS, TABLE)

    return {"baseline": baseline, "fixed": fixed}
