"""The report's figures show the paired design: their structure, not their numbers.

Each test builds a run in memory (block records with a planted outlier, drift, order
effect, tail calls or CPU frequencies, and the summary rows the runner would write), so
what a figure must mark is known: which figures exist, their titles and labels, the
outlier markers, the count of clipped calls, the alt text in both paths.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.harness.timing import METRIC_ORDER, MICRO_SCOPE
from embedbench.report import compare, figuredata, interactive, sections, static, tables, views
from embedbench.report.html import render_html
from embedbench.report.results import RunResult
from embedbench.report.summary import summary_row

ROOT = Path(__file__).resolve().parents[1]
ITERATIONS = 20
FILLED = ("paired_points:first-baseline", "paired_points:first-fixed")  # the filled dots
SEGMENTS = tuple(f"trace_segments:{v}" for v in VARIANTS)  # a trace's segments, per variant


def _records(
    case: str,
    tokens: int,
    *,
    blocks: int,
    workers: int,
    outlier: int | None,
    drift: float,
    order_shift: float,
    reduction: float,
    tail: int,
    seed: int,
    t0: float,
    outlier_worker: int | None = None,
) -> list[dict]:
    """One case's block records: fixed is ``reduction`` faster, alternating run order;
    ``outlier_worker``'s blocks 15 pp less so, under a canary 50 % slower than the others'."""
    rng = np.random.default_rng(seed)
    records = []
    t = t0
    for block in range(blocks):
        first = VARIANTS[block % 2]
        base = 100.0 * (1.0 + drift * block)
        ratio = (1.0 - reduction) * (1.0 + rng.normal(0.0, 0.01))
        if first == "fixed":
            ratio *= 1.0 + order_shift
        if block == outlier:
            ratio = 1.15
        worker = block * workers // blocks
        if worker == outlier_worker:
            ratio += 0.15
        order = (first, VARIANTS[1 - VARIANTS.index(first)])
        for position, variant in enumerate(order):
            level = base if variant == "baseline" else base * ratio
            host = level * (1.0 + np.abs(rng.normal(0.0, 0.02, ITERATIONS)))
            if tail and block == blocks - 1:
                host[:tail] *= 30.0  # calls far above the 99th percentile
            samples = [[h, 0.9 * h, h] for h in host]
            records.append(
                {
                    "device": "cpu",
                    "case": case,
                    "tokens": tokens,
                    "scope": MICRO_SCOPE,
                    "variant": variant,
                    "block": block,
                    "position": position,
                    "iterations": ITERATIONS,
                    "samples_us": samples,
                    "wall_start": t,
                    "wall_end": t + 0.01,
                    "cpu_mhz_start": 2600.0,
                    "cpu_mhz_end": 2600.0,
                    "minor_faults": 0,
                    "worker": worker,
                }
            )
            if outlier_worker is not None:
                records[-1]["canary_us_end"] = 1500.0 if worker == outlier_worker else 1000.0
            t += 0.02
    return records


def make_result(
    *,
    cases: tuple[str, ...] = ("audio", "interleaved"),
    tokens: int = 1172,
    blocks: int = 12,
    workers: int = 3,
    outlier: int | None = None,
    drift: float = 0.0,
    order_shift: float = 0.0,
    reduction: float = 0.2,
    tail: int = 0,
    device: str = "cpu",
    directory: str = "synthetic-run",
    seed: int = 7,
    outlier_worker: int | None = None,
) -> RunResult:
    """A complete run of ``cases`` in memory, summarized as the runner summarizes."""
    records, summary = [], []
    for i, case in enumerate(cases):
        case_records = _records(
            case,
            tokens,
            blocks=blocks,
            workers=workers,
            outlier=outlier,
            drift=drift,
            order_shift=order_shift,
            reduction=reduction,
            tail=tail,
            seed=seed + i,
            t0=1000.0 + 100.0 * i,
            outlier_worker=outlier_worker,
        )
        records += case_records
        summary.append(summary_row(case, tokens, case_records, seed=None))
    metadata = {
        "schema_version": 3,
        "status": "complete",
        "device": device,
        "device_name": "NVIDIA H100 80GB HBM3" if device == "cuda" else "Test CPU",
        "target": "reference",
        "synthetic": True,
        "cpu_core": 0,
        "cpu_frequency_source": "/proc/cpuinfo",
        "lengths": [tokens],
        "cases": list(cases),
        "blocks": blocks,
        "iterations": ITERATIONS,
        "warmup": 2,
        "processes": workers,
        "timing_window": "pr",
        "embedding_shape": [152064, 3584],
        "dtype": "bfloat16",
        "lm_shim": "flat",
        "metric_order": list(METRIC_ORDER),
        "start_time": 1796000000.0,
    }
    return RunResult(Path(directory), metadata, records, [], summary)


def _texts(fig: Figure) -> list[str]:
    """Every text of a figure: titles, labels, tick labels, annotations, legends."""
    found = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return [t for t in found if t]


def _titles(fig: Figure) -> list[str]:
    return [ax.get_title() for ax in fig.axes if ax.get_title()]


def _by_gid(fig: Figure, gid: str) -> list:
    return fig.findobj(lambda a: a.get_gid() == gid)


# --- which figures, and alt text in both paths ------------------------------------------


def test_every_figure_is_a_figure_with_alt_text():
    result = make_result(outlier=4)
    items = [item for section in sections.REPORT_SECTIONS for item in section.render(result)]
    shown = [i for i in items if isinstance(i, Figure | views.View)]
    assert all(isinstance(i, views.View) for i in shown)  # every figure is interactive too
    figures = [i.figure for i in shown]
    heads = [(f.get_suptitle() or f.axes[0].get_title()).splitlines()[0] for f in figures]
    assert heads == [
        "Reduction per case with the 95% interval the verdict uses",
        "Paired blocks over time: each dot is one block's baseline/fixed pair",
        "Per-block medians: each line joins one block's baseline and fixed halves "
        "(black: outlier block)",
        "Per-call host latency: Interleaved audio/video",
    ]
    assert all(isinstance(f, static.ReportFigure) and len(f.alt_text) > 40 for f in figures)
    bundle, metadata = figures[0]._repr_mimebundle_()
    assert set(bundle) == {"image/png", "text/html", "text/plain"}
    assert metadata["image/png"]["alt"] == figures[0].alt_text
    assert bundle["text/html"].startswith('<img alt="Forest plot of the host latency reduction')
    # A view's bundle: the chart and the same figure's PNG with its alt text, no HTML (which
    # JupyterLab would prefer to the chart).
    bundle, metadata = shown[0]._repr_mimebundle_()
    assert set(bundle) == {interactive.MIME, "image/png", "text/plain"}
    assert metadata["image/png"]["alt"] == figures[0].alt_text
    assert bundle["image/png"] == figures[0]._repr_mimebundle_()[0]["image/png"]
    assert bundle[interactive.MIME]["description"] == figures[0].alt_text


def test_the_html_page_gives_every_image_its_alt_text():
    page = render_html(make_result(outlier=4))
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # not the inlined JS's
    images = re.findall(r"<img [^>]*>", markup)
    assert len(images) == 4  # forest, paired blocks, box and dots, per call (no MHz trace)
    alts = [re.search(r'alt="([^"]*)"', image).group(1) for image in images]
    assert all(len(alt) > 40 and alt != "figure" for alt in alts)
    assert "outlier blocks 4" in alts[1]
    assert '<p class="note">CPU frequency not observable on this machine' in page


def test_the_notebooks_and_the_html_page_show_the_same_sections():
    result = make_result()
    page = re.sub(r"<script>.*?</script>", "", render_html(result), flags=re.S)
    titles = [s.title for s in sections.REPORT_SECTIONS if s.title]
    assert re.findall(r"<h2>(.*?)</h2>", page) == [t.replace("'", "&#x27;") for t in titles]
    calls = [f"show(sections.{s.name}(result))" for s in sections.REPORT_SECTIONS]
    for name in ("run.ipynb", "report.ipynb"):
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        shown = [c.source for c in nb.cells if c.source.startswith("show(sections.")]
        assert shown == calls, name
        headings = [c.source.splitlines()[0] for c in nb.cells if c.source.startswith("### ")]
        assert headings == [f"### {t}" for t in titles], name


# --- the paired view --------------------------------------------------------------------


def test_the_paired_view_has_one_panel_per_case_in_time_order():
    fig = static.paired_blocks(make_result())
    assert [ax.get_title() for ax in fig.axes] == [CASE_LABELS["audio"], CASE_LABELS["interleaved"]]
    assert fig.get_supylabel() == "block's reduction (%) = 100 × (1 − fixed / baseline)"
    assert all(ax.get_xlabel() == "block (time order)" for ax in fig.axes)
    dots = [c for c in fig.axes[0].collections if c.get_gid() in FILLED]
    x = sorted(int(v) for c in dots for v in c.get_offsets()[:, 0])
    assert x == list(range(12))  # every block, once, at its index
    assert len(_by_gid(fig, "worker_reductions")) == 2 * 3  # each worker's own, per case
    assert not _by_gid(fig, "outlier_rings") and not _by_gid(fig, "trend")
    labels = fig.legends[0].get_texts()
    assert {t.get_text() for t in labels} >= {"baseline ran first", "fixed ran first"}


def test_the_paired_view_rings_the_outlier_blocks_the_diagnostics_flag():
    result = make_result(outlier=5)
    assert result.summary[0]["diagnostics"]["outliers"]["flagged"] == [5]
    fig = static.paired_blocks(result)
    rings = _by_gid(fig, "outlier_rings")
    assert len(rings) == 2  # one per case
    assert all(isinstance(r, PathCollection) for r in rings)
    assert [list(r.get_offsets()[:, 0]) for r in rings] == [[5.0], [5.0]]
    assert "outlier blocks 5" in fig.alt_text
    assert "outlier block (diagnostics)" in _texts(fig)


def test_the_paired_view_hollows_an_outlier_workers_blocks_and_names_its_reason():
    result = make_result(workers=5, blocks=30, outlier_worker=2)
    reason = "its canary 50 % above the others'"
    fig = static.paired_blocks(result)
    for ax in fig.axes:
        hollow = [c for c in ax.collections if (c.get_gid() or "").endswith("-outlier-worker")]
        x = sorted(int(v) for c in hollow for v in c.get_offsets()[:, 0])
        assert x == list(range(12, 18))  # worker 2's blocks, and only those
        assert all((c.get_facecolors()[:, 3] == 0).all() for c in hollow)  # hollow
        filled = [c for c in ax.collections if c.get_gid() in FILLED]
        assert all((c.get_facecolors()[:, 3] == 1).all() for c in filled)
        assert sorted(int(v) for c in filled for v in c.get_offsets()[:, 0]) == [
            b for b in range(30) if not 12 <= b < 18
        ]
        [band] = [p for p in ax.patches if p.get_gid() == "worker_spans:outlier-worker"]
        assert band.get_x() == pytest.approx(11.5) and band.get_width() == pytest.approx(6)
        assert f"outlier worker w2: {reason}" in ax.get_title()
        assert "w2 outlier" in [t.get_text() for t in ax.texts]
    assert "an outlier worker's blocks (hollow, amber; why: in the title)" in _texts(fig)
    assert f"outlier worker 2 (hollow points: {reason})" in fig.alt_text
    clean = static.paired_blocks(make_result())
    assert not _by_gid(clean, "worker_spans:outlier-worker")
    assert not [c for c in clean.findobj() if (c.get_gid() or "").endswith("-outlier-worker")]
    assert "outlier worker" not in clean.alt_text + " ".join(_texts(clean))


def test_the_paired_view_draws_drift_and_an_order_effect_where_detected():
    drifting = make_result(drift=0.05, cases=("audio",))
    drift = drifting.summary[0]["diagnostics"]["drift"]
    assert drift["detected"] and drift["p_baseline"] < 0.05
    fig = static.paired_blocks(drifting)
    assert _by_gid(fig, "baseline_drift")
    assert "drift: baseline μs rises" in fig.axes[0].get_title()

    ordered = make_result(order_shift=0.1, cases=("audio",))
    assert ordered.summary[0]["diagnostics"]["order_effect"]["detected"]
    fig = static.paired_blocks(ordered)
    order = fig.findobj(lambda a: (a.get_gid() or "").startswith("order_effect:"))
    assert len(order) == 2  # one median line per run order
    assert "order effect" in fig.axes[0].get_title()
    assert "median per run order, in its colour (order effect detected)" in _texts(fig)


# --- box and dots -----------------------------------------------------------------------


def test_the_box_plot_joins_each_blocks_halves_and_words_a_slowdown_plainly():
    slower = make_result(reduction=-0.05, outlier=3)
    fig = static.block_distributions(slower)
    for ax in fig.axes:
        pairs = [line for line in ax.lines if line.get_gid() == "block_pairs"]
        assert len(pairs) == 12
        assert [line.get_gid() for line in ax.lines].count("block_pairs") == 12
        assert sum(line.get_color() == static.OUTLIER_EDGE for line in pairs) == 1
        assert re.fullmatch(r".+: fixed \d+\.\d % higher", ax.get_title())
        assert ax.get_ylabel() == ""  # once, for the figure
    assert fig.get_supylabel() == "block median host latency (μs); y axes do not start at 0"
    faster = static.block_distributions(make_result())
    assert all(re.fullmatch(r".+: fixed \d+\.\d % lower", ax.get_title()) for ax in faster.axes)


# --- the verdict ------------------------------------------------------------------------


def test_the_forest_labels_and_colours_each_row_by_its_verdict():
    result = make_result(cases=("text", "audio"))
    result.summary[0]["aa"] = {"reduction_pct": 0.1, "reduction_ci95_pct": [-1.0, 1.2]}
    fig = static.reduction_forest(result)
    ax, right = fig.axes
    rows = list(reversed(result.summary))  # drawn bottom-up
    assert [t.get_text() for t in right.get_yticklabels()] == [
        figuredata.reduction_label(r) for r in rows
    ]
    assert all(
        re.fullmatch(r"\d+\.\d % \[\d+\.\d, \d+\.\d\] faster", figuredata.reduction_label(r))
        for r in rows
    )
    colors = [t.get_color() for t in right.get_yticklabels()]
    assert colors == [static.VERDICT_COLORS[r["verdict"]] for r in rows]
    intervals = _by_gid(fig, "forest_intervals")
    assert [tuple(seg[:, 0]) for c in intervals for seg in c.get_segments()] == [
        tuple(r["reduction_ci95_pct"]) for r in rows
    ]
    assert len(_by_gid(fig, "aa")) == 1  # the A/A band where there is one
    assert "95% interval the verdict uses" in ax.get_title()
    assert "t over 3 worker processes (2 df)" in ax.get_title()
    assert ax.get_xlabel() == "host latency reduction (%); positive: fixed is faster"


def test_an_interval_past_the_axis_is_an_arrow_carrying_its_end():
    result = make_result(cases=("text", "audio", "image"))
    result.summary[0]["reduction_pct"] = -137.66
    result.summary[0]["reduction_ci95_pct"] = [-15772.11, 96.44]
    fig = static.reduction_forest(result)
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert (lo, hi) == pytest.approx(figuredata.axis_range(figuredata.forest_table(result)))
    assert lo > -300  # not −16,000: Audio and Image keep their width
    [arrow] = _by_gid(fig, "off_scale_low")
    assert arrow.get_marker() == "<" and arrow.get_xdata()[0] == pytest.approx(lo)
    assert arrow.get_ydata()[0] == 2  # Text, drawn top row of three
    assert [a.get_text() for a in _by_gid(fig, "off_scale_low_labels")] == ["-15772.1 %"]
    assert "past the axis" in ax.get_xlabel()
    runs = {"monday": result, "tuesday": make_result(seed=2, cases=("text", "audio", "image"))}
    compare = static.compare_reductions(runs)
    assert [a.get_text() for a in _by_gid(compare, "off_scale_low_labels")] == ["-15772.1 %"]
    assert compare.axes[0].get_xlim()[0] > -300
    tame = static.reduction_forest(make_result())
    assert not _by_gid(tame, "off_scale_low") and "past the axis" not in tame.axes[0].get_xlabel()


def test_reduction_label_shows_a_level_below_95_percent():
    row = {
        "reduction_pct": 43.21,
        "reduction_ci95_pct": [38.1, 46.5],
        "ci_level": 0.9375,
        "verdict": "no detectable difference",
    }
    assert (
        figuredata.reduction_label(row) == "43.2 % [38.1, 46.5] (93.75%) no detectable difference"
    )
    row["ci_level"] = 0.95
    assert figuredata.reduction_label({**row, "verdict": "faster"}) == "43.2 % [38.1, 46.5] faster"


# --- every call -------------------------------------------------------------------------


def test_the_call_figure_counts_the_calls_outside_its_range():
    result = make_result(tail=4)
    fig = static.call_distribution(result)
    ax = fig.axes[0]
    calls = figuredata.case_calls(figuredata.call_table(result), "interleaved")
    low, high = figuredata.call_range(calls)
    ticks = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    hidden = 0
    for variant, tick in zip(VARIANTS, ticks, strict=True):
        values = calls.loc[calls["variant"] == variant, "host_us"].to_numpy()
        above, below = int((values > high).sum()), int((values < low).sum())
        hidden += above
        assert tick.startswith(f"{variant} {len(values)} calls, ")
        assert (f" {above} above {high:.0f} μs" in tick) == (above > 0)
        assert (f" {below} below {low:.0f} μs" in tick) == (below > 0)
        assert tick.endswith("not shown" if above or below else "all shown")
    # The planted tail (4 of each variant's 240 calls at 30 times the rest) is more than
    # 1 % of the calls: the 99th percentile lies inside it, so some of it is cut, not all.
    assert 0 < hidden < 8
    assert "(the most complex case measured;" in ax.get_title()
    assert ax.get_ylabel() == "host latency per call (μs; log scale)"
    bottom, top = ax.get_ylim()
    for body in _by_gid(fig, "call_violins"):  # whole inside the frame: tapered, never cut
        ys = body.get_paths()[0].vertices[:, 1]
        assert bottom < ys.min() and ys.max() < top
    medians = _by_gid(fig, "call_medians")
    assert [to_hex(m.get_color()[0]) for m in medians] == [static.COLORS[v] for v in VARIANTS]


# --- CPU frequency ----------------------------------------------------------------------


def test_an_unobservable_frequency_is_one_line_and_no_figure():
    result = make_result()
    assert static.frequency_trace(result) is None
    note = static.frequency_note(result)
    assert note.startswith("CPU frequency not observable") and "\n" not in note
    assert sections.cpu_frequency(result) == [sections.Note(note)]


def test_an_observable_frequency_is_traced_per_block_with_the_variant_that_ran():
    result = copy.deepcopy(make_result(cases=("audio",)))
    for i, record in enumerate(result.records):
        record["cpu_mhz_start"], record["cpu_mhz_end"] = 3000.0 - i, 2990.0 - i
    assert static.frequency_note(result) is None
    fig = static.frequency_trace(result)
    ax = fig.axes[0]
    segments = [line for line in ax.lines if line.get_gid() in SEGMENTS]
    assert len(segments) == len(result.records)  # one per block half
    assert {line.get_gid() for line in segments} == set(SEGMENTS)
    assert ax.get_xlabel() == "wall time since the first block (s)"
    assert "source: /proc/cpuinfo" in ax.get_title()
    assert isinstance(sections.cpu_frequency(result)[0], views.View)


def test_a_gpu_run_adds_the_sm_clock_trace_after_the_cpu_line():
    cpu_only = make_result(cases=("audio",))
    assert static.gpu_clock_trace(cpu_only) is None  # no clock recorded: no figure
    result = copy.deepcopy(make_result(cases=("audio",), device="cuda"))
    for i, record in enumerate(result.records):
        # The first block after a gap starts at idle clocks, then the GPU is back up.
        record["gpu_mhz_start"] = 345.0 if i == 0 else 1980.0
        record["gpu_mhz_end"] = 1980.0
    fig = static.gpu_clock_trace(result)
    ax = fig.axes[0]
    segments = [line for line in ax.lines if line.get_gid() in SEGMENTS]
    assert len(segments) == len(result.records)
    assert ax.get_title() == (
        "SM clock of NVIDIA H100 80GB HBM3 at each block half's start and end (NVML)"
    )
    assert "345–1980 MHz" in fig.alt_text
    shown = sections.cpu_frequency(result)
    assert isinstance(shown[0], sections.Note) and shown[1] is not None
    assert isinstance(shown[1], views.View)


# --- across runs ------------------------------------------------------------------------


def test_runs_are_named_by_family_device_target_and_checkpoint():
    cpu = make_result(directory="runs/20261130T062524Z")
    gpu = make_result(device="cuda", directory="runs/20261201T080000Z")
    assert tables.run_label(cpu) == "Qwen2.5-Omni · CPU · reference · synthetic"
    gpu_name = "Qwen2.5-Omni · NVIDIA H100 80GB HBM3 · reference · synthetic"
    assert tables.run_label(gpu) == gpu_name
    qwen3 = copy.deepcopy(cpu)
    qwen3.metadata["family"] = "qwen3-omni"
    assert tables.run_label(qwen3) == "Qwen3-Omni · CPU · reference · synthetic"
    assert tables.headline(qwen3) == (
        "Qwen3-Omni embed_input_ids before/after (vLLM-Omni PR #7573) · CPU · reference · synthetic"
    )
    assert "<h3>Qwen2.5-Omni embed_input_ids before/after (vLLM-Omni PR #7477)" in (
        sections.status(cpu)[0].html
    )


def test_families_get_separate_compare_tables_and_the_prs_table_only_beside_its_own():
    qwen25 = make_result(directory="a")
    qwen3 = copy.deepcopy(make_result(directory="b"))
    qwen3.metadata["family"] = "qwen3-omni"
    runs = {tables.run_label(qwen25): qwen25, tables.run_label(qwen3): qwen3}
    reference = compare.reference_results()
    by_family = compare.compare_tables(runs, reference)
    assert list(by_family) == ["Qwen2.5-Omni", "Qwen3-Omni"]
    assert any(c.startswith("PR: ") for c in by_family["Qwen2.5-Omni"].columns)
    assert not any(c.startswith("PR: ") for c in by_family["Qwen3-Omni"].columns)
    assert all(c.startswith("B: ") for c in by_family["Qwen3-Omni"].columns)  # one key each
    assert compare.runs_table(runs, reference)["key"].tolist() == ["A", "B", "PR"]
    # Only the PR's table: still one table, for its family.
    assert list(compare.compare_tables({"b": qwen3}, reference)) == ["Qwen3-Omni", "Qwen2.5-Omni"]
    # Runs of different families are never differenced.
    assert compare.configuration(qwen25) != compare.configuration(qwen3)


def test_the_compare_table_heads_each_run_with_a_short_key_named_once_in_the_runs_table():
    runs = {
        f"Qwen2.5-Omni · CPU · reference · synthetic · run {i}": make_result(seed=i)
        for i in range(3)
    }
    reference = compare.reference_results()
    table = compare.compare_table(runs, reference)
    groups = list(dict.fromkeys(c.split(":")[0] for c in table.columns))
    assert groups == ["A", "B", "C", "PR"]
    assert max(len(c) for c in table.columns) <= len("PR: before (μs)") + 1
    legend = compare.runs_table(runs, reference)
    assert legend["key"].to_dict() == {
        **dict(zip(runs, "ABC", strict=True)),
        **{compare.reference_name(reference): "PR"},
    }
    assert legend.loc[compare.reference_name(reference), "status"] == "published"
    assert compare.run_keys({str(i): None for i in range(28)})["27"] == "AB"  # after Z


def test_cpu_beside_gpu_gets_a_caption():
    runs = {"cpu run": make_result(), "gpu run": make_result(device="cuda")}
    caption = compare.regime_caption(runs)
    assert caption.startswith("CPU rows sit beside GPU rows: on CPU each lookup of 1172 tokens")
    assert "copies 8.4 MB, which dominates the call" in caption
    assert compare.regime_caption({"cpu run": make_result()}) is None
    shown = sections.comparison(runs)
    assert not any(isinstance(item, sections.Note) and "CPU rows" in item.text for item in shown)
    assert caption in shown[0].alt_text  # once: under the figure and in its alt text
    with_reference = compare.regime_caption({"cpu run": make_result()}, compare.reference_results())
    assert "18.2 % on PR #7477 (NVIDIA H100 80GB)" in with_reference
    fig = static.compare_reductions({"cpu run": make_result()}, compare.reference_results())
    assert fig.get_supxlabel().replace("\n", " ") == with_reference
    assert with_reference in fig.alt_text


def test_runs_of_one_configuration_get_a_row_wise_difference_with_its_interval():
    runs = {"monday": make_result(seed=1), "tuesday": make_result(seed=2, reduction=0.3)}
    found = compare.differences(runs)
    assert [(d["a"], d["b"], d["case"]) for d in found] == [
        ("monday", "tuesday", "audio"),
        ("monday", "tuesday", "interleaved"),
    ]
    for entry in found:
        diff = entry["difference"]
        rows = [runs[n].summary_row(entry["case"], 1172) for n in ("monday", "tuesday")]
        assert diff.difference_pp == pytest.approx(
            rows[1]["reduction_pct"] - rows[0]["reduction_pct"]
        )
        assert diff.low < diff.difference_pp < diff.high and diff.excludes_zero
    table = compare.difference_table(runs)
    assert list(table["Runs (B − A)"]) == ["tuesday − monday"] * 2
    assert set(table["Reading"]) == {"the runs differ"}
    fig = static.compare_reductions(runs)
    assert len(fig.axes) == 2 and len(_by_gid(fig, "differences")) == 2
    # Another device is another configuration: no difference, no second panel.
    mixed = {"cpu": make_result(), "gpu": make_result(device="cuda")}
    assert compare.differences(mixed) == [] and compare.difference_table(mixed).empty
    assert len(static.compare_reductions(mixed).axes) == 1


def test_a_one_process_run_gets_no_difference_interval():
    runs = {"a": make_result(workers=1), "b": make_result(workers=1, seed=3)}
    assert {d["difference"] for d in compare.differences(runs)} == {
        "n/a: needs a between-process interval (2+ workers) in both runs"
    }


def test_the_canary_trace_shows_each_block_edge_and_each_workers_median():
    from embedbench.harness.stability import assess_host

    result = make_result()
    assert static.canary_trace(result) is None  # a run from before the canary: no figure
    for i, record in enumerate(result.records):
        record["canary_us_start"] = 700.0 + (i % 5)
        record["canary_us_end"] = 705.0 + (i % 5)
    result.metadata["host_stability"] = assess_host(result.records).to_json()
    result.metadata["canary"] = {"bytes": 8 * 2**20, "kind": "host memory gather"}
    fig = static.canary_trace(result)
    assert fig.axes[0].get_title() == (
        "Canary (8.0 MiB host memory gather) at each block half's edge: host stable"
    )
    assert "(host memory gather)" in fig.alt_text
    assert len(_by_gid(fig, "worker_medians")) == 3  # one dashed step per worker
    assert "700–709 µs" in fig.alt_text and "host stable" in fig.alt_text
    rendered = [v.figure for v in sections.cpu_frequency(result) if isinstance(v, views.View)]
    assert fig.axes[0].get_title() in [f.axes[0].get_title() for f in rendered]


def test_the_parameter_and_environment_tables_say_unset_or_which_kind_of_missing(monkeypatch):
    import sys
    import types

    from embedbench.config import RunConfig
    from embedbench.harness import sysinfo

    config = tables.config_table(RunConfig())
    assert "" not in set(config["value"])
    assert config.loc["model", "value"] == "unset (the embedded synthetic default)"
    assert config.loc["cpu_core", "value"] == "unset (the lowest allowed core)"
    assert config.loc["output_dir", "value"].startswith("unset (./embedbench-results/")
    assert tables.unset_text("a results dir") == "unset"
    versions = {"python": "3.11", "torch": "2.5", "cuda": None, "vllm": None, "numpy": "2.0"}
    monkeypatch.setattr(sysinfo, "versions", lambda: dict(versions))
    monkeypatch.setattr(sysinfo, "host_facts", lambda: {"cpu_model": None, "logical_cpus": 2})
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    env = tables.environment_table()["value"]
    assert "" not in set(env)
    assert env["vllm"] == "not installed" and env["cpu_model"] == "not found on this machine"
    assert env["cuda"] == "not read (torch not imported in this process)"
    result = make_result()
    result.metadata.pop("cpu_core")
    result.metadata["target"] = "vllm-omni"
    prov = tables.provenance_table(result)["value"]
    assert "" not in set(prov) and prov["cpu core"] == "not recorded"
    assert prov["vllm / vllm-omni / transformers"] == "not recorded / not recorded / not recorded"
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    assert tables.environment_table()["value"]["cuda"] == "none (a CPU build of torch)"


def test_the_interval_section_splits_its_table_and_names_a_shared_method_once():
    result = make_result()
    verdict, pooled, method = tables.verdict_tables(result)
    full = tables.statistics_table(result)
    assert method == "t over 3 worker processes (2 df)"
    assert list(verdict.columns) == [
        "Input", "Estimate", "Interval", "Level", "Verdict", "MDE", "Host speed"
    ]  # fmt: skip
    assert list(pooled.columns) == [
        "Input", "HL estimate (pooled)", "HL interval (pooled)", "Wilcoxon p", "Blocks", "Valid"
    ]  # fmt: skip
    assert set(verdict.columns) | set(pooled.columns) == set(full.columns) - {"Method"}
    assert max(len(verdict.columns), len(pooled.columns)) <= 7  # each fits ~900 px
    items = sections.interval_and_verdict(result)
    assert [type(i).__name__ for i in items] == ["Table", "Note", "Table", "View"]
    assert items[1].text == f"Interval method, every row: {method}."
    mixed = copy.deepcopy(result)
    mixed.summary[1]["interval_method"] = "hodges_lehmann"
    verdict, _, method = tables.verdict_tables(mixed)
    assert method is None and verdict["Method"].nunique() == 2  # differing: a column again
