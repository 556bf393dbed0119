"""Counts under valgrind (``--counts``; docs/format.md, "Instructions and cache misses per
call"): a real run on the small table counts each form's instructions and simulated
misses per call after its timing, a second count of the same code agrees with it, Text's
two forms (the same work) count alike, and a multimodal case's baseline runs more
instructions than its fixed form.

Skipped where valgrind is not installed. About a minute on a 2-core machine: the run's
timing is tiny, and each of the two counting processes loads torch under valgrind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from embedbench import RunConfig, load_results, paired_benchmark, run
from embedbench.harness import callgrind
from embedbench.measure import Share
from embedbench.report.results import RunResult
from embedbench.report.workgate import gate_work
from embedbench.runhost import RealHost

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None,
    reason="valgrind is not installed (apt-get install valgrind): counts are taken under it",
)

# Long enough that the copy outweighs the interpreter: a Text call is about 213,000
# instructions here, and two forms of the same work differ by up to about 100 with where
# the allocator puts their objects (0.05 %; at 1172 tokens, 0.09 % of 122,000).
TOKENS = 4096
CASES = ("text", "audio")


def _figures(result: RunResult, case: str, variant: str) -> dict[str, int | None]:
    row = next(r for r in result.work if (r["case"], r["variant"]) == (case, variant))
    return {name: row[name] for name in callgrind.FIGURES}


@pytest.fixture(scope="module")
def counted(small_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """A run of Text and Audio on the small table, timed briefly, with counts."""
    config = RunConfig(
        model=str(small_checkpoint),
        cases=CASES,
        lengths=TOKENS,
        warmup=2,
        blocks=2,
        iterations=3,
        processes=1,
        counts=True,
        allow_busy=True,
        output_dir=str(tmp_path_factory.mktemp("counts") / "run"),
    )
    result = run(config, progress=False, log=lambda _line: None)
    return load_results(result.directory)


def test_a_counted_run_writes_each_forms_figures_and_how_they_were_taken(counted):
    for case in CASES:
        for variant in ("baseline", "fixed"):
            figures = _figures(counted, case, variant)
            assert all(isinstance(v, int) and v > 0 for k, v in figures.items() if k != "ll_misses")
            assert figures["est_cycles"] > figures["instructions"]
    how = counted.metadata["counts"]
    assert how["tool"] == "callgrind" and how["valgrind"].startswith("valgrind-")
    assert how["calls_per_count"] == callgrind.CALLS_PER_COUNT
    assert (how["device"], how["measured_device"]) == ("cpu", "cpu")
    assert how["forms_counted"] == 4 and "error" not in how
    assert counted.metadata["schema_check"].startswith(("passed", "skipped"))
    assert gate_work(counted).passed


def test_a_second_count_of_the_same_code_agrees_within_a_hundredth_of_a_percent(counted):
    config = RunConfig.from_mapping(counted.metadata["config"])
    share = Share(
        config=config,
        worker=0,
        first_block=0,
        block_count=config.blocks,
        cpu_core=counted.metadata["cpu_core"],
        device="cpu",
        model_dir=counted.metadata["model"],
    )
    again = RealHost().count_calls(share, measured_device="cpu", log=lambda _line: None)
    for case in CASES:
        for variant in ("baseline", "fixed"):
            first = _figures(counted, case, variant)["instructions"]
            second = again.row_fields(case, TOKENS, variant)["instructions"]
            assert first is not None and second is not None
            assert abs(second - first) <= 1e-4 * first, (case, variant, first, second)


def test_texts_two_forms_which_do_the_same_work_count_within_a_tenth_of_a_percent(counted):
    baseline = _figures(counted, "text", "baseline")["instructions"]
    fixed = _figures(counted, "text", "fixed")["instructions"]
    assert baseline and fixed
    assert abs(fixed - baseline) <= 1e-3 * baseline, (baseline, fixed)


def test_a_multimodal_baseline_runs_more_instructions_than_its_fixed_form(counted):
    baseline, fixed = (_figures(counted, "audio", v) for v in ("baseline", "fixed"))
    assert baseline["instructions"] > fixed["instructions"]
    assert baseline["est_cycles"] > fixed["est_cycles"]


def test_a_factory_pair_is_counted_as_a_run_is():
    pair = paired_benchmark(
        "support.ledger_factories:lookups",
        warmup=2,
        blocks=2,
        iterations=3,
        processes=1,
        allow_busy=True,
        counts=True,
    )
    assert pair.work is not None and pair.counts is not None
    baseline, fixed = pair.work["baseline"], pair.work["fixed"]
    assert baseline["ops"] == {"aten.embedding": 2} and fixed["ops"] == {"aten.embedding": 1}
    # The second lookup of 50 rows: more instructions, never fewer.
    assert baseline["instructions"] > fixed["instructions"] > 0
    assert pair.counts["forms_counted"] == 2
