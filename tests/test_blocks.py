"""The block table: one view of a case's records, read by metric name, that the
statistics and the diagnostics both start from."""

import pytest

from embedbench.harness import diagnostics
from embedbench.harness.blocks import block_table
from embedbench.report import summary


def _record(block, variant, position, host, *, worker=0, faults=None):
    # host, cpu (host / 2) and completion (host + 1000) are told apart by their values
    return {
        "case": "audio",
        "tokens": 300,
        "scope": "whole_wrapper",
        "variant": variant,
        "block": block,
        "position": position,
        "iterations": 3,
        "samples_us": [[host + i, host / 2 + i, host + 1000 + i] for i in range(3)],
        "cpu_mhz_start": 2000.0,
        "cpu_mhz_end": 2000.0 + block,
        "worker": worker,
        "minor_faults": faults,
    }


def _records(blocks=6):
    out = []
    for b in range(blocks):
        order = ("baseline", "fixed") if b % 2 == 0 else ("fixed", "baseline")
        for position, variant in enumerate(order):
            host = 100.0 if variant == "baseline" else 80.0
            out.append(_record(b, variant, position, host + b, worker=b // 2, faults=3 * b))
    return list(reversed(out))  # any record order: the table sorts by block


def test_the_table_reads_each_metric_by_name_in_block_order():
    table = block_table(_records())
    assert table.blocks == (0, 1, 2, 3, 4, 5) and len(table) == 6
    assert table.metric("baseline")[1] == [101.0, 102.0, 103.0]
    assert table.metric("fixed", "calling_thread_cpu_us")[0] == [40.0, 41.0, 42.0]
    assert table.metric("baseline", "synchronized_completion_us")[0] == [1100.0, 1101.0, 1102.0]
    assert table.first == ("baseline", "fixed") * 3
    assert table.workers == (0, 0, 1, 1, 2, 2)
    assert table.mhz[3] == (2000.0, 2003.0, 2000.0, 2003.0)
    assert table.faults_per_call["fixed"] == tuple(float(b) for b in range(6))
    assert table.iterations == 3
    with pytest.raises(KeyError, match="unknown metric 'host'"):
        table.metric("baseline", "host")


def test_a_block_without_both_variants_is_refused():
    records = [r for r in _records() if not (r["block"] == 4 and r["variant"] == "fixed")]
    with pytest.raises(ValueError, match=r"blocks \[4\]"):
        block_table(records)


def test_the_summary_row_takes_every_metric_from_its_named_column():
    row = summary.summary_row("audio", 300, _records(), seed=1)
    assert row["host_us"]["baseline"] > 100 and row["host_us"]["fixed"] < 90
    assert 40 < row["cpu_us"]["fixed"] < 50  # the cpu column, not the host one
    assert row["completion_us"]["baseline"] > 1100
    assert row["minor_faults_per_call"] == {"baseline": 2.5, "fixed": 2.5}
    assert row["iterations"] == 3 and row["workers"] == 3


def test_statistics_and_diagnostics_see_the_same_blocks():
    table = block_table(_records())
    pair = summary.summarize_table(table)
    found = diagnostics.diagnose_table(table)
    assert list(pair.log_ratios) == pytest.approx(found.log_ratios)
    assert found.order_effect is not None and found.blocks == pair.blocks == 6
