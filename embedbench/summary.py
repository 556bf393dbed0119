"""Summary rows of summary.json from raw block records (JSON dicts).

Shared by the runner (as cases finish) and by the reader of the original
script's output (which has no intervals), so both summarize the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from embedbench import diagnostics, stats
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


def aa_summary(records: list[Record], *, seed: int) -> dict[str, Any]:
    """The A/A check of one case: the baseline against itself under both labels."""
    host = blocks_by_variant(records, 0)
    pair = stats.summarize_pair(host["baseline"], host["fixed"], seed=seed)
    return {
        "reduction_pct": pair.reduction_pct,
        "reduction_ci95_pct": list(pair.reduction_ci95_pct),
        "hl_ci95_pct": None if pair.hl_ci95_pct is None else list(pair.hl_ci95_pct),
        "blocks": pair.blocks,
        "noise_band_pct": stats.noise_band(
            stats.interval_hull(pair.reduction_ci95_pct, pair.hl_ci95_pct)
        ),
    }


def summary_row(
    case: str,
    tokens: int,
    records: list[Record],
    *,
    seed: int,
    aa: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Headline figures, paired statistics and diagnostics of one measured case and length.

    With an A/A check (``aa``), the verdict must also clear its noise band.
    """
    host = blocks_by_variant(records, 0)
    noise_band_pct = 0.0 if aa is None else float(aa["noise_band_pct"])
    pair = stats.summarize_pair(
        host["baseline"], host["fixed"], seed=seed, noise_band_pct=noise_band_pct
    )
    found = diagnostics.diagnose_records(records)
    diagnosed = found.to_json()
    diagnosed.pop("log_ratios", None)  # already in the row, from the statistics
    extra = {
        name: {
            variant: stats.median_of_block_medians(blocks)
            for variant, blocks in blocks_by_variant(records, metric).items()
            if blocks
        }
        for metric, name in ((1, "cpu_us"), (2, "completion_us"))
    }
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
        "notes": found.notes(),
    }
    if aa is not None:
        row["aa"] = aa
    return row
