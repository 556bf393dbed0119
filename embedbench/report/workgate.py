"""The gate on counted work: does the fixed form do more per call than the baseline form?

``embedbench gate DIR --on work`` calls :func:`gate_work`. For every case and length of a
run, each quantity of the per-call ledger (work.json; docs/format.md) is compared between
the two forms: the operators in all and each operator on its own, the bytes read, written
and allocated, the syncs and, where counted, the kernels and (with ``--counts``) the
instructions. A case fails when any quantity of the fixed form exceeds the baseline's by
more than ``max_increase_pct`` percent (one the baseline does not have at all fails at
any allowance; instructions by more than ``SAME_INSTRUCTIONS_PCT`` at least, what two
forms of the same work differ by in the interpreter); a requested case without a
ledger, or whose workers counted differently, cannot be certified and fails too. The
counts are exact, so the same code gives the same decision on any host: the gate cannot
flake. The simulated cache misses and estimated cycles are not gated: they come from a
model of a cache, and a buffer's alignment can move them with no change of the work. A
directory without work.json (made before it) is refused, as bad input.

Nothing here measures or imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from embedbench.config import parse_max_slowdown
from embedbench.errors import OutputDirError
from embedbench.report.results import RunResult
from embedbench.report.tables import input_label, table_order
from embedbench.report.work import SAME_INSTRUCTIONS_PCT, format_bytes

__all__ = [
    "FLOOR_PCT",
    "PREFIX",
    "QUANTITIES",
    "UNCERTIFIED",
    "WorkGateOutcome",
    "WorkGateRow",
    "check_max_increase",
    "gate_work",
    "work_gate_lines",
]

PREFIX = "gate:"
UNCERTIFIED = "cannot be certified"
# The ledger's scalar quantities, with their names in a failing line; bytes are shown as
# sizes. Operators are checked in all and one by one besides.
QUANTITIES: Mapping[str, str] = {
    "bytes_read": "bytes read",
    "bytes_written": "bytes written",
    "bytes_allocated": "bytes allocated",
    "syncs": "syncs",
    "kernels": "kernels",
    "instructions": "instructions per call",
}
# The least allowance of a quantity, in percent, whatever the gate's.
FLOOR_PCT: Mapping[str, float] = {"instructions": SAME_INSTRUCTIONS_PCT}


def check_max_increase(value: Any, name: str = "max_increase_pct") -> float:
    """The allowance in percent: a finite number >= 0 (strings as papermill passes them)."""
    return parse_max_slowdown(value, name)


@dataclass(frozen=True)
class WorkGateRow:
    """One case and length: pass or fail, and every quantity that failed it (or why it
    cannot be certified)."""

    case: str
    label: str
    tokens: int
    passed: bool
    reasons: tuple[str, ...]

    @property
    def name(self) -> str:
        """``Audio @ 1172 tokens``."""
        return f"{self.label} @ {self.tokens} tokens"


@dataclass(frozen=True)
class WorkGateOutcome:
    """The work gate's decision on one run: a row per case and length, in table order."""

    max_increase_pct: float
    rows: tuple[WorkGateRow, ...]

    @property
    def failures(self) -> tuple[WorkGateRow, ...]:
        """The rows that fail the gate."""
        return tuple(row for row in self.rows if not row.passed)

    @property
    def passed(self) -> bool:
        """True when there is at least one case and none fails."""
        return bool(self.rows) and not self.failures


def _show(quantity: str, value: int) -> str:
    return format_bytes(value) if quantity.startswith("bytes") else f"{value:,}"


def _exceeds(before: int, after: int, pct: float) -> bool:
    """``after`` above ``before`` by more than ``pct`` percent (any ``after`` above 0 when
    ``before`` is 0); exact in integers at a whole-number allowance."""
    return after * 100 > before * (100 + pct)


def _increase(name: str, quantity: str, before: int, after: int) -> str:
    growth = "new" if before == 0 else f"{100.0 * (after - before) / before:+.1f} %"
    return f"{name} {_show(quantity, before)} → {_show(quantity, after)} ({growth})"


def _increases(baseline: Mapping[str, Any], fixed: Mapping[str, Any], pct: float) -> list[str]:
    """Every counted quantity of ``fixed`` beyond ``baseline``'s allowance, one phrase each."""
    ops_before, ops_after = baseline.get("ops") or {}, fixed.get("ops") or {}
    checks = [("operators", "ops", sum(ops_before.values()), sum(ops_after.values()))]
    checks += [
        (op, "ops", int(ops_before.get(op, 0)), int(ops_after.get(op, 0)))
        for op in sorted({*ops_before, *ops_after})
    ]
    for quantity, name in QUANTITIES.items():
        before, after = baseline.get(quantity), fixed.get(quantity)
        if before is not None and after is not None:
            checks.append((name, quantity, int(before), int(after)))
    return [
        _increase(name, quantity, before, after)
        for name, quantity, before, after in checks
        if _exceeds(before, after, max(pct, FLOOR_PCT.get(quantity, 0.0)))
    ]


def _requested(result: RunResult) -> list[tuple[str, int]]:
    """Every case and length the run asked for or counted, in table order."""
    keys = {(r["case"], r["tokens"]) for r in result.work}
    meta = result.metadata
    keys |= {(c, t) for t in meta.get("lengths") or [] for c in meta.get("cases") or []}
    return sorted(keys, key=lambda key: table_order(*key))


def _judge(forms: Mapping[str, Mapping[str, Any]], pct: float) -> tuple[bool, tuple[str, ...]]:
    if not {"baseline", "fixed"} <= set(forms):
        missing = "no ledger (not measured, failed validation or the run stopped)"
        return False, (f"{missing}; {UNCERTIFIED}",)
    differing = [
        f"worker {worker}: {', '.join(fields)}"
        for variant in ("baseline", "fixed")
        for worker, fields in (forms[variant].get("differing") or {}).items()
    ]
    if differing or not all(forms[v].get("workers_agree", True) for v in ("baseline", "fixed")):
        detail = f" ({'; '.join(differing)})" if differing else ""
        return False, (f"the workers' ledgers differ{detail}; {UNCERTIFIED}",)
    increases = _increases(forms["baseline"], forms["fixed"], pct)
    return not increases, tuple(increases)


def gate_work(result: RunResult, max_increase_pct: Any = 0.0) -> WorkGateOutcome:
    """Gate every case and length of a run on its counted work (see the module doc).

    Raises ``ConfigError`` for a bad allowance and ``OutputDirError`` for a run without a
    ledger (work.json is written from schema 6 on).
    """
    pct = check_max_increase(max_increase_pct)
    if not result.work:
        where = result.directory if result.directory is not None else "the run"
        raise OutputDirError(
            f"{where} has no per-call ledger (work.json, written by runs from schema 6 on, "
            "or empty); gate it on time (--on time), or rerun it"
        )
    forms: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for row in result.work:
        forms.setdefault((row["case"], row["tokens"]), {})[row["variant"]] = row
    rows = []
    for case, tokens in _requested(result):
        passed, reasons = _judge(forms.get((case, tokens), {}), pct)
        label = input_label(case, tokens, several_lengths=False)
        rows.append(WorkGateRow(case, label, tokens, passed, reasons))
    return WorkGateOutcome(pct, tuple(rows))


def work_gate_lines(outcome: WorkGateOutcome) -> list[str]:
    """What ``embedbench gate --on work`` prints: one line per failing case, else one
    summary line."""
    if not outcome.rows:
        return [f"{PREFIX} FAIL no cases in the results; nothing to certify"]
    if outcome.failures:
        return [f"{PREFIX} FAIL {row.name}: {'; '.join(row.reasons)}" for row in outcome.failures]
    count = len(outcome.rows)
    return [
        f"{PREFIX} pass, {count} case{'s' if count != 1 else ''}, the fixed form does no "
        f"more counted work than the baseline beyond {outcome.max_increase_pct:.2f} %"
    ]
