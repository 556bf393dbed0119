"""A run's per-call ledger (work.json), read for the report: the "Work per call" table
with each case's exact deltas, one sentence for the family's headline, and the compare
notebook's check that runs of the same code counted the same (docs/format.md,
"work.json").

Each form's work is counted from one call, outside any timed window, so the numbers are
exact and the same on every rerun of the same code: they say what the fixed form no
longer does, beside how much faster it is. A run with ``--counts`` also has each form's
instructions and simulated cache misses per call (counted under valgrind after the
timing, on the CPU), shown in columns of their own where present. Nothing here imports
torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from embedbench.cases import CASE_LABELS
from embedbench.report.compare import CONFIGURATION_FIELDS
from embedbench.report.results import RunResult
from embedbench.report.tables import family_of, input_label, table_order

__all__ = [
    "COUNT_COLUMNS",
    "LOOKUP_OP",
    "SAME_INSTRUCTIONS_PCT",
    "WORK_COLUMNS",
    "CaseWork",
    "case_work",
    "counted_columns",
    "format_bytes",
    "ledger_differences",
    "relative_change",
    "same_code",
    "work_sentence",
    "work_table",
]

# The operator a text lookup dispatches: the embedding gather.
LOOKUP_OP = "aten.embedding"
WORK_COLUMNS = ("Input", "Lookups", "Operators", "Written", "Allocated", "Syncs")
# The figures counted under valgrind (--counts; docs/format.md, "Instructions and cache
# misses per call"): each one's column, shown where some form has it.
COUNT_COLUMNS = {
    "instructions": "Instructions",
    "d1_misses": "D1 misses",
    "ll_misses": "LL misses",
    "est_cycles": "Est. cycles",
}
_NUMBER_WORDS = {1: "one", 2: "two", 3: "three"}
# Two forms whose instructions per call differ by no more than this (in percent) run the
# same instructions: the interpreter and the allocator move a few dozen instructions
# between two functions that do the same work (Text's forms differ by about 0.05 %).
SAME_INSTRUCTIONS_PCT = 0.1


@dataclass(frozen=True)
class CaseWork:
    """One case and length: the baseline's and the fixed form's ledgers (work.json rows)."""

    case: str
    tokens: int
    baseline: Mapping[str, Any]
    fixed: Mapping[str, Any]

    def value(self, variant: str, quantity: str) -> int | None:
        """A counted quantity of one form: ``lookups`` (``LOOKUP_OP`` calls), ``operators``
        (every call), or a ledger field (``bytes_written``, ``syncs``, ``kernels`` …)."""
        row = self.baseline if variant == "baseline" else self.fixed
        ops = row.get("ops") or {}
        if quantity == "lookups":
            return int(ops.get(LOOKUP_OP, 0))
        if quantity == "operators":
            return int(sum(ops.values()))
        value = row.get(quantity)
        return None if value is None else int(value)

    def delta(self, quantity: str) -> int | None:
        """Fixed less baseline (None where either is not counted)."""
        before, after = self.value("baseline", quantity), self.value("fixed", quantity)
        return None if before is None or after is None else after - before

    @property
    def workers_agree(self) -> bool:
        """Whether every worker counted the same for both forms."""
        return all(row.get("workers_agree", True) for row in (self.baseline, self.fixed))

    @property
    def label(self) -> str:
        """The case's report label (``Audio``)."""
        return CASE_LABELS.get(self.case, self.case)


def case_work(result: RunResult) -> list[CaseWork]:
    """Every case and length with both forms' ledgers, in table order."""
    rows: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for row in result.work:
        rows.setdefault((row["case"], row["tokens"]), {})[row["variant"]] = row
    pairs = [
        CaseWork(case, tokens, forms["baseline"], forms["fixed"])
        for (case, tokens), forms in rows.items()
        if {"baseline", "fixed"} <= set(forms)
    ]
    return sorted(pairs, key=lambda w: table_order(w.case, w.tokens))


def _signed(delta: int, unit: str = "") -> str:
    if delta == 0:
        return "same"
    return f"{delta:+,}{unit}"


def format_bytes(count: float) -> str:
    """``8.41 MB`` (decimal units), ``21.6 kB``, ``512 B``."""
    if abs(count) >= 1e6:
        return f"{count / 1e6:.2f} MB"
    if abs(count) >= 1e3:
        return f"{count / 1e3:.1f} kB"
    return f"{count:.0f} B"


def _count_cell(work: CaseWork, quantity: str) -> str:
    before, after = work.value("baseline", quantity), work.value("fixed", quantity)
    if before is None or after is None:
        return "n/a"
    return f"{before:,} → {after:,} ({_signed(after - before)})"


def _counted_cell(work: CaseWork, quantity: str) -> str:
    """``5,652,120 → 4,730,750 (-921,370, -16.3 %)``: the delta exact, and relative."""
    before, after = work.value("baseline", quantity), work.value("fixed", quantity)
    if before is None or after is None:
        return "n/a"
    delta = after - before
    if delta == 0:
        return f"{before:,} → {after:,} (same)"
    share = f", {_signed_pct(100.0 * delta / before)}" if before else ""
    return f"{before:,} → {after:,} ({delta:+,}{share})"


def _signed_pct(pct: float) -> str:
    """``-16.3 %``; below 1 % in size two decimals (``+0.05 %``), below 0.01 % three
    (``-0.002 %``)."""
    digits = 3 if abs(pct) < 0.01 else 2 if abs(pct) < 1 else 1
    return f"{pct:+.{digits}f} %"


def counted_columns(cases: Sequence[CaseWork]) -> list[str]:
    """The figures counted under valgrind that some form of ``cases`` has, in order."""
    return [
        quantity
        for quantity in COUNT_COLUMNS
        if any(w.value(v, quantity) is not None for w in cases for v in ("baseline", "fixed"))
    ]


def _bytes_cell(work: CaseWork, quantity: str) -> str:
    """``25.22 MB → 16.81 MB (-8,410,272 B)``: the delta exact, in bytes."""
    before, after = work.value("baseline", quantity), work.value("fixed", quantity)
    if before is None or after is None:
        return "n/a"
    return f"{format_bytes(before)} → {format_bytes(after)} ({_signed(after - before, ' B')})"


def work_table(result: RunResult) -> pd.DataFrame:
    """One row per case (and length, when several): each form's lookups, operators,
    bytes written and allocated, syncs (and, on CUDA, kernels) as ``before → after
    (delta)``, the delta exact; with ``--counts``, its instructions, simulated misses and
    estimated cycles per call too (``COUNT_COLUMNS``, with the relative delta). A case
    whose workers counted differently says so."""
    cases = case_work(result)
    several = len({w.tokens for w in cases}) > 1
    kernels = any(w.value(v, "kernels") is not None for w in cases for v in ("baseline", "fixed"))
    disagree = any(not w.workers_agree for w in cases)
    counted = counted_columns(cases)
    columns = [
        *WORK_COLUMNS,
        *(["Kernels"] if kernels else []),
        *(COUNT_COLUMNS[q] for q in counted),
        *(["Workers"] if disagree else []),
    ]
    data = []
    for work in cases:
        row = {
            "Input": input_label(work.case, work.tokens, several),
            "Lookups": _count_cell(work, "lookups"),
            "Operators": _count_cell(work, "operators"),
            "Written": _bytes_cell(work, "bytes_written"),
            "Allocated": _bytes_cell(work, "bytes_allocated"),
            "Syncs": _count_cell(work, "syncs"),
        }
        if kernels:
            row["Kernels"] = _count_cell(work, "kernels")
        for quantity in counted:
            row[COUNT_COLUMNS[quantity]] = _counted_cell(work, quantity)
        if disagree:
            row["Workers"] = "agree" if work.workers_agree else "DIFFER"
        data.append(row)
    return pd.DataFrame(data, columns=columns)


def _names(cases: Sequence[CaseWork], total: int) -> str:
    """``in every case``, ``in Text`` or ``in 5 of 6 cases``."""
    if len(cases) == total:
        return "in every case"
    if len(cases) <= 2:
        return "in " + " and ".join(w.label for w in cases)
    return f"in {len(cases)} of {total} cases"


def _span(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    if format_bytes(low) == format_bytes(high):
        return format_bytes(low)
    return f"{format_bytes(low)} to {format_bytes(high)}"


def _lookup_clause(cases: Sequence[CaseWork]) -> list[str]:
    """What happened to the lookups, fewest first: fewer, then the same, then more."""
    total = len(cases)
    fewer = [w for w in cases if (w.delta("lookups") or 0) < 0]
    same = [w for w in cases if w.delta("lookups") == 0]
    more = [w for w in cases if (w.delta("lookups") or 0) > 0]
    clauses = []
    if fewer:
        drops = {-(w.delta("lookups") or 0) for w in fewer}
        size = _NUMBER_WORDS.get(next(iter(drops)), "") if len(drops) == 1 else ""
        noun = "lookup" if drops == {1} else "lookups"
        less = [-(w.delta("bytes_written") or 0) for w in fewer]
        written = f" ({_span(less)} less written per call)" if min(less) > 0 else ""
        clauses.append(
            f"the fixed form runs {size + ' ' if size else ''}fewer embedding {noun} "
            f"{_names(fewer, total)}{written}"
        )
    if same:
        lead = "the same lookups" if fewer or more else "both forms run the same lookups"
        clauses.append(f"{lead} {_names(same, total)}")
    if more:
        named = ", ".join(f"{w.label} ({w.delta('lookups'):+d})" for w in more)
        clauses.append(f"MORE embedding lookups in {named}")
    return clauses


def _steady_clause(cases: Sequence[CaseWork], quantity: str, noun: str) -> str | None:
    """``the same syncs`` in every case, or which cases changed (None when not counted)."""
    deltas = [(w, w.delta(quantity)) for w in cases]
    counted = [(w, d) for w, d in deltas if d is not None]
    if not counted:
        return None
    changed = [(w, d) for w, d in counted if d]
    if not changed:
        return f"the same {noun}"
    named = ", ".join(f"{w.label} {d:+d}" for w, d in changed)
    return f"{noun} differ ({named})"


def _pct_span(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.0f} %" if round(low) == round(high) else f"{low:.0f} to {high:.0f} %"


def relative_change(work: CaseWork, quantity: str) -> float | None:
    """Fixed against baseline in percent (None where either is not counted or the
    baseline is 0)."""
    before, delta = work.value("baseline", quantity), work.delta(quantity)
    return None if not before or delta is None else 100.0 * delta / before


def _instructions_clause(result: RunResult, cases: Sequence[CaseWork]) -> str | None:
    """``15 to 19 % fewer instructions per call in 5 of 6 cases, the same within 0.1 % in
    Text (counted under valgrind)`` (None where not counted)."""
    counted = [(w, r) for w in cases if (r := relative_change(w, "instructions")) is not None]
    if not counted:
        return None
    total = len(cases)
    fewer = [(w, r) for w, r in counted if r < -SAME_INSTRUCTIONS_PCT]
    same = [w for w, r in counted if abs(r) <= SAME_INSTRUCTIONS_PCT]
    more = [(w, r) for w, r in counted if r > SAME_INSTRUCTIONS_PCT]
    clauses = []
    if fewer:
        cuts = [-r for _w, r in fewer]
        named = _names([w for w, _r in fewer], total)
        clauses.append(f"{_pct_span(cuts)} fewer instructions per call {named}")
    if same:
        clauses.append(
            f"the same instructions within {SAME_INSTRUCTIONS_PCT:g} % {_names(same, total)}"
        )
    if more:
        clauses.append(
            "MORE instructions in " + ", ".join(f"{w.label} {r:+.1f} %" for w, r in more)
        )
    where = (result.metadata.get("counts") or {}).get("measured_device")
    copy = f" on the CPU copy of the {where} run's forms" if where and where != "cpu" else ""
    return ", ".join(clauses) + f" (counted under valgrind{copy})"


def work_sentence(result: RunResult) -> str | None:
    """One sentence for the family's headline: what the fixed form no longer does, per
    call, counted (None for a run without a ledger), e.g. "Work per call, counted: the
    fixed form runs one fewer embedding lookup in 5 of 6 cases (8.41 MB less written per
    call), the same lookups in Text; the same syncs."."""
    cases = case_work(result)
    if not cases:
        return None
    clauses = [", ".join(_lookup_clause(cases))]
    clauses += [
        c
        for c in (
            _steady_clause(cases, "syncs", "syncs"),
            _steady_clause(cases, "kernels", "kernels"),
        )
        if c
    ]
    instructions = _instructions_clause(result, cases)
    clauses += [instructions] if instructions else []
    disagree = [w.label for w in cases if not w.workers_agree]
    if disagree:
        clauses.append(f"the workers' counts DIFFER in {', '.join(disagree)}")
    return "Work per call, counted: " + "; ".join(clauses) + "."


# What else must match for two runs' ledgers to be the same: the measured code and torch.
_SAME_CODE_FIELDS = ("code_sha256", "torch")
# The counted fields compared between runs (not who counted them).
_COMPARED = ("ops", "bytes_read", "bytes_written", "bytes_allocated", "syncs", "kernels")


def same_code(result: RunResult) -> tuple[str, ...]:
    """What must match for two runs to count the same work: the configuration the compare
    notebook differences runs of (device, target, checkpoint, geometry, LM shim), the
    family, the measured code's fingerprint and torch's version."""
    m = result.metadata
    fields = (*CONFIGURATION_FIELDS, *_SAME_CODE_FIELDS)
    return (*(json.dumps(m.get(name), sort_keys=True) for name in fields), family_of(m))


def _moved(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """What differs between two ledgers of one form, one phrase each."""
    moved = []
    ops_a, ops_b = first.get("ops") or {}, other.get("ops") or {}
    for op in sorted({*ops_a, *ops_b}):
        if ops_a.get(op, 0) != ops_b.get(op, 0):
            moved.append(f"{op} {ops_a.get(op, 0)} → {ops_b.get(op, 0)}")
    for field in _COMPARED[1:]:
        a, b = first.get(field), other.get(field)
        if a != b:
            change = f"{b - a:+,}" if isinstance(a, int) and isinstance(b, int) else f"{a} → {b}"
            moved.append(f"{field.replace('_', ' ')} {change}")
    return moved


def ledger_differences(runs: Mapping[str, RunResult]) -> pd.DataFrame:
    """Every run's ledger against the first run of the same code (``same_code``): one row
    per case, length and form both counted, ``same`` or ``DIFFERS: `` and what moved. The
    same code on the same torch counts the same work, so a difference is flagged: the
    inputs, the code path or the counter changed between them."""
    first: dict[tuple[str, ...], str] = {}
    data = []
    for name, result in runs.items():
        key = same_code(result)
        if not result.work:
            continue
        if key not in first:
            first[key] = name
            continue
        earlier = {(r["case"], r["tokens"], r["variant"]): r for r in runs[first[key]].work}
        for row in result.work:
            before = earlier.get((row["case"], row["tokens"], row["variant"]))
            if before is None:
                continue
            moved = _moved(before, row)
            data.append(
                {
                    "Run": name,
                    "Against": first[key],
                    "Input": input_label(row["case"], row["tokens"], True),
                    "Form": row["variant"],
                    "Ledger": "same" if not moved else "DIFFERS: " + "; ".join(moved),
                }
            )
    return pd.DataFrame(data, columns=["Run", "Against", "Input", "Form", "Ledger"])
