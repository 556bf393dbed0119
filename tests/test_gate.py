"""The regression gate (embedbench gate) on hand-written result directories."""

import json
import random
import subprocess
import sys

import pytest
from helpers import original_metadata

from embedbench import load_results
from embedbench.cli import main
from embedbench.errors import ConfigError
from embedbench.harness.timing import MICRO_SCOPE
from embedbench.omni.scenarios import CASE_LABELS
from embedbench.omni.validation import EXPECTED_LOOKUPS
from embedbench.report.gate import gate_lines, gate_results, gate_table

TOKENS = 1172
METRIC_ORDER = ["host_observed_us", "calling_thread_cpu_us", "synchronized_completion_us"]


def _row(case, interval, *, reduction=None, tokens=TOKENS, **extra):
    """A summary row in embedbench's format with the given interval of the reduction."""
    if reduction is None and interval is not None:
        reduction = (interval[0] + interval[1]) / 2
    measured = interval is not None
    return {
        "case": case,
        "label": CASE_LABELS[case],
        "tokens": tokens,
        "host_us": {"baseline": 600.0, "fixed": 500.0} if measured else None,
        "reduction_pct": reduction,
        "reduction_ci95_pct": None if interval is None else list(interval),
        "verdict": "no detectable difference" if measured else "invalid",
        "valid": measured,
        "blocks": 20 if measured else 0,
        **extra,
    }


def _write(directory, metadata, records, validation, summary):
    directory.mkdir()
    files = {
        "metadata.json": metadata,
        "micro-raw.json": records,
        "validation.json": validation,
        "summary.json": summary,
    }
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data))
    return directory


def _results_dir(tmp_path, rows, *, name="run", status="complete", cases=None, failed=()):
    """An embedbench-format results dir whose summary is ``rows`` (no raw records)."""
    cases = cases if cases is not None else list(dict.fromkeys(r["case"] for r in rows))
    lengths = sorted({r["tokens"] for r in rows}) or [TOKENS]
    metadata = {
        "schema_version": 1,
        "status": status,
        "warmup": 50,
        "blocks": 20,
        "iterations": 20,
        "lengths": lengths,
        "cases": cases,
        "cpu_core": 0,
        "metric_order": METRIC_ORDER,
        "target": "reference",
        "device": "cpu",
    }
    validation = [
        {
            "case": case,
            "tokens": tokens,
            "calls": EXPECTED_LOOKUPS[case],
            "ok": case not in failed,
            **({"mismatch": {"outputs": "max abs diff 0.5"}} if case in failed else {}),
        }
        for tokens in lengths
        for case in cases
    ]
    return _write(tmp_path / name, metadata, [], validation, rows)


def _gate(capsys, directory, *args):
    code = main(["gate", str(directory), *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def test_a_faster_case_passes_with_one_summary_line(tmp_path, capsys):
    run = _results_dir(tmp_path, [_row("audio", (44.0, 48.0)), _row("text", (-2.8, 2.2))])
    code, out, err = _gate(capsys, run)
    assert code == 0 and err == []
    assert out == ["gate: pass, 2 cases, none slower beyond 0.00 %"]


def test_a_case_slower_beyond_the_allowance_fails_with_one_line_naming_it(tmp_path, capsys):
    rows = [_row("text", (-1.0, 1.5)), _row("audio", (-4.1, -1.2)), _row("video", (40.0, 45.0))]
    run = _results_dir(tmp_path, rows)
    code, out, err = _gate(capsys, run)
    assert code == 1 and err == []
    assert out == [
        "gate: FAIL Audio @ 1172 tokens: 95 % interval [-4.10 %, -1.20 %] lies below "
        "-0.00 % (slower)"
    ]
    # The same interval beyond a 1 % allowance still fails, and says which allowance.
    code, out, _ = _gate(capsys, run, "--max-slowdown", "1")
    assert code == 1 and len(out) == 1 and "lies below -1.00 %" in out[0]


def test_a_slower_case_inside_the_allowance_passes(tmp_path, capsys):
    run = _results_dir(tmp_path, [_row("image", (-3.0, -1.0)), _row("audio", (40.0, 45.0))])
    code, out, _ = _gate(capsys, run, "--max-slowdown", "5")
    assert code == 0
    assert out == ["gate: pass, 2 cases, none slower beyond 5.00 %"]
    outcome = gate_results(load_results(run), 5)
    image = next(r for r in outcome.rows if r.case == "image")
    assert image.passed and "within the allowance" in image.reason
    # The boundary counts as inside: high == -PCT is not below it.
    assert gate_results(load_results(run), 1).passed
    assert not gate_results(load_results(run), 0.99).passed


def test_an_interval_straddling_zero_passes(tmp_path, capsys):
    run = _results_dir(tmp_path, [_row("mixed", (-6.0, 0.5))])
    code, out, _ = _gate(capsys, run)
    assert code == 0 and out == ["gate: pass, 1 case, none slower beyond 0.00 %"]
    (row,) = gate_results(load_results(run)).rows
    assert row.passed and row.interval == (-6.0, 0.5) and "includes 0" in row.reason


def test_uncertified_cases_fail_each_with_its_own_reason(tmp_path, capsys):
    rows = [
        _row("audio", (40.0, 45.0)),
        _row("image", None),  # failed validation
        _row("video", None, error="crashed while timing: RuntimeError: boom"),
        _row("mixed", (10.0, 12.0), valid=False, verdict="invalid"),
    ]
    # interleaved was requested but never measured (an interrupted run).
    cases = ["audio", "image", "video", "mixed", "interleaved"]
    run = _results_dir(tmp_path, rows, status="interrupted", cases=cases, failed={"image"})
    code, out, err = _gate(capsys, run, "--max-slowdown", "100")
    assert code == 1 and err == []
    assert out == [
        "gate: FAIL Image @ 1172 tokens: failed validation (outputs); cannot be certified",
        "gate: FAIL Video @ 1172 tokens: crashed while timing: RuntimeError: boom; "
        "cannot be certified",
        "gate: FAIL Audio + image + video @ 1172 tokens: invalid (valid: false, "
        "verdict: invalid); cannot be certified",
        "gate: FAIL Interleaved audio/video @ 1172 tokens: not measured (run interrupted); "
        "cannot be certified",
    ]


def test_a_valid_row_without_a_finite_interval_fails(tmp_path):
    row = {**_row("audio", (40.0, 45.0)), "reduction_ci95_pct": None}
    outcome = gate_results(load_results(_results_dir(tmp_path, [row])))
    assert not outcome.passed
    assert outcome.rows[0].reason == "no 95 % interval; cannot be certified"
    # json reads NaN; a NaN end would compare False and slip through without the check.
    row = {**_row("audio", (40.0, 45.0)), "reduction_ci95_pct": [float("nan"), -5.0]}
    outcome = gate_results(load_results(_results_dir(tmp_path, [row], name="nan")))
    assert not outcome.passed and "is not finite; cannot be certified" in outcome.rows[0].reason


def test_a_dir_with_no_cases_fails(tmp_path, capsys):
    run = _results_dir(tmp_path, [], cases=[], status="interrupted")
    code, out, _ = _gate(capsys, run)
    assert code == 1 and out == ["gate: FAIL no cases in the results; nothing to certify"]


def test_several_lengths_each_gated_and_named(tmp_path, capsys):
    rows = [_row("audio", (40.0, 45.0), tokens=512), _row("audio", (-9.0, -7.0), tokens=4096)]
    run = _results_dir(tmp_path, rows)
    code, out, _ = _gate(capsys, run)
    assert code == 1 and len(out) == 1 and out[0].startswith("gate: FAIL Audio @ 4096 tokens:")


def _truncated(run):
    text = (run / "summary.json").read_text()
    (run / "summary.json").write_text(text[: len(text) // 2])
    return run


def _bad_field(run):
    rows = json.loads((run / "summary.json").read_text())
    rows[0]["reduction_ci95_pct"] = ["-4%", 1]
    (run / "summary.json").write_text(json.dumps(rows))
    return run


def _no_raw(run):
    (run / "micro-raw.json").unlink()
    return run


# (what to gate, given a good results dir; extra arguments; fragment of the one line)
BAD_INPUT = {
    "missing-dir": (lambda run: run.parent / "missing", [], "does not exist"),
    "negative": (None, ["--max-slowdown", "-1"], "--max-slowdown must be >= 0, got -1"),
    "not-a-number": (None, ["--max-slowdown", "abc"], "--max-slowdown must be a number"),
    "infinite": (None, ["--max-slowdown", "1e400"], "--max-slowdown must be a finite number"),
    "truncated": (_truncated, [], "summary.json is not valid JSON"),
    "bad-field": (_bad_field, [], "summary.json[0].reduction_ci95_pct"),
    "missing-file": (_no_raw, [], "has no micro-raw.json"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_exits_2_with_one_stderr_line(tmp_path, capsys, case):
    damage, args, fragment = BAD_INPUT[case]
    run = _results_dir(tmp_path, [_row("audio", (40.0, 45.0))])
    target = run if damage is None else damage(run)
    code, out, err = _gate(capsys, target, *args)
    assert code == 2 and out == []
    assert len(err) == 1 and err[0].startswith("embedbench: error: ") and fragment in err[0]


def test_the_allowance_is_checked_in_the_api_too(tmp_path):
    result = load_results(_results_dir(tmp_path, [_row("audio", (40.0, 45.0))]))
    assert gate_results(result, "2.5").max_slowdown_pct == 2.5  # papermill strings
    for bad in (-1, float("nan"), float("inf"), "abc", True):
        with pytest.raises(ConfigError):
            gate_results(result, bad)


def test_gate_table_one_row_per_run_and_case(tmp_path):
    a = load_results(_results_dir(tmp_path, [_row("audio", (40.0, 45.0))], name="a"))
    b = load_results(_results_dir(tmp_path, [_row("audio", (-4.0, -2.0))], name="b"))
    table = gate_table({"a": gate_results(a), "b": gate_results(b)})
    assert list(table["Run"]) == ["a", "b"] and list(table["Gate"]) == ["pass", "FAIL"]
    assert list(table["Interval"]) == ["[40.00 %, 45.00 %]", "[-4.00 %, -2.00 %]"]
    assert list(table["Level"]) == ["95%", "95%"]
    assert gate_lines(gate_results(b))[0].startswith("gate: FAIL Audio @ 1172 tokens")


# --- the original PR script's format: no intervals, recomputed from the raw records ---

BLOCKS, ITERATIONS = 8, 5


def _original_records(case, baseline_us, fixed_us, rng):
    """Raw blocks of one case in the original's record shape (run order, no position)."""
    records = []
    clock = 1789300000.0
    for block in range(BLOCKS):
        order = ("baseline", "fixed") if block % 2 == 0 else ("fixed", "baseline")
        for variant in order:
            centre = baseline_us if variant == "baseline" else fixed_us
            samples = []
            for _ in range(ITERATIONS):
                host = centre * rng.uniform(0.99, 1.01)
                samples.append([host, host * 0.95, host * 1.02])
            records.append(
                {
                    "device": "cuda",
                    "case": case,
                    "tokens": TOKENS,
                    "scope": MICRO_SCOPE,
                    "variant": variant,
                    "block": block,
                    "iterations": ITERATIONS,
                    "samples_us": samples,
                    "wall_start": clock,
                    "wall_end": clock + 0.01,
                    "cpu_mhz_start": None,
                    "cpu_mhz_end": None,
                }
            )
            clock += 0.01
    return records


def _original_dir(tmp_path, timings):
    """A results dir in the original script's format: ``timings`` case -> (before, after)."""
    rng = random.Random(7451)
    records = [r for case, t in timings.items() for r in _original_records(case, *t, rng)]
    design = {"warmup": 50, "blocks": BLOCKS, "iterations": ITERATIONS, "lengths": [TOKENS]}
    metadata = original_metadata(design, METRIC_ORDER)
    validation = [
        {
            "case": case,
            "tokens": TOKENS,
            "device": "cuda",
            "calls": EXPECTED_LOOKUPS[case],
            "same_input_wrapper_torch_equal": True,
        }
        for case in timings
    ]
    summary = [
        {
            "tokens": TOKENS,
            "case": case,
            "host_us": {"baseline": before, "fixed": after},
            "reduction_pct": 100 * (before - after) / before,
        }
        for case, (before, after) in timings.items()
    ]
    return _write(tmp_path / "original", metadata, records, validation, summary)


def test_an_original_format_dir_is_gated_on_recomputed_intervals(tmp_path, capsys):
    # audio clearly faster (about 45 %), video clearly slower (about 10 %).
    original = _original_dir(tmp_path, {"audio": (600.0, 330.0), "video": (300.0, 330.0)})
    assert "reduction_ci95_pct" not in json.loads((original / "summary.json").read_text())[0]
    outcome = gate_results(load_results(original))
    audio, video = outcome.rows
    assert audio.passed and audio.interval[0] > 40
    assert not video.passed and video.interval[1] < -5
    code, out, err = _gate(capsys, original)
    assert code == 1 and err == []
    assert len(out) == 1 and out[0].startswith("gate: FAIL Video @ 1172 tokens: 95 % interval [")
    assert out[0].endswith("lies below -0.00 % (slower)")
    # A 20 % allowance lets the 10 % slowdown through.
    code, out, _ = _gate(capsys, original, "--max-slowdown", "20")
    assert code == 0 and out == ["gate: pass, 2 cases, none slower beyond 20.00 %"]


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "embedbench", "gate", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.e2e  # seconds: see TIERS in conftest.py
def test_gate_through_a_subprocess(tmp_path):
    run = _results_dir(tmp_path, [_row("audio", (40.0, 45.0)), _row("video", (-3.0, -2.0))])
    failed = _cli(str(run))
    assert failed.returncode == 1 and failed.stderr == ""
    assert failed.stdout.splitlines() == [
        "gate: FAIL Video @ 1172 tokens: 95 % interval [-3.00 %, -2.00 %] lies below "
        "-0.00 % (slower)"
    ]
    bad = _cli(str(run), "--max-slowdown", "-1")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == ["embedbench: error: --max-slowdown must be >= 0, got -1"]
    assert "Traceback" not in bad.stderr
