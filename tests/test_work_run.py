"""The per-call ledger of real runs (docs/format.md, "work.json"): what ``embedbench run``
writes for every case in every worker, its report, the gate on it for the PR's pair, and
``paired_benchmark``'s ledger in both forms."""

from __future__ import annotations

import subprocess
import sys

from support import ledger_factories

from embedbench import paired_benchmark
from embedbench.cases import CASES
from embedbench.report.results import WORK, inspect_results_dir, load_results

HIDDEN = 32  # conftest's small checkpoint
TOKENS = 300  # and its session-wide quick run
QUICK = {"warmup": 2, "iterations": 3, "allow_busy": True}


def _embedbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "embedbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_writes_each_forms_ledger_and_its_three_workers_agree(small_run_dir):
    assert WORK in inspect_results_dir(small_run_dir).files  # and it matches its schema
    result = load_results(small_run_dir)
    rows = {(r["case"], r["variant"]): r for r in result.work}
    assert set(rows) == {(c, v) for c in CASES for v in ("baseline", "fixed")}
    lookups = {
        (v["case"], variant): n for v in result.validation for variant, n in v["calls"].items()
    }
    for key, row in rows.items():
        assert row["ops"]["aten.embedding"] == lookups[key]  # what validation counted
        assert row["workers"] == [0, 1, 2] and row["workers_agree"] is True
        assert (row["tokens"], row["device"], row["syncs"], row["kernels"]) == (
            TOKENS,
            "cpu",
            0,
            None,
        )
    for case in CASES:
        extra = lookups[(case, "baseline")] - lookups[(case, "fixed")]
        written = rows[(case, "baseline")]["bytes_written"] - rows[(case, "fixed")]["bytes_written"]
        assert written == extra * (TOKENS * HIDDEN * 2 + TOKENS * 8)  # rows, widened ids


def test_the_gate_on_work_passes_the_prs_pair_and_the_report_shows_the_work(small_run_dir):
    gate = _embedbench("gate", str(small_run_dir), "--on", "work")
    assert gate.returncode == 0, gate.stderr
    assert gate.stdout.startswith("gate: pass, 6 cases, the fixed form does no more counted work")
    report = _embedbench("report", str(small_run_dir))
    assert report.returncode == 0, report.stderr
    shown = report.stdout[report.stdout.index("Work per call (counted, not timed):") :]
    assert "| Audio | 2 → 1 (-1) |" in shown and "| Text | 1 → 1 (same) |" in shown
    assert (
        "> Work per call, counted: the fixed form runs one fewer embedding lookup in 5 of 6"
        in shown
    )


def test_a_pair_of_callables_gets_its_ledger_from_one_call_outside_the_blocks():
    variants = ledger_factories.lookups()
    calls = {"baseline": 0, "fixed": 0}

    def counted(name: str):
        def call():
            calls[name] += 1
            return variants[name]()

        return call

    pair = paired_benchmark({name: counted(name) for name in variants}, blocks=2, **QUICK)
    assert pair.work is not None
    baseline, fixed = pair.work["baseline"], pair.work["fixed"]
    assert baseline["ops"] == {"aten.embedding": 2} and fixed["ops"] == {"aten.embedding": 1}
    assert baseline["bytes_written"] - fixed["bytes_written"] == ledger_factories.ROWS_BYTES
    assert baseline["workers"] == [0] and baseline["workers_agree"] is True
    # One counted call of each besides the warm-up and the timed blocks.
    assert calls == {name: 1 + QUICK["warmup"] + 2 * QUICK["iterations"] for name in calls}


def test_a_factory_pair_is_counted_in_every_worker():
    pair = paired_benchmark("support.ledger_factories:lookups", blocks=4, processes=2, **QUICK)
    assert pair.work is not None
    for variant, lookups in (("baseline", 2), ("fixed", 1)):
        row = pair.work[variant]
        assert row["ops"] == {"aten.embedding": lookups}
        assert row["workers"] == [0, 1] and row["workers_agree"] is True
