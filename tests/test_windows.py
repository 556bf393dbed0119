"""The timing window: recorded by every run, chosen by name, and never mixed silently
when runs are compared."""

import json
import shutil

import pytest
from helpers import QUICK

from embedbench import load_results
from embedbench.cli import main
from embedbench.config import RunConfig
from embedbench.errors import ConfigError
from embedbench.report.compare import (
    MixedWindowsError,
    compare_table,
    compared_windows,
    reference_results,
    runs_table,
)
from embedbench.report.compat import upgrade_metadata
from embedbench.report.static import compare_reductions
from embedbench.report.tables import timing_window


def test_a_default_run_records_the_pr_window(small_run_dir):
    meta = load_results(small_run_dir).metadata
    assert meta["timing_window"] == "pr" and meta["config"]["timing_window"] == "pr"
    assert "perf_counter, thread_time, call" in meta["timing_window_description"]


def test_the_tight_window_is_a_named_option_recorded_in_metadata(small_checkpoint, tmp_path):
    out = tmp_path / "tight"
    argv = ["run", "--model", str(small_checkpoint), *QUICK, "--output-dir", str(out)]
    assert main([*argv, "--timing-window", "tight", "--cases", "text", "--no-progress"]) == 0
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["timing_window"] == "tight"
    assert meta["timing_window_description"].startswith("tight window")


def test_an_unknown_window_is_refused():
    with pytest.raises(ConfigError, match="choose from pr, tight"):
        RunConfig(timing_window="legacy")  # read from old results, never measured


def _copy_without_window(run_dir, tmp_path):
    """A result directory as embedbench wrote it before the window was recorded."""
    old = tmp_path / "old-run"
    shutil.copytree(run_dir, old)
    meta = json.loads((old / "metadata.json").read_text())
    for key in ("timing_window", "timing_window_description"):
        meta.pop(key)
    meta["config"].pop("timing_window")
    meta["schema_version"] = 4  # the window is recorded in every directory of version 5 on
    (old / "metadata.json").write_text(json.dumps(meta))
    return old


def test_old_results_read_as_the_legacy_window_and_the_original_script_as_the_prs(
    small_run_dir, tmp_path
):
    old = load_results(_copy_without_window(small_run_dir, tmp_path))
    assert timing_window(old.metadata) == "legacy"
    assert upgrade_metadata({"end_time": 1.0})["timing_window"] == "pr"  # the PR script's


def test_runs_of_different_windows_are_refused_side_by_side(small_run_dir, tmp_path):
    runs = {"now": load_results(small_run_dir)}
    runs["before"] = load_results(_copy_without_window(small_run_dir, tmp_path))
    with pytest.raises(MixedWindowsError, match="now: pr, before: legacy") as refusal:
        compare_table(runs)
    assert "\n" not in str(refusal.value) and "allow_mixed_windows=True" in str(refusal.value)
    table = compare_table(runs, allow_mixed_windows=True)
    assert "A [pr window]: reduction" in table.columns  # now
    assert "B [legacy window]: reduction" in table.columns  # before
    assert list(runs_table(runs)["timing window"]) == ["pr", "legacy"]
    with pytest.raises(MixedWindowsError):
        compare_reductions(runs)
    figure = compare_reductions(runs, allow_mixed_windows=True)
    assert _legend_labels(figure) == ["now [pr window]", "before [legacy window]"]


def _legend_labels(figure) -> list[str]:
    """The series a figure's legend names: the figure's own legend, else its first axes'."""
    texts = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    return texts or figure.axes[0].get_legend_handles_labels()[1]


def test_the_prs_table_counts_as_the_pr_window(small_run_dir, tmp_path):
    reference = reference_results()
    runs = {"now": load_results(small_run_dir)}
    assert compared_windows(runs, reference) == {"now": "pr", "PR #7477 (NVIDIA H100 80GB)": "pr"}
    assert "A: reduction" in compare_table(runs, reference).columns  # one window: no labels
    runs = {"before": load_results(_copy_without_window(small_run_dir, tmp_path))}
    with pytest.raises(MixedWindowsError, match="PR #7477"):
        compare_table(runs, reference)
