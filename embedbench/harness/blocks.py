"""One case's block records as one table, built once and read by name.

The statistics (``stats.summarize_pair``) and the diagnostics (``diagnostics``) of a
case both start from the same per-block view: for every block, each variant's samples
of every metric, which variant ran first, the worker process that ran it and the CPU
frequency read around it. ``block_table`` builds that view once from raw records
(``BlockRecord`` objects or their JSON); metrics are picked by their names in
``metric_order``, never by position. No I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from embedbench.cases import VARIANTS
from embedbench.harness.records import field_of
from embedbench.harness.timing import METRIC_ORDER

__all__ = ["HOST", "BlockTable", "block_table"]

HOST = METRIC_ORDER[0]


@dataclass(frozen=True)
class BlockTable:
    """Per block (in block order): samples of each (variant, metric), order, worker, MHz."""

    blocks: tuple[int, ...]
    first: tuple[str, ...]
    workers: tuple[int, ...]
    mhz: tuple[tuple[float | None, ...], ...]
    samples: Mapping[tuple[str, str], tuple[tuple[float, ...], ...]]
    faults_per_call: Mapping[str, tuple[float, ...]]
    iterations: int
    metric_order: tuple[str, ...] = METRIC_ORDER

    def metric(self, variant: str, metric: str = HOST) -> list[list[float]]:
        """Each block's samples of ``metric`` for ``variant``, in block order."""
        if metric not in self.metric_order:
            raise KeyError(f"unknown metric {metric!r}; recorded: {', '.join(self.metric_order)}")
        return [list(block) for block in self.samples[(variant, metric)]]

    def __len__(self) -> int:
        return len(self.blocks)


def block_table(records: Iterable[Any]) -> BlockTable:
    """The table of one case's records; every block needs one record of each variant."""
    by_block: dict[int, dict[str, Any]] = {}
    for record in records:
        block = int(field_of(record, "block"))
        by_block.setdefault(block, {})[field_of(record, "variant")] = record
    blocks = sorted(by_block)
    missing = [b for b in blocks if set(by_block[b]) != set(VARIANTS)]
    if not blocks or missing:
        raise ValueError(
            f"every block needs one record of each of {', '.join(VARIANTS)}: blocks {missing}"
        )
    pairs = [by_block[b] for b in blocks]
    samples = {
        (variant, name): tuple(
            tuple(float(s[column]) for s in field_of(pair[variant], "samples_us")) for pair in pairs
        )
        for variant in VARIANTS
        for column, name in enumerate(METRIC_ORDER)
    }
    faults: dict[str, tuple[float, ...]] = {}
    for variant in VARIANTS:
        recorded = [
            field_of(p[variant], "minor_faults") / field_of(p[variant], "iterations")
            for p in pairs
            if field_of(p[variant], "minor_faults") is not None
        ]
        faults[variant] = tuple(float(x) for x in recorded)
    return BlockTable(
        blocks=tuple(blocks),
        first=tuple(
            field_of(min(p.values(), key=lambda r: int(field_of(r, "position", 0))), "variant")
            for p in pairs
        ),
        workers=tuple(int(field_of(p[VARIANTS[0]], "worker", 0) or 0) for p in pairs),
        mhz=tuple(
            tuple(field_of(r, key) for r in p.values() for key in ("cpu_mhz_start", "cpu_mhz_end"))
            for p in pairs
        ),
        samples=samples,
        faults_per_call=faults,
        iterations=len(field_of(pairs[0][VARIANTS[0]], "samples_us")),
        metric_order=METRIC_ORDER,
    )
