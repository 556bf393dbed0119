"""Summary rows of summary.json from raw block records (JSON dicts).

Shared by the runner (as cases finish) and by the reader of the original
script's output (which has no intervals), so both summarize the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from embedbench import stats
from embedbench.scenarios import CASE_LABELS
from embedbench.targets import VARIANTS

Record = dict[str, Any]


def blocks_by_variant(records: Iterable[Record], metric: int) -> dict[str, list[list[float]]]:
    """Per variant, each block's samples of one metric (index into metric_order), by block."""
    out: dict[str, list[list[float]]] = {name: [] for name in VARIANTS}
    ordered = sorted(records, key=lambda r: (r["block"], r.get("position", 0)))
    for record in ordered:
        out.setdefault(record["variant"], []).append([s[metric] for s in record["samples_us"]])
    return out


def invalid_row(case: str, tokens: int, *, error: str | None = None) -> dict[str, Any]:
    """The summary row of a case that failed validation or could not be measured."""
    row: dict[str, Any] = {
        "case": case,
        "label": CASE_LABELS.get(case, case),
        "tokens": tokens,
        "host_us": None,
        "reduction_pct": None,
        "reduction_ci95_pct": None,
        "verdict": stats.INVALID,
        "valid": False,
        "blocks": 0,
    }
    if error is not None:
        row["error"] = error
    return row


def summary_row(case: str, tokens: int, records: list[Record], *, seed: int) -> dict[str, Any]:
    """Headline figures of one measured case and length from its block records."""
    host = blocks_by_variant(records, 0)
    summary = stats.summarize_pair(host["baseline"], host["fixed"], seed=seed)
    extra = {
        name: {
            variant: stats.median_of_block_medians(blocks)
            for variant, blocks in blocks_by_variant(records, metric).items()
            if blocks
        }
        for metric, name in ((1, "cpu_us"), (2, "completion_us"))
    }
    return {
        "case": case,
        "label": CASE_LABELS.get(case, case),
        "tokens": tokens,
        "host_us": summary.host_us,
        "reduction_pct": summary.reduction_pct,
        "reduction_ci95_pct": list(summary.reduction_ci95_pct),
        "verdict": summary.verdict,
        "valid": True,
        "blocks": summary.blocks,
        "iterations": len(records[0]["samples_us"]),
        "schedule_seed": seed,
        **extra,
    }
