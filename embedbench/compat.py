"""Reading the original PR script's output: fill in what embedbench's report needs.

The original writes the four files with only the fields of SPEC §4: no block
position, no validation verdict, no interval, epoch times. This module derives
those from what is there (block order from record order, intervals and
verdicts from ``micro-raw.json``) and marks the result ``source_format:
original`` so nothing derived passes for something measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from embedbench import summary
from embedbench.schema import ORIGINAL_FORMAT
from embedbench.timing import TIMER_SCOPE
from embedbench.validation import EXPECTED_LOOKUPS


def _iso(value: Any) -> Any:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
    return value


def upgrade_metadata(original: dict[str, Any]) -> dict[str, Any]:
    """Our metadata fields from the original's (which are kept as they are)."""
    gpu = original.get("gpu")
    return {
        **original,
        "source_format": ORIGINAL_FORMAT,
        "status": "complete" if original.get("end_time") is not None else "interrupted",
        "target": "vllm-omni (original script)",
        "device": "cuda" if gpu else original.get("device", "unknown"),
        "device_name": gpu,
        "refs": {
            "baseline_ref": original.get("baseline_ref"),
            "candidate_ref": "WORKTREE",
            "checked_out_commit": original.get("checkout"),
        },
        "versions": {
            "torch": original.get("torch"),
            "vllm": original.get("vllm"),
            "transformers": original.get("transformers"),
        },
        "embedding": {"shape": original.get("embedding_shape"), "dtype": original.get("dtype")},
        "cpu_frequency_source": "recorded by the original script (sysfs or /proc/cpuinfo)",
        "synthetic": False,
        "started_at": _iso(original.get("start_time")),
        "ended_at": _iso(original.get("end_time")),
    }


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
        expected = EXPECTED_LOOKUPS.get(row["case"], {})
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
        # The original's block order came from its own seed, which it did not record.
        upgraded.append(summary.summary_row(case, tokens, case_records, seed=None, aa=aa))
    return upgraded


def upgrade_original(
    metadata: dict[str, Any],
    records: list[dict[str, Any]],
    validation: list[dict[str, Any]],
    summary_rows: list[dict[str, Any]],
    *,
    aa_records: Sequence[dict[str, Any]] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The four files of an original-script run, in embedbench's shape (``aa_records``:
    already upgraded A/A records, if any)."""
    records = upgrade_records(records)
    validation = upgrade_validation(validation)
    return (
        upgrade_metadata(metadata),
        records,
        validation,
        upgrade_summary(summary_rows, records, validation, aa_records),
    )
