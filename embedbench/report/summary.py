"""Summary rows of summary.json from raw block records (JSON dicts).

Shared by the runner (as cases finish) and by the reader of the original
script's output (which has no intervals), so both summarize the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.config import DEFAULT_BLOCKS, DEFAULT_PROCESSES
from embedbench.harness import diagnostics, stability, stats
from embedbench.harness.blocks import BlockTable, block_table

__all__ = [
    "Record",
    "aa_summary",
    "design_check",
    "faults_per_call",
    "invalid_row",
    "summarize_records",
    "summarize_table",
    "summary_row",
    "worker_facts",
]

Record = dict[str, Any]


def summarize_table(table: BlockTable) -> stats.PairSummary:
    """The paired summary of one case's host latencies, with the worker of each block."""
    return stats.summarize_pair(
        table.metric("baseline"), table.metric("fixed"), workers=list(table.workers)
    )


def summarize_records(records: list[Record]) -> stats.PairSummary:
    """``summarize_table`` of the records' block table."""
    return summarize_table(block_table(records))


def faults_per_call(table: BlockTable) -> dict[str, float | None]:
    """Median over blocks of each variant's page faults per call (None if not recorded)."""
    return {
        name: float(statistics.median(table.faults_per_call[name]))
        if table.faults_per_call.get(name)
        else None
        for name in VARIANTS
    }


def design_check(
    cases: dict[str, list[Record]], *, workers: int, blocks_per_worker: int
) -> dict[str, dict[str, float | None]]:
    """From one worker's records of each case (keyed ``case@tokens``): the reduction this
    design can call at best (``stats.design_mde_pct``) and what the default design of
    ``DEFAULT_BLOCKS`` blocks over ``DEFAULT_PROCESSES`` workers would reach."""
    default_share = DEFAULT_BLOCKS // DEFAULT_PROCESSES
    found = {}
    for key, records in cases.items():
        table = block_table(records)
        base, fixed = (stats.block_medians(table.metric(v)) for v in VARIANTS)
        d = stats.log_ratios(base, fixed)
        found[key] = {
            "mde_pct": stats.design_mde_pct(
                d, blocks_per_worker=blocks_per_worker, workers=workers
            ),
            "default_design_mde_pct": stats.design_mde_pct(
                d, blocks_per_worker=default_share, workers=DEFAULT_PROCESSES
            ),
        }
    return found


def worker_facts(
    table: BlockTable, records: list[Record], d: Sequence[float]
) -> dict[int, diagnostics.WorkerFacts]:
    """Per worker: its canary level, page faults per call and block log-ratios ``d`` (the
    case's, in block order, as its summary computed them), from the block table and raw
    records."""
    found = {}
    for worker in sorted(set(table.workers)):
        index = [i for i, w in enumerate(table.workers) if w == worker]
        faults = [
            table.faults_per_call[v][i]
            for v in VARIANTS
            for i in index
            if len(table.faults_per_call.get(v, ())) == len(table.workers)
        ]
        mine = [r for r in records if int(r.get("worker") or 0) == worker]
        found[worker] = diagnostics.WorkerFacts(
            canary_us=stability.canary_level_us(mine),
            faults_per_call=float(statistics.median(faults)) if faults else None,
            block_log_ratios=tuple(float(d[i]) for i in index),
        )
    return found


def _outlier_workers(
    pair: stats.PairSummary, table: BlockTable, records: list[Record]
) -> diagnostics.OutlierWorkers | None:
    units = pair.interval.unit_reductions_pct
    workers = sorted(set(table.workers))
    if pair.interval.method != stats.BETWEEN_PROCESSES or len(units) != len(workers):
        return None
    return diagnostics.outlier_workers(
        dict(zip(workers, units, strict=True)), worker_facts(table, records, pair.log_ratios)
    )


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
    table = block_table(records)
    pair = summarize_table(table)
    found = diagnostics.diagnose_table(table)
    diagnosed = found.to_json()
    diagnosed.pop("log_ratios", None)  # already in the row, from the statistics
    extra = {
        name: {
            variant: stats.combined_median(
                stats.block_medians(table.metric(variant, metric)), list(table.workers)
            )
            for variant in VARIANTS
        }
        for metric, name in (
            ("calling_thread_cpu_us", "cpu_us"),
            ("synchronized_completion_us", "completion_us"),
        )
    }
    notes = found.notes()
    outliers = _outlier_workers(pair, table, records)
    if outliers is not None:
        diagnosed["outlier_workers"] = outliers.to_json()
        for worker in outliers.flagged:
            notes.append(
                f"outlier worker {worker}: its reduction "
                f"{outliers.reductions_pct[str(worker)]:.2f} % lies "
                f"outside what the others support ({outliers.reasons[str(worker)]}); "
                f"the reduction without it: {outliers.reduction_pct_without:.2f} %"
            )
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
        "minor_faults_per_call": faults_per_call(table),
        "canary_us": stability.canary_level_us(records),
        "valid": True,
        "iterations": table.iterations,
        "schedule_seed": seed,
        **extra,
        "diagnostics": diagnosed,
        "notes": notes,
    }
    if aa is not None:
        row["aa"] = aa
    return row
