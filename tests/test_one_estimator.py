"""One estimator per headline: the reduction shown lies inside the interval shown with it."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from embedbench.harness import stats
from embedbench.report import tables
from embedbench.report.results import RunResult, load_results

BLOCKS = 20
CALLS = 20
WORKER_LABELS = [b // 5 for b in range(BLOCKS)]  # 4 workers of 5 blocks


def _simulate(
    rng: np.random.Generator, *, ratio: float, sd: float, heavy: bool, shift: bool
) -> tuple[list[list[float]], list[list[float]]]:
    """Block samples of both variants: a level per block (30 % slower for both from block
    10 on when ``shift``), the variant's ratio, and multiplicative noise per variant and
    block (normal, or Student t with 2 df when ``heavy``) and per call."""
    base, fixed = [], []
    for b in range(BLOCKS):
        level = 1000.0 * (1.3 if shift and b >= BLOCKS // 2 else 1.0)
        for out, r in ((base, 1.0), (fixed, ratio)):
            z = rng.standard_t(2) if heavy else rng.standard_normal()
            calls = np.exp(0.01 * rng.standard_normal(CALLS))
            out.append(list(level * r * math.exp(sd * z) * calls))
    return base, fixed


def _inside(value: float, interval: tuple[float, float]) -> bool:
    low, high = interval
    return low <= value <= high


NOISE = [
    (sd, heavy, shift)
    for sd in (0.005, 0.02, 0.08)
    for heavy in (False, True)
    for shift in (False, True)
]


@pytest.mark.parametrize("ratio", [1.0, 0.85], ids=["no effect", "15 % faster"])
def test_the_headline_lies_inside_its_interval_in_every_trial(ratio):
    rng = np.random.default_rng(2024 if ratio == 1.0 else 2025)
    summaries = [
        stats.summarize_pair(base, fixed, workers=workers)
        for sd, heavy, shift in NOISE
        for base, fixed in (
            _simulate(rng, ratio=ratio, sd=sd, heavy=heavy, shift=shift) for _ in range(25)
        )
        for workers in (None, WORKER_LABELS)
    ]
    outside = [s for s in summaries if not _inside(s.reduction_pct, s.reduction_ci95_pct)]
    assert not outside, [(s.workers, s.reduction_pct, s.reduction_ci95_pct) for s in outside]
    for s in summaries:  # the verdict follows that interval
        assert s.verdict == stats.verdict(s.reduction_ci95_pct, level=s.interval.level)
    with_workers = [s for s in summaries if s.workers > 1]
    for s in with_workers:  # the PR's ratio of the combined medians, to float rounding
        assert s.pr_reduction_pct == pytest.approx(s.reduction_pct, abs=1e-9)
    # The simulation can tell: in one process the PR's ratio of medians, the headline
    # before, falls outside the Hodges–Lehmann interval in some of these trials.
    one = [s for s in summaries if s.workers == 1]
    assert len(one) == len(with_workers) == 300
    assert any(not _inside(s.pr_reduction_pct, s.reduction_ci95_pct) for s in one)


def test_an_aa_pair_has_its_headline_inside_and_no_difference_at_the_nominal_rate():
    rng = np.random.default_rng(77)
    trials = 400
    summaries = [
        stats.summarize_pair(*_simulate(rng, ratio=1.0, sd=sd, heavy=heavy, shift=shift))
        for sd, heavy, shift in (NOISE[i % len(NOISE)] for i in range(trials))
    ]
    outside = [s for s in summaries if not _inside(s.reduction_pct, s.reduction_ci95_pct)]
    assert not outside, [(s.reduction_pct, s.reduction_ci95_pct) for s in outside]
    # The exact signed-rank interval over 20 blocks covers 95.16 % (binomial sd 1.1 pp).
    no_difference = sum(s.verdict == stats.NO_DIFFERENCE for s in summaries)
    assert 0.92 <= no_difference / trials <= 0.98
    # The PR's ratio, the headline before, did not always agree with that verdict's interval.
    assert any(not _inside(s.pr_reduction_pct, s.reduction_ci95_pct) for s in summaries)


def _pair_from_log_ratios(d: list[float]) -> stats.PairSummary:
    """One sample per block, so that the block log-ratios are exactly ``d``."""
    return stats.summarize_pair([[100.0]] * len(d), [[100.0 * math.exp(x)] for x in d])


@pytest.mark.parametrize(
    "d",
    [
        [0.1],
        [0.1, -0.3],
        [0.05, 0.05],
        [0.0] * 8,
        [-0.1] * 8,
        [0.1, 0.1, 0.1, -0.2, -0.2, 0.3],
        [0.0, 0.0, 0.0, 0.0, 0.5, -0.01, 0.5],
        [0.02, -0.01, 0.02, -0.01, 0.4, 0.4, -0.5, 0.02, -0.01, 0.02],
    ],
    ids=["n=1", "n=2", "n=2 tied", "all zero", "all equal", "ties", "zeros", "ties n=10"],
)
def test_the_estimate_lies_inside_its_interval_in_edge_cases(d):
    s = _pair_from_log_ratios(d)
    assert _inside(s.reduction_pct, s.reduction_ci95_pct)
    assert s.reduction_pct == s.interval.estimate_pct
    if len(set(d)) == 1:  # every block the same: a point, at that block's reduction
        assert s.reduction_ci95_pct == (s.reduction_pct, s.reduction_pct)
        assert s.reduction_pct == pytest.approx(stats.log_to_reduction_pct(d[0]))
    if len(d) <= 5:  # the interval cannot reach 95 %: no direction is named
        assert s.interval.level < stats.CONFIDENCE and s.verdict == stats.NO_DIFFERENCE


def test_the_estimate_lies_inside_its_interval_for_small_tied_integer_samples():
    rng = np.random.default_rng(9)
    for n in range(1, 13):
        for _ in range(40):
            d = rng.integers(-2, 3, size=n).astype(float) / 10.0
            hl = stats.hodges_lehmann(d)
            assert hl.ci[0] <= hl.estimate <= hl.ci[1], (n, d)


def test_a_rows_json_has_the_headline_and_the_prs_statistic_beside_it():
    rng = np.random.default_rng(31)
    base, fixed = _simulate(rng, ratio=0.9, sd=0.05, heavy=True, shift=True)
    for workers in (None, WORKER_LABELS):
        row = stats.summarize_pair(base, fixed, workers=workers).to_json()
        host = row["host_us"]
        assert row["pr_reduction_pct"] == pytest.approx(
            100.0 * (1.0 - host["fixed"] / host["baseline"])
        )
        assert row["reduction_pct"] == row["interval_estimate_pct"]
        assert _inside(row["reduction_pct"], row["reduction_ci95_pct"])
        json.dumps(row, allow_nan=False)


# --- the PR-format table and older files ---------------------------------------------------


def _run(rows: list[dict], processes: int) -> RunResult:
    metadata = {
        "schema_version": 4,
        "status": "complete",
        "lengths": [300],
        "cases": [r["case"] for r in rows],
        "processes": processes,
        "timing_window": "pr",
    }
    return RunResult(Path("run"), metadata, [], [], rows)


def _row(case: str, workers: list[int] | None, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    base, fixed = _simulate(rng, ratio=0.9, sd=0.05, heavy=False, shift=True)
    pair = stats.summarize_pair(base, fixed, workers=workers)
    return {"case": case, "tokens": 300, **pair.to_json(), "valid": True}


def _pr_ratio(shown: dict) -> float:
    """The PR's 1 − After/Before of a PR-table row's own (printed) Before and After, %."""
    return 100.0 * (1.0 - float(shown["After (μs)"]) / float(shown["Before (μs)"]))


def test_a_one_process_pr_table_is_the_prs_four_columns_of_the_prs_statistic():
    rows = [_row("text", None, 1), _row("audio", None, 2)]
    result = _run(rows, 1)
    table = tables.pr_table(result)
    assert list(table.columns) == list(tables.PR_COLUMNS)
    for shown, row in zip(table.to_dict("records"), rows, strict=True):
        assert shown["Host latency reduction"] == f"{row['pr_reduction_pct']:.2f}%"
        reduction = float(shown["Host latency reduction"].rstrip("%"))
        assert reduction == pytest.approx(_pr_ratio(shown), abs=0.02)
    # The interval's own (Hodges–Lehmann) estimate differs, and is in the verdict's table.
    assert any(r["reduction_pct"] != pytest.approx(r["pr_reduction_pct"], abs=0.01) for r in rows)
    verdict, _, _ = tables.verdict_tables(result)
    assert list(verdict["Estimate"]) == [f"{r['reduction_pct']:.2f}%" for r in rows]
    lines = tables.to_pr_markdown(table).splitlines()
    assert lines[0] == "| Input | Before (μs) | After (μs) | Host latency reduction |"
    assert lines[1] == "| --- | ---: | ---: | ---: |"


def test_the_pr_table_keeps_the_prs_four_columns_with_workers():
    rows = [_row("text", WORKER_LABELS, 1), _row("audio", WORKER_LABELS, 2)]
    table = tables.pr_table(_run(rows, 4))
    assert list(table.columns) == list(tables.PR_COLUMNS)
    for shown, row in zip(table.to_dict("records"), rows, strict=True):
        assert shown["Host latency reduction"] == f"{row['pr_reduction_pct']:.2f}%"
    assert tables.to_pr_markdown(table).splitlines()[1] == "| --- | ---: | ---: | ---: |"


def _write_old_run(directory, rows: list[dict]) -> None:
    """A schema-3 directory: its rows' reduction_pct is the PR's ratio, no pr_reduction_pct."""
    directory.mkdir()
    metadata = {
        "schema_version": 3,
        "status": "complete",
        "warmup": 2,
        "blocks": BLOCKS,
        "iterations": CALLS,
        "lengths": [300],
        "cases": [r["case"] for r in rows],
        "cpu_core": 0,
        "metric_order": ["host_observed_us", "calling_thread_cpu_us", "completion_us"],
        "target": "reference",
        "device": "cpu",
        "processes": 1,
    }
    files = {
        "metadata.json": metadata,
        "micro-raw.json": [],
        "validation.json": [],
        "summary.json": rows,
    }
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data))


def test_a_schema_3_run_reads_with_the_headline_inside_its_interval(tmp_path):
    new = [_row("text", None, 1), _row("audio", WORKER_LABELS, 2)]
    invalid = {"case": "image", "tokens": 300, "host_us": None, "reduction_pct": None}
    old = [
        {k: v for k, v in row.items() if k != "pr_reduction_pct"}
        | {"reduction_pct": row["pr_reduction_pct"]}
        for row in new
    ] + [{**invalid, "reduction_ci95_pct": None, "verdict": "invalid", "valid": False}]
    _write_old_run(tmp_path / "v3", old)
    result = load_results(tmp_path / "v3")
    text, audio, image = result.summary
    assert text["reduction_pct"] == new[0]["reduction_pct"]  # its Hodges–Lehmann estimate
    assert text["pr_reduction_pct"] == new[0]["pr_reduction_pct"]
    assert audio["reduction_pct"] == audio["pr_reduction_pct"] == new[1]["pr_reduction_pct"]
    assert image["pr_reduction_pct"] is None
    table = tables.pr_table(result)
    assert list(table.columns) == list(tables.PR_COLUMNS)
    assert list(table["Host latency reduction"]) == [
        f"{new[0]['pr_reduction_pct']:.2f}%",
        f"{new[1]['pr_reduction_pct']:.2f}%",
        "invalid",
    ]
    assert set(tables.statistics_table(result)["Verdict"]) <= {
        stats.FASTER,
        stats.SLOWER,
        stats.NO_DIFFERENCE,
        stats.INVALID,
    }


# The original script's files, field by field (tests/helpers.py lists them with its source).
ORIGINAL_RECORD_KEYS = (
    *("device", "case", "tokens", "scope", "variant", "block", "iterations"),
    *("samples_us", "wall_start", "wall_end", "cpu_mhz_start", "cpu_mhz_end"),
)


def _write_original_run(directory: Path) -> None:
    """An original-format run of Text and Audio (one process, as the script times)."""
    from test_figures import make_result

    made = make_result(cases=("text", "audio"), workers=1, blocks=BLOCKS, seed=3)
    records = [{k: r[k] for k in ORIGINAL_RECORD_KEYS} for r in made.records]
    lookups = {"text": {"baseline": 1, "fixed": 1}, "audio": {"baseline": 2, "fixed": 1}}
    files = {
        "metadata.json": {
            **{"baseline_ref": "01a2f93256975c7ff9565c5414b0fe0225bc4765", "checkout": "f" * 40},
            **{"torch": "2.13.0+cu129", "vllm": "0.29.0", "transformers": "5.14.0"},
            **{"gpu": "NVIDIA H100 80GB", "cpu_core": 2, "torch_cpu_threads": 1},
            **{"warmup": 2, "blocks": BLOCKS, "iterations": 20, "lengths": [1172]},
            **{"embedding_shape": [152064, 3584], "dtype": "bfloat16"},
            **{"input_ids_dtype": "int32", "mask_device": "cpu", "start_time": 1789300000.0},
            "metric_order": made.metadata["metric_order"],
            "end_time": 1789300100.0,
        },
        "micro-raw.json": records,
        "validation.json": [
            {
                **{"case": case, "tokens": 1172, "device": "cuda", "calls": lookups[case]},
                "same_input_wrapper_torch_equal": True,
            }
            for case in ("text", "audio")
        ],
        "summary.json": [
            {"tokens": 1172, "case": r["case"], **{k: r[k] for k in ("host_us", "reduction_pct")}}
            for r in made.summary
        ],
    }
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data), encoding="utf-8")


def test_the_original_scripts_output_prints_the_prs_four_columns_that_add_up(tmp_path, capsys):
    from embedbench import cli

    _write_original_run(tmp_path / "original")
    assert cli.main(["report", str(tmp_path / "original")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "| Input | Before (μs) | After (μs) | Host latency reduction |"
    rows = [line.strip("|").split(" | ") for line in printed[2:4]]
    assert [r[0].strip() for r in rows] == ["Text", "Audio"]
    for _, before, after, reduction in rows:
        ratio = 100.0 * (1.0 - float(after) / float(before))
        assert float(reduction.strip().rstrip("%")) == pytest.approx(ratio, abs=0.02)
    result = load_results(tmp_path / "original")
    assert all(tables.one_process(row) for row in result.summary)  # HL intervals
    estimates = [f"{r['reduction_pct']:.2f}%" for r in result.summary]
    assert estimates != [r[3].strip() for r in rows]  # the estimate is not in this table
    assert list(tables.verdict_tables(result)[0]["Estimate"]) == estimates


def test_compare_puts_the_prs_statistic_in_the_reduction_column_in_every_design():
    from embedbench.report import compare

    one = _run([_row("text", None, 1), _row("audio", None, 2)], 1)
    workers = _run([_row("text", WORKER_LABELS, 1), _row("audio", WORKER_LABELS, 2)], 4)
    runs = {"one": one, "workers": workers}
    table = compare.compare_table(runs)
    assert not [c for c in table.columns if "PR statistic" in c]
    keys = compare.run_keys(runs)
    for name, result in runs.items():
        shown = list(table[f"{keys[name]}: reduction"])
        assert shown == [f"{r['pr_reduction_pct']:.2f}%" for r in result.summary]
