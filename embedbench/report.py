"""Tables from a run's results: the PR's before/after table and its statistics.

The PR table is kept byte-for-byte in the PR's format so it can be pasted into
a review; the interval and verdict go into a second table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from embedbench.results import RunResult
from embedbench.scenarios import CASE_LABELS, CASES

PR_COLUMNS = ("Input", "Before (μs)", "After (μs)", "Host latency reduction")
PR_ALIGN = ("---", "---:", "---:", "---:")


def _ordered_rows(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {case: i for i, case in enumerate(CASES)}
    return sorted(summary, key=lambda r: (r["tokens"], order.get(r["case"], len(order))))


def _input_label(row: dict[str, Any], several_lengths: bool) -> str:
    label = CASE_LABELS.get(row["case"], row["case"])
    return f"{label} ({row['tokens']} tokens)" if several_lengths else label


def _fmt_us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def pr_table(result: RunResult) -> pd.DataFrame:
    """One row per case (and length, when several) in the PR's columns, as strings."""
    rows = _ordered_rows(result.summary)
    several = len({r["tokens"] for r in rows}) > 1
    data = []
    for row in rows:
        host = row.get("host_us") or {}
        reduction = row.get("reduction_pct")
        data.append(
            {
                PR_COLUMNS[0]: _input_label(row, several),
                PR_COLUMNS[1]: _fmt_us(host.get("baseline")),
                PR_COLUMNS[2]: _fmt_us(host.get("fixed")),
                PR_COLUMNS[3]: "invalid" if reduction is None else f"{reduction:.2f}%",
            }
        )
    return pd.DataFrame(data, columns=list(PR_COLUMNS))


def to_pr_markdown(table: pd.DataFrame) -> str:
    """The table as markdown exactly in the PR's layout (header, alignment row, rows)."""
    lines = ["| " + " | ".join(table.columns) + " |", "| " + " | ".join(PR_ALIGN) + " |"]
    lines += ["| " + " | ".join(str(v) for v in values) + " |" for values in table.values]
    return "\n".join(lines)


def statistics_table(result: RunResult) -> pd.DataFrame:
    """The interval, verdict, validity and block count beside each PR row."""
    rows = _ordered_rows(result.summary)
    several = len({r["tokens"] for r in rows}) > 1
    data = []
    for row in rows:
        ci = row.get("reduction_ci95_pct")
        data.append(
            {
                "Input": _input_label(row, several),
                "Reduction 95% CI": "n/a" if ci is None else f"[{ci[0]:.2f}%, {ci[1]:.2f}%]",
                "Verdict": row.get("verdict", "n/a"),
                "Valid": bool(row.get("valid", False)),
                "Blocks": row.get("blocks"),
            }
        )
    return pd.DataFrame(data)
