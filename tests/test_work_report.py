"""work.json read back (docs/format.md, "work.json"): the round trip through the results
files, an older directory without it, the "Work per call" table and sentence, the PR
comment, and ``embedbench gate --on work`` with its exit codes.

The directories are written from a simulated run (embedbench/sim.py: the kit's own
pipeline, its ledger the one each form's lookups imply) and edited by hand, so the gate
meets a planted extra lookup, a new operator, an allowance at its edge, a missing ledger
and workers that disagree. No harness run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedbench.cli import main
from embedbench.config import RunConfig
from embedbench.errors import OutputDirError
from embedbench.report import prcomment, sections, tables, work
from embedbench.report.results import (
    WORK,
    ResultsWriter,
    RunResult,
    inspect_results_dir,
    load_results,
)
from embedbench.report.workgate import gate_work, work_gate_lines
from embedbench.sim import SimulatedHost, simulate_run

TOKENS = 1172
HIDDEN = 3584  # the embedded default's geometry, which the simulated ledger takes
LOOKUP_ROWS = TOKENS * HIDDEN * 2
WIDENED_IDS = TOKENS * 8
WORK_HEADER = "| Input | Lookups | Operators | Written | Allocated | Syncs |"


@pytest.fixture(scope="module")
def simulated() -> RunResult:
    """A default-design run of all six cases on the simulated host, in memory."""
    return simulate_run(RunConfig(lengths=TOKENS), SimulatedHost(), seed=1)


def _write(result: RunResult, directory: Path, *, version: int | None = None) -> Path:
    directory.mkdir(parents=True)
    metadata = dict(result.metadata)
    if version is not None:
        metadata["schema_version"] = version
    files = {
        "metadata.json": metadata,
        "micro-raw.json": result.records,
        "validation.json": result.validation,
        "summary.json": result.summary,
        WORK: result.work,
    }
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data), encoding="utf-8")
    return directory


@pytest.fixture
def run_dir(simulated: RunResult, tmp_path: Path) -> Path:
    return _write(simulated, tmp_path / "run")


def _edit_work(directory: Path, change) -> None:
    rows = json.loads((directory / WORK).read_text())
    change(rows)
    (directory / WORK).write_text(json.dumps(rows))


def _row(rows: list[dict], case: str, variant: str) -> dict:
    return next(r for r in rows if r["case"] == case and r["variant"] == variant)


def _gate(directory: Path, capsys, *extra: str) -> tuple[int, list[str], str]:
    code = main(["gate", str(directory), "--on", "work", *extra])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


# -- the results files -------------------------------------------------------------------


def test_the_writer_puts_each_cases_rows_in_place_and_on_disk(tmp_path):
    writer = ResultsWriter(tmp_path / "run", {"status": "running"})
    assert json.loads((tmp_path / "run" / WORK).read_text()) == []  # there from the start

    def rows(case: str, workers: list[int]) -> list[dict]:
        return [{"case": case, "tokens": 300, "variant": v, "workers": workers} for v in "ab"]

    writer.set_work("text", 300, rows("text", [0]))
    writer.set_work("audio", 300, rows("audio", [0]))
    writer.set_work("text", 300, rows("text", [0, 1]))  # a second worker's arrived
    on_disk = json.loads((tmp_path / "run" / WORK).read_text())
    assert on_disk == writer.work == [*rows("text", [0, 1]), *rows("audio", [0])]


def test_a_run_dir_round_trips_its_ledger(simulated, run_dir):
    check = inspect_results_dir(run_dir)
    assert WORK in check.files
    loaded = load_results(run_dir)
    assert loaded.work == simulated.work
    assert {(r["case"], r["variant"]) for r in loaded.work} == {
        (c, v) for c in RunConfig().cases for v in ("baseline", "fixed")
    }


def test_a_bad_ledger_row_is_named_by_its_field(run_dir):
    _edit_work(run_dir, lambda rows: rows[0].update(bytes_written=-1))
    with pytest.raises(OutputDirError, match=r"work\.json\[0\]\.bytes_written"):
        inspect_results_dir(run_dir)


def test_a_dir_made_before_the_ledger_loads_validates_and_renders(simulated, tmp_path, capsys):
    old = _write(simulated, tmp_path / "v5", version=5)
    (old / WORK).unlink()
    assert WORK not in inspect_results_dir(old).files
    result = load_results(old)
    assert result.work == [] and len(result.summary) == len(simulated.summary)
    [note] = sections.work_per_call(result)
    assert "no per-call ledger" in note.to_html()
    comment = prcomment.comment_markdown(result)
    assert "Work per call" not in comment and WORK_HEADER not in comment
    assert tables.to_pr_markdown(tables.pr_table(result)) in comment
    # Its timed gate is as before; the gate on work refuses it as bad input, in one line.
    assert main(["gate", str(old)]) == 0
    capsys.readouterr()
    code, out, err = _gate(old, capsys)
    assert code == 2 and not [line for line in out if line.startswith("gate:")]
    assert err.count("\n") == 1 and "no per-call ledger" in err and "Traceback" not in err


def test_an_older_version_reads_with_no_ledger_even_beside_a_work_file(simulated, tmp_path):
    old = _write(simulated, tmp_path / "v5", version=5)
    assert load_results(old).work == []  # counted nothing before 6: a stray file is not read
    assert load_results(_write(simulated, tmp_path / "v6")).work == simulated.work


# -- the table and the sentence -----------------------------------------------------------


def test_the_table_shows_each_forms_counts_and_the_exact_delta(simulated):
    table = work.work_table(simulated).set_index("Input")
    assert list(table.columns) == list(work.WORK_COLUMNS[1:])  # no kernels on a CPU
    audio, text = table.loc["Audio"], table.loc["Text"]
    assert audio["Lookups"] == "2 → 1 (-1)" and text["Lookups"] == "1 → 1 (same)"
    assert audio["Operators"] == "4 → 2 (-2)"
    delta = LOOKUP_ROWS + WIDENED_IDS
    assert audio["Written"] == f"16.82 MB → 8.41 MB (-{delta:,} B)"
    assert audio["Allocated"].endswith(f"(-{delta:,} B)")
    assert text["Written"].endswith("(same)") and audio["Syncs"] == "0 → 0 (same)"


def test_kernels_and_workers_that_disagree_get_their_own_columns(simulated):
    rows = [dict(r) for r in simulated.work]
    for row in rows:
        row["kernels"] = 3 if row["variant"] == "baseline" else 2
    _row(rows, "video", "fixed").update(workers_agree=False, differing={"2": ["ops"]})
    table = work.work_table(RunResult(None, simulated.metadata, [], [], [], [], rows))
    table = table.set_index("Input")
    assert table.loc["Audio", "Kernels"] == "3 → 2 (-1)"
    assert table.loc["Video", "Workers"] == "DIFFER" and table.loc["Audio", "Workers"] == "agree"
    sentence = work.work_sentence(RunResult(None, simulated.metadata, [], [], [], [], rows))
    assert sentence.endswith(
        "kernels differ (Text -1, Audio -1, Image -1, Video -1, "
        "Audio + image + video -1, Interleaved audio/video -1); "
        "the workers' counts DIFFER in Video."
    )


def test_the_sentence_says_what_the_fixed_form_no_longer_does(simulated):
    assert work.work_sentence(simulated) == (
        "Work per call, counted: the fixed form runs one fewer embedding lookup in 5 of 6 "
        "cases (8.41 MB less written per call), the same lookups in Text; the same syncs."
    )
    rows = [dict(r, ops=dict(r["ops"])) for r in simulated.work]
    _row(rows, "audio", "fixed").update(syncs=1)
    _row(rows, "image", "fixed")["ops"]["aten.embedding"] = 3
    sentence = work.work_sentence(RunResult(None, simulated.metadata, [], [], [], [], rows))
    assert "MORE embedding lookups in Image (+1)" in sentence
    assert "one fewer embedding lookup in 4 of 6 cases" in sentence
    assert sentence.endswith("; syncs differ (Audio +1).")
    assert work.work_sentence(RunResult(None, {}, [], [], [], [])) is None


def test_the_pr_comment_puts_the_work_beside_the_prs_table(simulated):
    lines = prcomment.comment_markdown(simulated).splitlines()
    headline = lines.index(prcomment.headline_sentence(simulated))
    assert lines[headline + 1] == work.work_sentence(simulated)  # one paragraph
    pr_table = tables.to_pr_markdown(tables.pr_table(simulated)).splitlines()
    after_pr = lines.index(pr_table[-1]) + 1
    assert lines[after_pr : after_pr + 4] == [
        "",
        "**Work per call** (counted, not timed)",
        "",
        WORK_HEADER,
    ]
    assert len([line for line in lines if line.startswith("| Audio |")]) == 3  # PR, work, verdict


def test_the_report_section_shows_the_table_the_sentence_and_its_markdown(simulated):
    table, note, markdown = sections.work_per_call(simulated)
    assert list(table.frame.columns) == list(work.WORK_COLUMNS)
    assert note.text == work.work_sentence(simulated)
    assert markdown.text.splitlines()[0] == WORK_HEADER
    titles = [s.title for s in sections.REPORT_SECTIONS]
    assert titles.index("Work per call") == titles.index("Before/after in the PR's format") + 1


# -- the gate on work --------------------------------------------------------------------


def test_the_prs_pair_passes_the_gate_on_work(run_dir, capsys):
    code, out, _ = _gate(run_dir, capsys)
    assert code == 0
    assert out == [
        "gate: pass, 6 cases, the fixed form does no more counted work than the baseline "
        "beyond 0.00 %"
    ]


def test_a_planted_extra_lookup_fails_the_gate(run_dir, capsys):
    # Text's fixed form, hand-edited to make a second lookup: its rows and widened ids.
    def plant(rows: list[dict]) -> None:
        fixed = _row(rows, "text", "fixed")
        fixed["ops"] = {"aten.embedding": 2, "aten.to": 2}
        fixed["bytes_written"] += LOOKUP_ROWS + WIDENED_IDS

    _edit_work(run_dir, plant)
    code, out, _ = _gate(run_dir, capsys)
    assert code == 1
    assert out == [
        f"gate: FAIL Text @ {TOKENS} tokens: operators 2 → 4 (+100.0 %); "
        "aten.embedding 1 → 2 (+100.0 %); aten.to 1 → 2 (+100.0 %); "
        "bytes written 8.41 MB → 16.82 MB (+100.0 %)"
    ]

    # An extra lookup in Audio's fixed form only brings it level with its baseline: a pass.
    def level(rows: list[dict]) -> None:
        for case in ("text", "audio"):
            baseline = _row(rows, case, "baseline")
            _row(rows, case, "fixed").update({k: v for k, v in baseline.items() if k != "variant"})

    _edit_work(run_dir, level)
    assert _gate(run_dir, capsys)[0] == 0


def test_an_operator_the_baseline_does_not_run_fails_at_any_allowance(run_dir, capsys):
    _edit_work(run_dir, lambda rows: _row(rows, "text", "fixed")["ops"].update({"aten.nonzero": 1}))
    code, out, _ = _gate(run_dir, capsys, "--max-increase", "1000")
    assert code == 1 and out == [f"gate: FAIL Text @ {TOKENS} tokens: aten.nonzero 0 → 1 (new)"]


@pytest.mark.parametrize(("allowance", "code"), [("0", 1), ("4.9", 1), ("5", 0), ("10", 0)])
def test_an_increase_passes_within_the_allowance_and_fails_beyond(run_dir, capsys, allowance, code):
    def grow(rows: list[dict]) -> None:
        _row(rows, "text", "baseline")["bytes_allocated"] = 1_000_000
        _row(rows, "text", "fixed")["bytes_allocated"] = 1_050_000

    _edit_work(run_dir, grow)
    got, out, _ = _gate(run_dir, capsys, "--max-increase", allowance)
    assert got == code
    if code:
        assert out == [
            f"gate: FAIL Text @ {TOKENS} tokens: bytes allocated 1.00 MB → 1.05 MB (+5.0 %)"
        ]


def test_a_case_without_a_ledger_or_with_disagreeing_workers_cannot_be_certified(run_dir, capsys):
    def damage(rows: list[dict]) -> None:
        rows[:] = [r for r in rows if r["case"] != "video"]
        _row(rows, "image", "fixed").update(workers_agree=False, differing={"3": ["ops"]})

    _edit_work(run_dir, damage)
    code, out, _ = _gate(run_dir, capsys)
    assert code == 1
    assert out == [
        f"gate: FAIL Image @ {TOKENS} tokens: the workers' ledgers differ (worker 3: ops); "
        "cannot be certified",
        f"gate: FAIL Video @ {TOKENS} tokens: no ledger (not measured, failed validation or "
        "the run stopped); cannot be certified",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--on", "work", "--max-increase", "-1"],
        ["--on", "work", "--max-increase", "lots"],
        ["--on", "work", "--max-slowdown", "2"],
        ["--max-increase", "2"],
        ["--on", "bytes"],
    ],
    ids=["negative", "not a number", "the time gate's allowance", "without --on work", "bad on"],
)
def test_bad_input_is_one_line_and_exit_2(run_dir, capsys, args):
    code = main(["gate", str(run_dir), *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_empty_ledger_and_a_missing_dir_are_bad_input(run_dir, tmp_path, capsys):
    _edit_work(run_dir, lambda rows: rows.clear())
    code, out, err = _gate(run_dir, capsys)
    assert code == 2 and out == [] and "no per-call ledger" in err
    code, out, err = _gate(tmp_path / "nowhere", capsys)
    assert code == 2 and out == [] and err.count("\n") == 1


def test_the_time_gate_stays_the_default(run_dir, capsys):
    code = main(["gate", str(run_dir)])
    out, _ = capsys.readouterr()
    assert code == 0 and out.startswith("gate: pass, 6 cases, none slower beyond 0.00 %")


def test_the_gate_reads_the_same_in_python(simulated):
    outcome = gate_work(simulated)
    assert outcome.passed and len(outcome.rows) == 6
    assert work_gate_lines(outcome)[0].startswith("gate: pass, 6 cases")
    with pytest.raises(OutputDirError, match="no per-call ledger"):
        gate_work(RunResult(None, simulated.metadata, [], [], simulated.summary, []))


# -- the compare notebook: runs of the same code count the same ----------------------------


def test_runs_of_the_same_code_count_the_same_and_a_difference_is_flagged(simulated):
    other = simulate_run(RunConfig(lengths=TOKENS), SimulatedHost(), seed=2)
    runs = {"A": simulated, "B": other}
    note, table = sections.work_comparison(runs)
    assert len(table.frame) == 12 and set(table.frame["Ledger"]) == {"same"}
    assert set(table.frame["Against"]) == {"A"} and "all equal" in note.text

    rows = [dict(r, ops=dict(r["ops"])) for r in other.work]
    _row(rows, "audio", "fixed")["ops"]["aten.embedding"] = 2
    _row(rows, "audio", "fixed")["bytes_written"] += LOOKUP_ROWS
    changed = RunResult(None, other.metadata, [], [], other.summary, [], rows)
    note, table = sections.work_comparison({"A": simulated, "B": changed})
    flagged = table.frame[table.frame["Ledger"] != "same"]
    assert list(flagged["Input"]) == [f"Audio ({TOKENS} tokens)"]
    assert list(flagged["Form"]) == ["fixed"]
    assert flagged.iloc[0]["Ledger"] == (
        f"DIFFERS: aten.embedding 1 → 2; bytes written +{LOOKUP_ROWS:,}"
    )
    assert note.text.startswith("1 of 12 ledgers DIFFER")


def test_runs_of_other_code_or_torch_are_not_held_to_the_same_ledger(simulated):
    other_code = dict(simulated.metadata, code_sha256={"baseline": "x", "fixed": "y"})
    other_torch = dict(simulated.metadata, torch="0.0.1")
    runs = {
        "A": simulated,
        "B": RunResult(None, other_code, [], [], [], [], simulated.work),
        "C": RunResult(None, other_torch, [], [], [], [], simulated.work),
    }
    [note] = sections.work_comparison(runs)
    assert "no ledger compared" in note.text


# -- instructions and simulated misses per call (--counts) ---------------------------------

# Per call, as a counted run of the embedded default has them (multimodal: one lookup
# fewer; Text: the same code, a few dozen instructions apart).
COUNTED = {
    "baseline": {"instructions": 5_652_120, "d1_misses": 281_000, "ll_misses": 140_000},
    "fixed": {"instructions": 4_730_750, "d1_misses": 150_000, "ll_misses": 9_000},
}
TEXT_COUNTED = {"instructions": 929_400, "d1_misses": 139_000, "ll_misses": 8_000}
COUNTS_METADATA = {"tool": "callgrind", "calls_per_count": 6, "device": "cpu"}


def _figures(counted: dict) -> dict:
    cycles = counted["instructions"] + 10 * counted["d1_misses"] + 100 * counted["ll_misses"]
    return {**counted, "est_cycles": cycles}


def _count(rows: list[dict]) -> None:
    for row in rows:
        counted = TEXT_COUNTED if row["case"] == "text" else COUNTED[row["variant"]]
        row.update(_figures(counted))
    _row(rows, "text", "fixed")["instructions"] += 450  # +0.05 %: the same within 0.1 %


def _counted(simulated: RunResult, measured_device: str = "cpu") -> RunResult:
    rows = [dict(r) for r in simulated.work]
    _count(rows)
    counts = {**COUNTS_METADATA, "measured_device": measured_device}
    metadata = {**simulated.metadata, "counts": counts}
    return RunResult(None, metadata, [], [], simulated.summary, [], rows)


def test_a_run_without_counts_writes_the_four_figures_null(simulated):
    for row in simulated.work:
        assert [row[name] for name in work.COUNT_COLUMNS] == [None] * 4
    assert simulated.metadata["counts"] is None
    assert list(work.work_table(simulated).columns) == list(work.WORK_COLUMNS)


def test_counted_figures_round_trip_through_the_files(simulated, run_dir):
    _edit_work(run_dir, _count)
    assert WORK in inspect_results_dir(run_dir).files
    rows = load_results(run_dir).work
    assert _row(rows, "audio", "baseline")["instructions"] == 5_652_120
    assert _row(rows, "text", "fixed")["est_cycles"] == 929_400 + 10 * 139_000 + 100 * 8_000
    _edit_work(run_dir, lambda rows: rows[1].update(instructions=-5))
    with pytest.raises(OutputDirError, match=r"work\.json\[1\]\.instructions"):
        inspect_results_dir(run_dir)


def test_a_version_6_dir_reads_with_the_four_figures_null(simulated, tmp_path):
    old = _write(simulated, tmp_path / "v6", version=6)
    _edit_work(old, lambda rows: [row.pop(name) for row in rows for name in work.COUNT_COLUMNS])
    assert "instructions" not in json.loads((old / WORK).read_text())[0]
    result = load_results(old)
    assert result.work == simulated.work
    assert all(row["instructions"] is None for row in result.work)
    assert list(work.work_table(result).columns) == list(work.WORK_COLUMNS)


def test_the_table_shows_the_counted_figures_with_their_exact_delta(simulated):
    table = work.work_table(_counted(simulated)).set_index("Input")
    assert list(table.columns)[-4:] == ["Instructions", "D1 misses", "LL misses", "Est. cycles"]
    audio, text = table.loc["Audio"], table.loc["Text"]
    assert audio["Instructions"] == "5,652,120 → 4,730,750 (-921,370, -16.3 %)"
    assert audio["LL misses"] == "140,000 → 9,000 (-131,000, -93.6 %)"
    assert text["Instructions"] == "929,400 → 929,850 (+450, +0.05 %)"
    assert text["D1 misses"] == "139,000 → 139,000 (same)"
    # A form the counting process could not count is n/a; the other cases keep theirs.
    rows = [dict(r) for r in _counted(simulated).work]
    _row(rows, "video", "fixed").update(dict.fromkeys(work.COUNT_COLUMNS))
    partial = work.work_table(RunResult(None, simulated.metadata, [], [], [], [], rows))
    assert partial.set_index("Input").loc["Video", "Instructions"] == "n/a"


def test_the_sentence_and_the_pr_comment_carry_the_instructions(simulated):
    counted = _counted(simulated)
    sentence = work.work_sentence(counted)
    assert sentence.endswith(
        "; 16 % fewer instructions per call in 5 of 6 cases, the same instructions within "
        "0.1 % in Text (counted under valgrind)."
    )
    on_gpu = work.work_sentence(_counted(simulated, measured_device="cuda"))
    assert on_gpu.endswith("(counted under valgrind on the CPU copy of the cuda run's forms).")
    comment = prcomment.comment_markdown(counted)
    header = [line for line in comment.splitlines() if line.startswith("| Input | Lookups")]
    assert header == [WORK_HEADER + " Instructions | D1 misses | LL misses | Est. cycles |"]
    assert sentence in comment


def test_the_gate_takes_instructions_beyond_a_tenth_of_a_percent_not_the_misses(run_dir, capsys):
    _edit_work(run_dir, _count)  # Text's fixed form: +0.05 % instructions, within the floor
    assert _gate(run_dir, capsys)[0] == 0

    def more_misses(rows: list[dict]) -> None:  # simulated: not gated
        _row(rows, "image", "fixed").update(d1_misses=10**9, ll_misses=10**9, est_cycles=10**12)

    _edit_work(run_dir, more_misses)
    assert _gate(run_dir, capsys)[0] == 0

    def more_instructions(rows: list[dict]) -> None:
        _row(rows, "text", "fixed")["instructions"] = 929_400 + 1_000  # +0.11 %

    _edit_work(run_dir, more_instructions)
    code, out, _ = _gate(run_dir, capsys)
    assert code == 1
    assert out == [
        f"gate: FAIL Text @ {TOKENS} tokens: instructions per call 929,400 → 930,400 (+0.1 %)"
    ]
    assert _gate(run_dir, capsys, "--max-increase", "0.2")[0] == 0
