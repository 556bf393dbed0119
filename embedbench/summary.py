"""Summary rows of summary.json from raw block records (JSON dicts).

Shared by the runner (as cases finish) and by the reader of the original
script's output (which has no intervals), so both summarize the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from embedbench import diagnostics, stats
from embedbench.cases import CASE_LABELS, VARIANTS

Record = dict[str, Any]


def _by_block(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r["block"], r.get("position", 0)))


def blocks_by_variant(records: Iterable[Record], metric: int) -> dict[str, list[list[float]]]:
    """Per variant, each block's samples of one metric (index into metric_order), by block."""
    out: dict[str, list[list[float]]] = {name: [] for name in VARIANTS}
    for record in _by_block(records):
        out.setdefault(record["variant"], []).append([s[metric] for s in record["samples_us"]])
    return out


def block_workers(records: Iterable[Record]) -> list[int]:
    """The worker process of each block, in block order (0 for records without one)."""
    return [int(r.get("worker", 0)) for r in _by_block(records) if r["variant"] == VARIANTS[0]]


def summarize_records(records: list[Record]) -> stats.PairSummary:
    """The paired summary of one case's host latencies, with the worker of each block."""
    host = blocks_by_variant(records, 0)
    return stats.summarize_pair(host["baseline"], host["fixed"], workers=block_workers(records))


def faults_per_call(records: Iterable[Record]) -> dict[str, float | None]:
    """Median over blocks of each variant's page faults per call (None if not recorded)."""
    per_variant: dict[str, list[float]] = {}
    for record in records:
        faults = record.get("minor_faults")
        if faults is not None:
            per_variant.setdefault(record["variant"], []).append(faults / record["iterations"])
    return {
        name: float(statistics.median(per_variant[name])) if per_variant.get(name) else None
        for name in VARIANTS
    }


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


def aa_summary(records: list[Record]) -> dict[str, Any]:
    """The A/A check of one case: the baseline against itself under both labels.

    No real difference exists, so its interval should hold 0 (about 95 % of the
    time); one that excludes 0 points at a label or position bias of the harness.
    It is reported beside the A/B comparison and never widens its interval.
    """
    pair = summarize_records(records)
    low, high = pair.reduction_ci95_pct
    return {
        "reduction_pct": pair.reduction_pct,
        "reduction_ci95_pct": [low, high],
        "ci_level": pair.interval.level,
        "interval_method": pair.interval.method,
        "covers_zero": bool(low <= 0.0 <= high),
        "blocks": pair.blocks,
        "workers": pair.workers,
    }


def summary_row(
    case: str,
    tokens: int,
    records: list[Record],
    *,
    seed: int | None,
    aa: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Headline figures, paired statistics and diagnostics of one measured case and length.

    ``seed`` is the case's schedule seed (recorded; None when unknown). ``aa`` is the
    A/A check, kept beside the comparison; the verdict comes from its interval alone.
    """
    pair = summarize_records(records)
    found = diagnostics.diagnose_records(records)
    diagnosed = found.to_json()
    diagnosed.pop("log_ratios", None)  # already in the row, from the statistics
    workers = block_workers(records)
    extra = {
        name: {
            variant: stats.combined_median(stats.block_medians(blocks), workers)
            for variant, blocks in blocks_by_variant(records, metric).items()
            if blocks
        }
        for metric, name in ((1, "cpu_us"), (2, "completion_us"))
    }
    notes = found.notes()
    if aa is not None and not aa["covers_zero"]:
        low, high = aa["reduction_ci95_pct"]
        notes.append(
            f"A/A interval [{low:.2f}, {high:.2f}] % excludes 0: the same code differs under "
            "the two labels (a position or label bias, or chance: 1 case in 20)"
        )
    row = {
        "case": case,
        "label": CASE_LABELS.get(case, case),
        "tokens": tokens,
        **pair.to_json(),
        "minor_faults_per_call": faults_per_call(records),
        "valid": True,
        "iterations": len(records[0]["samples_us"]),
        "schedule_seed": seed,
        **extra,
        "diagnostics": diagnosed,
        "notes": notes,
    }
    if aa is not None:
        row["aa"] = aa
    return row
