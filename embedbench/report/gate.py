"""The regression gate: does any case's interval lie on the slower side beyond an allowance?

``embedbench gate DIR`` and the compare notebook both call :func:`gate_results`. A
case fails when its whole interval of the reduction (``reduction_ci95_pct``, the
interval the verdict uses, labelled with its level; positive is faster) lies below
``-max_slowdown_pct``, that is when ``high < -max_slowdown_pct``. A case that was not
measured, failed validation, crashed while timing or has no finite interval cannot be
certified and fails as well, with its own reason. A directory with no case at all fails too.

Nothing here measures, prints or imports torch: a GPU box's results are gated anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from embedbench.config import parse_max_slowdown
from embedbench.errors import one_line
from embedbench.harness.stats import INVALID, labelled_level
from embedbench.report.hostprose import NOT_OBSERVED, host_label, host_verdict
from embedbench.report.results import RunResult
from embedbench.report.tables import NOT_MEASURED, input_label, level_text, ordered_rows

__all__ = [
    "PREFIX",
    "UNCERTIFIED",
    "GateOutcome",
    "GateRow",
    "check_max_slowdown",
    "format_interval",
    "gate_lines",
    "gate_results",
    "gate_table",
    "interval_name",
]

PREFIX = "gate:"
UNCERTIFIED = "cannot be certified"


def check_max_slowdown(value: Any, name: str = "max_slowdown_pct") -> float:
    """The allowance in percent: a finite number >= 0 (strings as papermill passes them)."""
    return parse_max_slowdown(value, name)


def _pct(value: float) -> str:
    return f"{value:.2f} %"


def format_interval(interval: tuple[float, float]) -> str:
    """``[-4.10 %, -1.20 %]``."""
    return f"[{_pct(interval[0])}, {_pct(interval[1])}]"


@dataclass(frozen=True)
class GateRow:
    """One case and length: its interval (None when there is none), pass or fail, and why."""

    case: str
    label: str
    tokens: int
    reduction_pct: float | None
    interval: tuple[float, float] | None
    passed: bool
    reason: str
    level: float = 0.95

    @property
    def name(self) -> str:
        """``Audio @ 1172 tokens``."""
        return f"{self.label} @ {self.tokens} tokens"


@dataclass(frozen=True)
class GateOutcome:
    """The gate's decision on one run: a row per case and length, in table order."""

    max_slowdown_pct: float
    rows: tuple[GateRow, ...]
    host: str = NOT_OBSERVED
    host_note: str | None = None

    @property
    def failures(self) -> tuple[GateRow, ...]:
        """The rows that fail the gate."""
        return tuple(row for row in self.rows if not row.passed)

    @property
    def passed(self) -> bool:
        """True when there is at least one case and none fails."""
        return bool(self.rows) and not self.failures


def _failed_validation(result: RunResult, case: str, tokens: int) -> dict[str, Any] | None:
    for row in result.validation:
        if row.get("case") == case and row.get("tokens") == tokens and not row.get("ok", True):
            return row
    return None


def _uncertified(result: RunResult, row: dict[str, Any]) -> str | None:
    """Why a row cannot be certified, or None when it has an interval to judge."""
    case, tokens = row["case"], row["tokens"]
    if row.get("verdict") == NOT_MEASURED:
        status = "" if result.status == "complete" else f" (run {result.status})"
        return f"not measured{status}; {UNCERTIFIED}"
    if row.get("error"):
        return f"{one_line(row['error'])}; {UNCERTIFIED}"
    failed = _failed_validation(result, case, tokens)
    if failed is not None:
        what = ", ".join(sorted(failed.get("mismatch") or {}))
        return f"failed validation{f' ({what})' if what else ''}; {UNCERTIFIED}"
    marks = [
        m
        for m, on in (
            ("valid: false", row.get("valid") is False),
            ("verdict: invalid", row.get("verdict") == INVALID),
        )
        if on
    ]
    if marks:
        return f"invalid ({', '.join(marks)}); {UNCERTIFIED}"
    interval = row.get("reduction_ci95_pct")
    if interval is None:
        return f"no 95 % interval; {UNCERTIFIED}"
    if not all(math.isfinite(v) for v in interval):
        return f"95 % interval {interval} is not finite; {UNCERTIFIED}"
    return None


def interval_name(level: float) -> str:
    """``95 % interval``, or the true level of one below it (``93.75 % interval``)."""
    return f"{100.0 * labelled_level(level):.4g} % interval"


def _judge(interval: tuple[float, float], pct: float, level: float) -> tuple[bool, str]:
    low, high = interval
    shown = f"{interval_name(level)} {format_interval(interval)}"
    if high < -pct:
        return False, f"{shown} lies below {_pct(-pct)} (slower)"
    if low > 0:
        return True, f"{shown} lies above 0 (faster)"
    if high >= 0:
        return True, f"{shown} includes 0"
    return True, f"{shown} reaches {_pct(-pct)} or above (slower, within the allowance)"


def gate_results(result: RunResult, max_slowdown_pct: Any = 0.0) -> GateOutcome:
    """Gate every case and length of a run (requested but unmeasured ones included).

    ``max_slowdown_pct`` is the allowed slowdown in percent (>= 0): a case fails when
    its interval's upper end is below ``-max_slowdown_pct``, or when it cannot be
    certified (not measured, invalid, no finite interval). Raises ``ConfigError`` for
    a bad allowance.
    """
    pct = check_max_slowdown(max_slowdown_pct)
    rows = []
    for row in ordered_rows(result):
        case, tokens = row["case"], row["tokens"]
        reason = _uncertified(result, row)
        interval = None
        passed = False
        level = float(row.get("ci_level") or 0.95)
        if reason is None:
            low, high = row["reduction_ci95_pct"]
            interval = (float(low), float(high))
            passed, reason = _judge(interval, pct, level)
        rows.append(
            GateRow(
                case=case,
                label=input_label(case, tokens, several_lengths=False),
                tokens=tokens,
                reduction_pct=row.get("reduction_pct"),
                interval=interval,
                passed=passed,
                reason=reason,
                level=level,
            )
        )
    return GateOutcome(
        max_slowdown_pct=pct,
        rows=tuple(rows),
        host=host_verdict(result.metadata),
        host_note=host_label(result),
    )


def gate_lines(outcome: GateOutcome) -> list[str]:
    """What ``embedbench gate`` prints: one line per failing case, else one summary line."""
    note = [f"{PREFIX} warning: {outcome.host_note}"] if outcome.host_note else []
    if not outcome.rows:
        return [f"{PREFIX} FAIL no cases in the results; nothing to certify"]
    if outcome.failures:
        return [f"{PREFIX} FAIL {row.name}: {row.reason}" for row in outcome.failures] + note
    count = len(outcome.rows)
    return [
        f"{PREFIX} pass, {count} case{'s' if count != 1 else ''}, "
        f"none slower beyond {_pct(outcome.max_slowdown_pct)}",
        *note,
    ]


def gate_table(outcomes: Mapping[str, GateOutcome]) -> pd.DataFrame:
    """The gate's rows of one or more runs (keyed by run name) as a table."""
    data = [
        {
            "Run": name,
            "Input": row.label,
            "Tokens": row.tokens,
            "Reduction": "n/a" if row.reduction_pct is None else _pct(row.reduction_pct),
            "Interval": "n/a" if row.interval is None else format_interval(row.interval),
            "Level": level_text(row.level),
            "Gate": "pass" if row.passed else "FAIL",
            "Host": outcome.host,
            "Reason": row.reason,
        }
        for name, outcome in outcomes.items()
        for row in outcome.rows
    ]
    columns = [
        "Run",
        "Input",
        "Tokens",
        "Reduction",
        "Interval",
        "Level",
        "Gate",
        "Host",
        "Reason",
    ]
    return pd.DataFrame(data, columns=columns)
