"""Reading the original PR script's output: fill in what embedbench's report needs.

The original writes the four files with only the fields the PR's script wrote: no block
position, no validation verdict, no interval, epoch times. This module derives
those from what is there (block order from record order, intervals and
verdicts from ``micro-raw.json``) and marks the result ``source_format:
original`` so nothing derived passes for something measured.

The original writes ``micro-raw.json`` after each case and ``validation.json`` after
each validation, but ``metadata.json`` and ``summary.json`` only when it finishes
(benchmarks/qwen2_5_omni/benchmark_embeddings.py, PR #7477). A crashed run leaves the
first two alone; it is read as a partial run: status ``interrupted``,
``missing_files`` naming what is absent, the metadata the records tell (lengths,
blocks, calls per block, device, start) and a summary row recomputed for every case
in the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embedbench.cases import CASES
from embedbench.harness import stats, windows
from embedbench.harness.timing import METRIC_ORDER, TIMER_SCOPE
from embedbench.omni import families
from embedbench.report import summary
from embedbench.report.schema import ORIGINAL_FORMAT, PR_VERSION_KEYS

__all__ = [
    "measured_cases",
    "partial_metadata",
    "upgrade_duplicated",
    "upgrade_headline",
    "upgrade_metadata",
    "upgrade_original",
    "upgrade_records",
    "upgrade_summary",
    "upgrade_validation",
    "with_timing_window",
]


def upgrade_metadata(original: dict[str, Any]) -> dict[str, Any]:
    """Our metadata fields from the original's (which are kept as they are: its refs,
    versions, embedding shape and times are the fields embedbench writes too)."""
    gpu = original.get("gpu")
    return {
        **original,
        "source_format": ORIGINAL_FORMAT,
        "status": "complete" if original.get("end_time") is not None else "interrupted",
        "target": "vllm-omni (original script)",
        "device": "cuda" if gpu else original.get("device", "unknown"),
        "device_name": gpu,
        "refs": {"candidate_ref": "WORKTREE"},
        "cpu_frequency_source": "recorded by the original script (sysfs or /proc/cpuinfo)",
        "synthetic": False,
        # The PR script's own window: the order embedbench's default (``pr``) follows.
        "timing_window": windows.PR,
    }


def with_timing_window(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with its timing window: recorded since the PR's window became the
    default; an embedbench directory written before that was timed in ``legacy``."""
    if metadata.get("timing_window"):
        return metadata
    return {**metadata, "timing_window": windows.LEGACY}


def upgrade_duplicated(metadata: dict[str, Any]) -> dict[str, Any]:
    """An embedbench metadata.json of schema version 1 or 2 as version 3 has it.

    Those wrote some facts twice (``refs.baseline_ref`` and ``baseline_ref``,
    ``versions.torch`` and ``torch``, ``embedding.shape`` and ``embedding_shape``, ...);
    the original script's top-level name is the one read. A run written before those
    top-level fields existed gets them from the nested ones; the rest is kept as it is.
    """
    refs = metadata.get("refs") or {}
    versions = metadata.get("versions") or {}
    embedding = metadata.get("embedding") or {}
    nested = {
        "baseline_ref": refs.get("baseline_ref"),
        "checkout": refs.get("checked_out_commit"),
        **{key: versions.get(key) for key in PR_VERSION_KEYS},
        "embedding_shape": embedding.get("shape"),
        "dtype": embedding.get("dtype"),
        "input_ids_dtype": metadata.get("ids_dtype"),
    }
    missing = {k: v for k, v in nested.items() if k not in metadata and v is not None}
    if "candidate_ref" not in refs and metadata.get("candidate_ref") is not None:
        refs = {**refs, "candidate_ref": metadata["candidate_ref"]}
    return {**metadata, **missing, "refs": refs}


def upgrade_headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows of schema 1 to 3 as version 4 has them.

    Their ``reduction_pct`` was the PR's ratio of ``host_us`` in every design: it becomes
    ``pr_reduction_pct``. A one-process row's headline becomes its Hodges–Lehmann
    estimate (``interval_estimate_pct``, written since schema 2), the centre of the
    interval it was shown with; with workers the two were already the same number. Rows
    with a block-bootstrap interval (schema 1) keep their headline.
    """
    upgraded = []
    for row in rows:
        if "pr_reduction_pct" in row:
            upgraded.append(row)
            continue
        new = {**row, "pr_reduction_pct": row.get("reduction_pct")}
        estimate = row.get("interval_estimate_pct")
        if row.get("interval_method") == stats.WITHIN_PROCESS and estimate is not None:
            new["reduction_pct"] = estimate
        upgraded.append(new)
    return upgraded


def partial_metadata(
    records: list[dict[str, Any]], validation: list[dict[str, Any]]
) -> dict[str, Any]:
    """The original's metadata fields as far as a crashed run's records and validation
    rows tell (no warm-up count, versions, GPU name or refs: they were never written)."""
    timed = [r for r in records if r["scope"] != TIMER_SCOPE]
    first = (timed[0]["case"], timed[0]["tokens"]) if timed else None
    return {
        "lengths": sorted({r["tokens"] for r in timed} | {v["tokens"] for v in validation}),
        "blocks": len({r["block"] for r in timed if (r["case"], r["tokens"]) == first}) or None,
        "iterations": timed[0]["iterations"] if timed else None,
        "metric_order": list(METRIC_ORDER),  # the original's, fixed in the script
        "device": records[0]["device"] if records else None,
        "start_time": min((r["wall_start"] for r in records), default=None),
        "end_time": None,
    }


def measured_cases(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``{case, tokens}`` per timed case in the records, in the order measured."""
    keys = dict.fromkeys((r["case"], r["tokens"]) for r in records if r["scope"] != TIMER_SCOPE)
    return [{"case": case, "tokens": tokens} for case, tokens in keys]


def upgrade_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add each record's position in its block (the original wrote them in run order)."""
    seen: dict[tuple[Any, ...], int] = {}
    upgraded = []
    for record in records:
        key = (record["case"], record["tokens"], record["scope"], record["block"])
        position = seen.get(key, 0)
        seen[key] = position + 1
        upgraded.append({"position": position, **record})
    return upgraded


def upgrade_validation(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ok`` and ``torch_equal`` from the original's counts and equality flag."""
    upgraded = []
    for row in rows:
        # The original script measured the embedded default's family.
        expected = dict(families.default().expected_lookups.get(row["case"], {}))
        equal = bool(row.get("same_input_wrapper_torch_equal", row.get("torch_equal", False)))
        ok = equal and row.get("calls") == expected
        upgraded.append({**row, "expected_calls": expected, "torch_equal": equal, "ok": ok})
    return upgraded


def _of_case(records: Sequence[dict[str, Any]], case: str, tokens: int) -> list[dict[str, Any]]:
    return [
        r
        for r in records
        if r["case"] == case and r["tokens"] == tokens and r["scope"] != TIMER_SCOPE
    ]


def upgrade_summary(
    rows: list[dict[str, Any]],
    records: list[dict[str, Any]],
    validation: list[dict[str, Any]],
    aa_records: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Recompute each row from its records (adds the interval and verdict, and the A/A
    check where there are A/A records)."""
    ok = {(v["case"], v["tokens"]): v["ok"] for v in validation}
    upgraded = []
    for row in rows:
        case, tokens = row["case"], row["tokens"]
        case_records = _of_case(records, case, tokens)
        if not ok.get((case, tokens), False) or not case_records:
            upgraded.append(summary.invalid_row(case, tokens))
            continue
        case_aa = _of_case(aa_records, case, tokens)
        aa = summary.aa_summary(case_aa) if case_aa else None
        # The original's block order came from random.Random(7451 + length + len(case) +
        # len(scope)), not from a seed of ours: no schedule_seed to record.
        upgraded.append(summary.summary_row(case, tokens, case_records, seed=None, aa=aa))
    return upgraded


def upgrade_original(
    metadata: dict[str, Any] | None,
    records: list[dict[str, Any]],
    validation: list[dict[str, Any]] | None,
    summary_rows: list[dict[str, Any]] | None,
    *,
    missing: Sequence[str] = (),
    aa_records: Sequence[dict[str, Any]] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The four files of an original-script run, in embedbench's shape.

    A file the run never wrote is None, and named in ``missing`` (a partial run);
    ``aa_records``: already upgraded A/A records, if any.
    """
    records = upgrade_records(records)
    validation = upgrade_validation(validation or [])
    if metadata is None:
        metadata = partial_metadata(records, validation)
    if summary_rows is None:
        summary_rows = measured_cases(records)
    upgraded = upgrade_metadata(metadata)
    if missing:
        told = ["summary recomputed from micro-raw.json"]
        if "metadata.json" in missing:
            told.append("lengths, blocks, calls per block and device read from its records")
        upgraded.update(
            status="interrupted",
            cases=list(CASES),  # the original measures all six: show what it did not reach
            missing_files=list(missing),
            partial_note=f"partial run of the original script (it did not finish): "
            f"no {', '.join(missing)}; {'; '.join(told)}",
        )
    return (
        upgraded,
        records,
        validation,
        upgrade_summary(summary_rows, records, validation, aa_records),
    )
