"""The parts of benchmarks/gpu_check.sh that need no run: the core it pins, and what its
report says about the run (the script's own runs: test_gpu_check_runs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import _common
import gpu_check_report as gcr


@pytest.mark.parametrize(
    ("shares", "allowed", "expected"),
    [
        # An idle 16-core box: every core ties, and the PR's core 2 is allowed.
        ({c: 0.0 for c in range(16)}, range(16), 2),
        # Ties within a clock tick or two count as ties (2 % is one tick at HZ 100).
        ({0: 0.0, 1: 0.02, 2: 0.04, 3: 0.0}, range(4), 2),
        # Core 2 not allowed: the lowest tied core but 0.
        ({0: 0.0, 1: 0.0, 3: 0.0}, [0, 1, 3], 1),
        ({0: 0.0, 4: 0.01, 7: 0.0}, [0, 4, 7], 4),
        # Core 2 clearly busier than another: the least busy wins, not the PR's core.
        ({0: 0.0, 1: 0.3, 2: 0.5, 3: 0.0}, range(4), 3),
        # Core 0 clearly the least busy: it is taken (only a tie goes away from it).
        ({0: 0.0, 1: 0.4, 2: 0.6}, range(3), 0),
        # Unknown counts as busy; nothing known at all: all tie.
        ({0: 0.0, 1: None, 2: None, 3: 0.01}, range(4), 3),
        ({}, [0, 1, 5], 1),
        # A two-core VM: core 1, not 0, when both are idle.
        ({0: 0.0, 1: 0.0}, [0, 1], 1),
        ({0: 0.0}, [0], 0),
    ],
)
def test_the_least_busy_core_breaks_ties_to_core_2_then_away_from_core_0(
    shares: dict[int, float | None], allowed: list[int], expected: int
) -> None:
    assert _common.least_busy_core(shares, allowed) == expected


def test_the_least_busy_core_defaults_to_this_process_affinity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_common.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert _common.least_busy_core({0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}) == 2
    monkeypatch.setattr(_common.os, "sched_getaffinity", lambda pid: {0, 5})
    assert _common.least_busy_core({0: 0.0, 5: 0.0}) == 5


# --------------------------------------------------------------------------- the report


def _record(case: str, tokens: int, variant: str, block: int, mhz: tuple[float | None, ...]):
    """A timed block record with NVML's SM clock at its start and end (a fake trace)."""
    return {
        "case": case,
        "tokens": tokens,
        "scope": "whole_wrapper",
        "variant": variant,
        "block": block,
        "samples_us": [[100.0, 90.0, 101.0]],
        "gpu_mhz_start": mhz[0],
        "gpu_mhz_end": mhz[1],
    }


def _validation(case: str, tokens: int, syncs: tuple[int | None, int | None]):
    return {
        "case": case,
        "tokens": tokens,
        "ok": True,
        "device_syncs": {"baseline": syncs[0], "fixed": syncs[1]},
        "device_syncs_label": "syncs torch reports (a lower bound)",
    }


def _gpu_metadata(max_mhz: int | None = 1980) -> dict:
    nvml = {"source": "nvml", "sm_clock_max_mhz": max_mhz} if max_mhz else {"source": "unavailable"}
    return {"provenance": {"device": {"nvml": nvml}}, "metric_order": ["host_observed_us"]}


# Audio held 1980 MHz; image dipped to 1500 (76 % of 1980) in one block's end; video
# stayed at 1590 (80.3 %): only image is flagged. The timer floor's idle 345 MHz is not
# a case's timed block and counts for nothing.
TRACE = [
    _record("audio", 1172, "baseline", 0, (1980, 1980)),
    _record("audio", 1172, "fixed", 0, (1980, 1965)),
    _record("image", 1172, "baseline", 0, (1980, 1500)),
    _record("image", 1172, "fixed", 1, (1950, None)),  # one unreadable edge: skipped
    _record("video", 1172, "baseline", 0, (1590, 1600)),
    {**_record("timer", 0, "timer_floor", 0, (345, 345)), "scope": "overhead"},
]
VALIDATION = [
    _validation("audio", 1172, (2, 1)),
    _validation("image", 1172, (2, 1)),
    _validation("video", 1172, (2, 1)),
]


def test_a_case_whose_clock_fell_below_80_percent_of_the_maximum_is_flagged() -> None:
    rows = {r["case"]: r for r in gcr.case_rows(_gpu_metadata(), TRACE, VALIDATION)}
    assert (rows["audio"]["clock_min_mhz"], rows["audio"]["clock_max_mhz"]) == (1965, 1980)
    assert (rows["image"]["clock_min_mhz"], rows["image"]["clock_max_mhz"]) == (1500, 1980)
    assert (rows["video"]["clock_min_mhz"], rows["video"]["clock_max_mhz"]) == (1590, 1600)
    assert [c for c, r in rows.items() if r["clock_flagged"]] == ["image"]


def test_without_nvml_s_maximum_the_run_s_highest_reading_is_the_yardstick() -> None:
    maximum, source = gcr.clock_maximum(_gpu_metadata(None), TRACE)
    assert maximum == 1980 and "highest SM clock read in this run" in source
    # Lower every reading: 1600 becomes the maximum, and video (1590) is no longer low.
    scaled = [{**r, "gpu_mhz_start": 1600, "gpu_mhz_end": 1600} for r in TRACE[:4]]
    scaled += TRACE[4:5]
    rows = {r["case"]: r for r in gcr.case_rows(_gpu_metadata(None), scaled, VALIDATION)}
    assert not any(r["clock_flagged"] for r in rows.values())


def test_the_case_table_labels_the_syncs_and_says_what_a_low_clock_does() -> None:
    lines = gcr.case_table(_gpu_metadata(), TRACE, VALIDATION)
    header = lines[0]
    assert "| syncs torch reports (a lower bound) (baseline / fixed) |" in header
    assert "| below 80% of the maximum |" in header
    assert "| Image | 1172 | 1500–1980 | **yes: clock-dependent saving** | 2 / 1 |" in lines
    assert "| Audio | 1172 | 1965–1980 | no | 2 / 1 |" in lines
    text = "\n".join(lines)
    assert "the maximum is 1980 MHz, the GPU's maximum SM clock (NVML); flagged: image@1172" in text
    assert "waits for two lookups' kernels" in text and "larger saving" in text


def test_off_cuda_the_table_says_n_a_and_adds_no_clock_note() -> None:
    cpu_trace = [{**r, "gpu_mhz_start": None, "gpu_mhz_end": None} for r in TRACE]
    cpu_rows = [_validation(c, 1172, (None, None)) for c in ("audio", "image")]
    lines = gcr.case_table(_gpu_metadata(None), cpu_trace, cpu_rows)
    assert "| Audio | 1172 | n/a | n/a | n/a (not CUDA) |" in lines
    assert lines[-1] == "SM clock: no SM clock was read (not CUDA, or NVML unavailable)."


def test_the_report_renders_a_run_directory_and_refuses_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    meta = {**_gpu_metadata(), "device_name": "NVIDIA H200", "status": "complete"}
    meta["schema_check"] = "skipped: jsonschema is not installed here"
    for name, data in (
        ("metadata.json", meta),
        ("micro-raw.json", TRACE),
        ("validation.json", VALIDATION),
    ):
        (tmp_path / name).write_text(json.dumps(data))
    text = gcr.render(tmp_path)
    assert "- schema check: skipped: jsonschema is not installed here" in text.splitlines()
    assert "| host_observed_us | 100.000 | 100.000 | 100.000 |" in text  # the timer floor
    assert "#### The PR's table (NVIDIA H100 80GB, 1172 tokens, real checkpoint)" in text
    assert gcr.main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.strip() == (
        "gpu_check_report: pass one run directory (with metadata.json)"
    )
