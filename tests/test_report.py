"""Report tables, figures and the HTML export on a real quick run."""

import copy
import re
from datetime import datetime, timezone

import pytest
from matplotlib.figure import Figure

from embedbench import ConfigError, load_results
from embedbench.config import RunConfig
from embedbench.omni.scenarios import CASE_LABELS, CASES
from embedbench.report import compare, figuredata, interactive, static, tables
from embedbench.report.banner import banner_html
from embedbench.report.html import render_html, write_html


@pytest.fixture()
def result(small_run_dir):
    return load_results(small_run_dir)


def test_pr_table_has_the_prs_columns_and_one_row_per_case(result):
    table = tables.pr_table(result)
    assert list(table.columns) == ["Input", "Before (μs)", "After (μs)", "Host latency reduction"]
    assert list(table["Input"]) == [CASE_LABELS[c] for c in CASES]
    assert all(re.fullmatch(r"\d+\.\d\d", v) for v in table["Before (μs)"])
    assert all(re.fullmatch(r"-?\d+\.\d\d%", v) for v in table["Host latency reduction"])


def test_pr_markdown_is_exactly_the_prs_layout(result):
    lines = tables.to_pr_markdown(tables.pr_table(result)).splitlines()
    assert lines[0] == "| Input | Before (μs) | After (μs) | Host latency reduction |"
    assert lines[1] == "| --- | ---: | ---: | ---: |"
    assert re.fullmatch(r"\| Text \| \d+\.\d\d \| \d+\.\d\d \| -?\d+\.\d\d% \|", lines[2])
    assert len(lines) == 2 + len(CASES)


def test_several_lengths_are_labelled_with_tokens(result):
    doubled = copy.deepcopy(result)
    doubled.summary += [{**row, "tokens": 512} for row in result.summary]
    labels = list(tables.pr_table(doubled)["Input"])
    assert labels[0] == "Text (300 tokens)" and labels[-1] == "Interleaved audio/video (512 tokens)"


def test_statistics_and_detail_tables(result):
    stats_table = tables.statistics_table(result)
    assert list(stats_table["Blocks"]) == [6] * len(CASES)
    assert set(stats_table["Verdict"]) <= {"faster", "slower", "no detectable difference"}
    blocks = figuredata.blocks_frame(result)
    assert len(blocks) == len(CASES) * 6 * 2
    assert set(blocks["variant"]) == {"baseline", "fixed"}
    calls = figuredata.case_calls(figuredata.call_table(result), "interleaved")
    assert len(calls) == 6 * 3 * 2
    assert figuredata.detail_case(result) == "interleaved"
    floor = tables.timer_floor_table(result)
    assert list(floor["metric"]) == [
        "host_observed_us",
        "calling_thread_cpu_us",
        "synchronized_completion_us",
    ]
    assert (floor["calls"] >= 1000).all()
    assert floor["p5"].le(floor["median"]).all() and floor["median"].le(floor["p95"]).all()


def test_validation_table_and_banner(result):
    table = tables.validation_table(result)
    assert table["OK"].all()
    assert table.loc[table["Input"] == "Audio", "Baseline lookups"].item() == "2 (expected 2)"
    quiet = copy.deepcopy(result)
    quiet.metadata["busy_core"] = None  # the fixture may run on a busy machine
    quiet.metadata["busy_io"] = None  # or one still writing back
    quiet.metadata.pop("host_stability")  # or one whose canary is noisy
    assert "All validations passed" in banner_html(quiet)
    broken = copy.deepcopy(result)
    broken.validation[1] = {**broken.validation[1], "ok": False, "mismatch": {"lookups": 3}}
    banner = banner_html(broken)
    assert "validation failed" in banner and "#d1242f" in banner and "Audio" in banner
    interrupted = copy.deepcopy(result)
    interrupted.metadata["status"] = "interrupted"
    assert "interrupted" in banner_html(interrupted)


def test_provenance_and_config_tables(result):
    prov = tables.provenance_table(result)
    assert prov.loc["status", "value"] == "complete"
    assert prov.loc["synthetic checkpoint", "value"] == "True"
    assert "warmup 2, 6 blocks" in prov.loc["design", "value"]
    assert prov.loc["lm shim", "value"] == "flat"
    assert "FlatLanguageModel.embed_input_ids" in prov.loc["language model", "value"]
    env = tables.environment_table()
    assert "torch" in env.index


def _axes_with_data(fig: Figure) -> int:
    return sum(1 for ax in fig.axes if ax.has_data())


def test_figures_have_data(result):
    assert _axes_with_data(static.block_distributions(result)) == len(CASES)
    assert _axes_with_data(static.paired_blocks(result)) >= len(CASES)  # + twins for drift
    assert _axes_with_data(static.call_distribution(result)) == 1
    assert _axes_with_data(static.reduction_forest(result)) == 1


def test_frequency_trace_says_when_frequency_is_not_observable(result):
    unavailable = copy.deepcopy(result)
    for record in unavailable.records:
        record["cpu_mhz_start"] = record["cpu_mhz_end"] = None
    assert static.frequency_trace(unavailable) is None  # a line, not an empty figure
    assert "not observable" in static.frequency_note(unavailable)

    constant = copy.deepcopy(result)
    for record in constant.records:
        record["cpu_mhz_start"] = record["cpu_mhz_end"] = 2596.0
    assert static.frequency_trace(constant) is None
    assert "constant 2596 MHz" in static.frequency_note(constant)

    varying = copy.deepcopy(result)
    for i, record in enumerate(varying.records):
        record["cpu_mhz_start"], record["cpu_mhz_end"] = 3000.0 - i, 2990.0 - i
    fig = static.frequency_trace(varying)
    assert _axes_with_data(fig) == 1
    assert "source:" in fig.axes[0].get_title()
    assert static.frequency_note(varying) is None


def test_compare_table_and_plot_with_the_reference(result, small_run_dir):
    reference = compare.reference_results()
    assert reference["rows"][1]["reduction_pct"] == 18.23
    runs = compare.load_runs([str(small_run_dir)], include_reference=True)
    table = compare.compare_table(runs, reference)
    assert table.loc["Audio", "PR: before (μs)"] == "104.32"
    name = "Qwen2.5-Omni · CPU · reference · synthetic"  # one run: its label is unique
    assert table.loc["Audio", "A: before (μs)"] == tables.pr_table(result)["Before (μs)"][1]
    assert compare.runs_table(runs, reference)["key"].to_dict() == {
        name: "A",
        "PR #7477 (NVIDIA H100 80GB)": "PR",
    }
    assert _axes_with_data(static.compare_reductions(runs, reference)) == 1
    assert list(compare.runs_table(runs).index) == [name]
    assert compare.runs_table(runs).loc[name, "directory"] == str(small_run_dir)
    with pytest.raises(ConfigError, match="at least 2"):
        compare.load_runs([str(small_run_dir)], include_reference=False)


def test_html_export_is_self_contained(result, tmp_path):
    page = render_html(result)
    # forest, paired blocks, box and dots, per call, the canary, work against time and the
    # operators (the run has work.json); the MHz trace when observable
    observable = static.frequency_trace(result) is not None
    assert static.canary_trace(result) is not None  # every run of this code has its canary
    assert result.work  # every run of this code counts its work
    figures = 7 + observable
    assert page.count('src="data:image/png;base64,') == figures
    assert page.count("<img alt=") == figures and 'alt="figure"' not in page
    assert page.count('class="eb-spec"') == figures  # each figure's chart beside it
    assert "| Input | Before (μs) | After (μs) | Host latency reduction |" in page
    # Outside the inlined vega builds (SVG namespaces, the editor's address), no address
    # but the specs' schema identifier, which nothing fetches; nothing loads from anywhere.
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert set(re.findall(r"https?://[^\s\"'<>\\]+", markup)) == {interactive.SCHEMA}
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    out = write_html(result, tmp_path / "r.html")
    assert out.read_text(encoding="utf-8") == page


def test_statistics_table_carries_the_paired_statistics(result):
    table = tables.statistics_table(result)
    for column in ("Interval", "Level", "Method", "HL estimate (pooled)", "Wilcoxon p", "MDE"):
        assert column in table.columns
    # The quick run spreads 6 blocks over 3 workers: the t interval with 2 df, at 95 %.
    assert set(table["Method"]) == {"t over 3 worker processes (2 df)"}
    assert set(table["Level"]) == {"95%"}
    assert "A/A reduction" not in table.columns  # no A/A check in this run
    with_aa = copy.deepcopy(result)
    for row in with_aa.summary:
        row["aa"] = {"reduction_pct": 0.1, "reduction_ci95_pct": [-1.0, 1.2], "covers_zero": True}
    with_aa.summary[1]["aa"]["covers_zero"] = False
    table = tables.statistics_table(with_aa)
    assert set(table["A/A interval"]) == {"[-1.00%, 1.20%]"}
    assert list(table["A/A covers 0"]) == ["yes", "NO", "yes", "yes", "yes", "yes"]


def test_an_interval_below_95_percent_is_labelled_with_its_true_level(result):
    five = copy.deepcopy(result)
    row = five.summary[1]
    row.update(ci_level=0.9375, interval_method="Hodges–Lehmann, one process", interval_units=5)
    row["hl_confidence"] = 0.9375
    table = tables.statistics_table(five)
    assert table["Level"][1] == "93.75%"
    assert table["Method"][1] == "Hodges–Lehmann over 5 blocks, one process"
    assert table["HL interval (pooled)"][1].endswith("(93.75%)")


def test_diagnostics_table_and_notes(result):
    table = tables.diagnostics_table(result)
    assert list(table["Input"]) == [CASE_LABELS[c] for c in CASES]
    assert table["Within-block IQR/median"].str.startswith("baseline ").all()
    flagged = copy.deepcopy(result)
    flagged.summary[1]["notes"] = ["drift: Spearman rho 0.90 with d_b, 0.80 with baseline medians"]
    notes = tables.notes(flagged)
    assert "Audio: drift: Spearman rho 0.90 with d_b, 0.80 with baseline medians" in notes
    labels = tuple(f"{CASE_LABELS[c]}: " for c in CASES)
    assert all(note.startswith(labels) for note in notes)


def test_the_built_in_replica_shows_no_checkout_refs_or_vllm_versions(result):
    prov = tables.provenance_table(result)  # the quick run: target reference
    for field in ("baseline ref", "candidate ref", "work tree dirty"):
        assert prov.loc[field, "value"] == "n/a (built-in replica)"
    assert prov.loc["vllm / vllm-omni / transformers", "value"] == "not used (built-in replica)"
    assert "None" not in set(prov["value"])
    config = tables.config_table(RunConfig())
    for parameter in ("repo", "baseline_ref", "candidate_ref"):
        assert config.loc[parameter, "value"] == "n/a (built-in replica)"

    omni = copy.deepcopy(result)
    omni.metadata["target"] = "vllm-omni"
    omni.metadata.update(baseline_ref="v1", vllm="0.9", transformers="4.5")
    omni.metadata["refs"] = {"baseline_sha": "abc", "candidate_ref": "HEAD"}
    omni.metadata["versions"]["vllm-omni"] = "0.1"
    prov = tables.provenance_table(omni)
    assert prov.loc["baseline ref", "value"] == "v1 (abc)"
    assert prov.loc["candidate ref", "value"] == "HEAD"
    assert prov.loc["vllm / vllm-omni / transformers", "value"] == "0.9 / 0.1 / 4.5"
    config = tables.config_table(RunConfig(target="vllm-omni", repo="/src/vllm-omni"))
    assert config.loc["repo", "value"] == "/src/vllm-omni"
    assert config.loc["baseline_ref", "value"] == RunConfig().baseline_ref


def test_runs_table_shows_the_start_as_iso_utc(result, small_run_dir):
    runs = compare.load_runs([str(small_run_dir)], include_reference=True)
    started = compare.runs_table(runs).loc["Qwen2.5-Omni · CPU · reference · synthetic", "started"]
    expected = datetime.fromtimestamp(result.metadata["start_time"], tz=timezone.utc)
    assert started == expected.isoformat(timespec="seconds") and started.endswith("+00:00")


def test_timer_floor_is_shown_to_three_decimals(result):
    floor = tables.timer_floor_table(result)
    for column in ("p5", "median", "p95"):
        assert all(round(v, 3) == v for v in floor[column])
    shown = tables.styled(floor).to_html()
    assert not re.search(r">\d+\.\d{4,}<", shown) and re.search(r">\d+\.\d{3}<", shown)
