"""The figures' data apart from their drawing, and the interactive views drawn from it.

The tables of ``figuredata`` are checked as tables (no matplotlib, no JavaScript); then
that the PNG and the Vega-Lite chart of a view carry the same numbers, that every view has
its tooltips, zoom and menus, and that both HTML paths (``embedbench report --html`` and
nbconvert with the offline template) inline the charts' JavaScript once and fetch nothing.
Last, mark by mark: every view's PNG and chart draw the same points from the same rows of
``figuredata``'s tables (``support/figure_parity.py``), and a renderer broken on purpose
fails that. The charts themselves are rendered in a browser by tests/test_browser.py.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from support.figure_parity import (
    CHART_ONLY,
    chart_cases,
    chart_layers,
    drawn_layers,
    problems,
    run_tables,
)
from test_figures import make_result  # the in-memory runs the figure tests build
from test_work_figures import with_work  # and their per-call ledgers

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.harness import stats
from embedbench.harness.stability import assess_host
from embedbench.report import compare, figuredata, interactive, sections, static, views
from embedbench.report.html import render_html
from embedbench.report.results import RunResult
from embedbench.report.summary import summary_row

ROOT = Path(__file__).resolve().parents[1]
VEGA_MARK = 't.version="5.33.0"'  # once in vega.min.js
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


def _with_clocks(result):
    """``result`` with a canary and a varying CPU frequency at every block half's edges."""
    result = copy.deepcopy(result)
    for i, record in enumerate(result.records):
        record["canary_us_start"], record["canary_us_end"] = 700.0 + i % 5, 705.0 + i % 5
        record["cpu_mhz_start"], record["cpu_mhz_end"] = 3000.0 - i, 2990.0 - i
    result.metadata["host_stability"] = assess_host(result.records).to_json()
    result.metadata["canary"] = {"bytes": 8 * 2**20}
    return result


def _views(result) -> list[views.View]:
    items = [item for section in sections.REPORT_SECTIONS for item in section.render(result)]
    return [item for item in items if isinstance(item, views.View)]


def reference_series() -> str:
    return compare.reference_name(compare.reference_results())


def _units(spec: dict) -> list[dict]:
    """Every unit (a layer with a mark) of a spec, at any depth of layers and views."""
    if "mark" in spec:
        return [spec]
    return [u for part in (*spec.get("layer", []), *spec.get("hconcat", [])) for u in _units(part)]


# --- the tables -------------------------------------------------------------------------


def test_the_figure_tables_and_specs_import_neither_matplotlib_nor_ipython():
    code = (
        "import sys\n"
        "import embedbench.report.figuredata, embedbench.report.interactive\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'IPython'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_paired_table_has_each_complete_block_once_with_its_flags():
    result = make_result(outlier=5)
    table = figuredata.paired_table(result)
    assert list(table.columns) == list(figuredata.PAIRED_COLUMNS)
    assert list(dict.fromkeys(table["case"])) == ["audio", "interleaved"]  # table order
    for case in ("audio", "interleaved"):
        sub = figuredata.case_paired(table, case, 1172)
        assert list(sub["order"]) == list(range(12)) == list(sub["block"])
        assert list(sub["worker"]) == [b * 3 // 12 for b in range(12)]
        assert list(sub["first"]) == [VARIANTS[b % 2] for b in range(12)]
        assert list(sub.index[sub["outlier"]]) == [5]
        assert list(sub["flags"]) == ["outlier" if b == 5 else "" for b in range(12)]
        expected = [
            stats.reduction_pct(b, f)
            for b, f in zip(sub["baseline_us"], sub["fixed_us"], strict=True)
        ]
        assert list(sub["reduction_pct"]) == pytest.approx(expected)
    assert table["canary_us"].isna().all()  # a run from before the canary


def test_the_paired_table_marks_an_outlier_workers_blocks_with_its_reason():
    result = make_result(workers=5, blocks=30, outlier_worker=2)
    table = figuredata.paired_table(result)
    for case in ("audio", "interleaved"):
        assert result.summary_row(case, 1172)["diagnostics"]["outlier_workers"]["flagged"] == [2]
        sub = figuredata.case_paired(table, case, 1172)
        odd = sub["worker"] == 2
        assert list(sub.index[sub["outlier_worker"]]) == list(sub.index[odd]) == list(range(12, 18))
        assert set(sub.loc[odd, "worker_reason"]) == {"its canary 50 % above the others'"}
        assert sub.loc[~odd, "worker_reason"].isna().all()
        assert all("outlier worker" in f for f in sub.loc[odd, "flags"])
        assert not any("outlier worker" in f for f in sub.loc[~odd, "flags"])
    clean = figuredata.paired_table(make_result())
    assert not clean["outlier_worker"].any() and clean["worker_reason"].isna().all()


def test_the_worker_spans_are_each_workers_consecutive_blocks():
    table = figuredata.paired_table(make_result(workers=5, blocks=30, outlier_worker=2))
    spans = figuredata.worker_spans(table)
    assert list(spans.columns) == list(figuredata.SPAN_COLUMNS)
    audio = spans[spans["case"] == "audio"]
    assert list(audio["worker"]) == [0, 1, 2, 3, 4]
    assert list(zip(audio["start"], audio["end"], strict=True)) == [
        (6 * w, 6 * w + 5) for w in range(5)
    ]
    assert list(audio["blocks"]) == [6] * 5 and list(audio["shade"]) == [True, False] * 2 + [True]
    assert list(audio["outlier_worker"]) == [False, False, True, False, False]
    assert audio["worker_reason"].tolist()[2] == "its canary 50 % above the others'"
    # A worker that comes back later is a second span; one worker alone is no span at all.
    moved = table.copy()
    moved.loc[(moved["case"] == "audio") & (moved["order"] == 29), "worker"] = 0
    assert list(figuredata.worker_spans(moved).query("case == 'audio'")["worker"]) == [
        *(0, 1, 2, 3, 4, 0)
    ]
    single = table.assign(worker=0)
    assert figuredata.worker_spans(single).empty


def test_the_edge_table_has_both_edges_of_every_half():
    result = _with_clocks(make_result(cases=("audio",)))
    edges = figuredata.edge_table(result)
    assert len(edges) == 2 * len(result.records)
    assert edges["wall_s"].min() == 0.0
    assert list(edges["edge"][:2]) == ["start", "end"]
    assert edges["canary_us"].between(700, 709).all()
    first = result.records[0]
    assert edges["cpu_mhz"][:2].tolist() == [first["cpu_mhz_start"], first["cpu_mhz_end"]]
    medians = figuredata.worker_medians(result)
    assert list(medians["worker"]) == [0, 1, 2]
    assert (medians["start_s"] < medians["end_s"]).all()


def test_the_forest_table_is_the_summary_in_table_order():
    result = make_result(cases=("text", "audio"))
    forest = figuredata.forest_table(result)
    assert list(forest["case"]) == ["text", "audio"]
    for row, summary in zip(forest.to_dict("records"), result.summary, strict=True):
        assert (row["low"], row["high"]) == tuple(summary["reduction_ci95_pct"])
        assert row["reduction_pct"] == summary["reduction_pct"]
        assert row["verdict"] == summary["verdict"] == stats.FASTER
    workers = figuredata.forest_workers(result)
    assert len(workers) == 2 * 3 and set(workers["worker"]) == {0, 1, 2}


def test_the_call_table_has_every_timed_call():
    result = make_result(tail=4)
    calls = figuredata.call_table(result)
    assert len(calls) == 2 * 12 * 2 * 20  # cases x blocks x variants x iterations
    audio = figuredata.case_calls(calls, "audio")
    first = result.records[0]
    assert audio["host_us"][:20].tolist() == [s[0] for s in first["samples_us"]]
    low, high = figuredata.call_range(audio)
    assert low < high


# --- the same numbers in both renderers ----------------------------------------------------


def test_the_png_and_the_chart_of_the_paired_view_draw_one_table():
    result = make_result(outlier=5)
    table = figuredata.paired_table(result)
    view = views.paired_blocks(result)
    assert view.spec["data"]["values"] == interactive.records(table)
    audio = figuredata.case_paired(table, "audio", 1172)
    ax = view.figure.axes[0]
    dots = [c for c in ax.collections if (c.get_gid() or "").startswith("paired_points:")]
    drawn = sorted((x, y) for c in dots for x, y in c.get_offsets())
    assert [y for _, y in drawn] == pytest.approx(list(audio["reduction_pct"]))


def test_the_paired_chart_shades_the_workers_and_hollows_an_outlier_workers_blocks():
    result = make_result(workers=5, blocks=30, outlier_worker=2)
    table = figuredata.paired_table(result)
    spec = views.paired_blocks(result).spec
    layers = {u.get("name"): u for u in _units(spec)}
    assert layers["worker_spans"]["data"]["values"] == interactive.records(
        figuredata.worker_spans(table)
    )
    assert {"filter": interactive.SELECTED} in layers["worker_spans"]["transform"]
    points = layers["paired_points"]["encoding"]
    assert points["fill"]["condition"] == {"test": "datum.outlier_worker", "value": "white"}
    assert points["fill"]["field"] == points["stroke"]["field"] == "first_label"
    tooltip = {t["field"]: t["title"] for t in points["tooltip"]}
    assert tooltip["worker_reason"] == "outlier worker, why"
    assert "worker_reason" in {t["field"] for t in layers["worker_labels"]["encoding"]["tooltip"]}
    # Without an outlier worker the reason is no tooltip row; with one worker, no shading.
    plain = views.paired_blocks(make_result()).spec
    [points] = [u for u in _units(plain) if u.get("name") == "paired_points"]
    assert "worker_reason" not in {t["field"] for t in points["encoding"]["tooltip"]}
    alone = views.paired_blocks(make_result(workers=1)).spec
    assert {u.get("name") for u in _units(alone)} == {
        *("zero", "headline", "outlier_rings", "paired_points")
    }  # one worker: no spans, the run's reduction instead of the workers'


def test_every_view_has_tooltips_zoom_and_the_case_and_length_menus():
    result = _with_clocks(make_result(cases=("text", "audio"), outlier=3))
    shown = _views(result)
    names = [v.spec["title"]["text"] for v in shown]
    assert len(shown) == 6, names  # forest, paired, per block, per call, MHz, canary
    for view in shown:
        spec = view.spec
        assert spec["$schema"].endswith("/vega-lite/v5.json")
        assert spec["description"] == view.alt_text
        units = _units(spec)
        params = [p for u in units for p in u.get("params", [])]
        assert any(p["name"] == "zoom" and p.get("bind") == "scales" for p in params), spec
        assert any(u["encoding"].get("tooltip") for u in units)
        assert "url" not in json.dumps(spec["data"])  # the data travels with the spec
    by_title = dict(zip(names, shown, strict=True))
    paired = by_title["Paired blocks over time: each dot is one block's baseline/fixed pair"]
    menus = {p["name"]: p for p in paired.spec["params"]}
    assert menus["sel_case"]["bind"]["options"] == ["text", "audio"]
    assert menus["sel_case"]["bind"]["labels"] == ["Text", "Audio"]
    assert menus["sel_tokens"]["bind"]["options"] == [1172]
    [points] = [u for u in _units(paired.spec) if u.get("name") == "paired_points"]
    fields = [t["field"] for t in points["encoding"]["tooltip"]]
    assert fields == [
        *("label", "tokens", "block", "worker", "order", "first", "baseline_us", "fixed_us"),
        *("reduction_pct", "flags", "cpu_mhz", "canary_us"),
    ]  # no GPU clock recorded: no GPU column
    picks = {p["name"] for p in points["params"]}
    assert picks == {"zoom", "worker_pick", "block_pick"}


def test_a_view_without_data_says_so_in_both_renderers():
    empty = make_result()
    empty.records.clear()
    view = views.paired_blocks(empty)
    assert "no measured blocks" in view.alt_text
    assert view.spec["data"]["values"] == [{"text": "no complete block in this run"}]


# --- the HTML paths -----------------------------------------------------------------------


def test_the_html_page_inlines_the_charts_javascript_once_and_fetches_nothing():
    result = _with_clocks(make_result(outlier=4))
    page = render_html(result)
    shown = _views(result)
    assert page.count(VEGA_MARK) == 1
    assert page.count("vegaEmbed=") == 1 and page.count("embedbenchViews") == 1
    specs = re.findall(r'<script [^>]*class="eb-spec"[^>]*>(.*?)</script>', page)
    assert [json.loads(s) for s in specs] == [json.loads(views.spec_json(v.spec)) for v in shown]
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # not the inlined JS's
    images = re.findall(r"<img [^>]*>", markup)
    assert len(images) == len(shown) and all(re.search(r'alt="[^"]{40,}"', i) for i in images)
    assert not REMOTE.findall(page)


def test_the_offline_template_draws_a_views_chart_and_keeps_its_png(tmp_path):
    from nbconvert import HTMLExporter

    result = _with_clocks(make_result(outlier=4))
    view = views.paired_blocks(result)
    data, metadata = view.bundle()
    nb = new_notebook(
        cells=[
            new_code_cell(
                "show(...)", outputs=[new_output("display_data", data=data, metadata=metadata)]
            )
        ]
    )
    path = tmp_path / "report.ipynb"
    nbformat.write(nb, path)
    exporter = HTMLExporter(template_file=str(ROOT / "scripts" / "offline.html.j2"))
    exporter.exclude_input = True
    page, _ = exporter.from_filename(str(path))
    assert page.count(VEGA_MARK) == 1 and page.count("embedbenchViews") == 1
    [spec] = re.findall(r'<script [^>]*class="eb-spec"[^>]*>(.*?)</script>', page)
    assert json.loads(spec) == view.spec and "<" not in spec
    assert f'alt="{view.alt_text[:40]}' in page
    assert not REMOTE.findall(page)
    # A notebook with no chart gets no JavaScript.
    plain = new_notebook(cells=[new_code_cell("1", outputs=[])])
    nbformat.write(plain, path)
    assert VEGA_MARK not in exporter.from_filename(str(path))[0]


def test_the_static_figures_stay_matplotlib_figures():
    result = make_result()
    assert isinstance(static.paired_blocks(result), static.ReportFigure)
    assert all(isinstance(v.figure, static.ReportFigure) for v in _views(result))


def test_the_compare_view_draws_each_runs_reductions_from_one_table():
    runs = {"monday": make_result(seed=1), "tuesday": make_result(seed=2, reduction=0.3)}
    reference = compare.reference_results()
    table = figuredata.compare_table(runs, reference)
    shown = table[table["panel"] == figuredata.RUNS]
    assert list(dict.fromkeys(shown["series"])) == ["monday", "tuesday", reference_series()]
    assert list(shown["run"]) == [0, 0, 1, 1, *[2] * 6]
    monday = shown[shown["series"] == "monday"]
    assert list(monday["reduction_pct"]) == [r["reduction_pct"] for r in runs["monday"].summary]
    assert list(monday["input"]) == [CASE_LABELS[c] for c in monday["case"]]
    assert shown.loc[shown["series"] == reference_series(), "low"].isna().all()
    # The same configuration: the difference panel, tuesday minus monday, per case.
    diff = table[table["panel"] == figuredata.DIFFERENCE]
    assert set(diff["series"]) == {"tuesday − monday"} and len(diff) == 2
    found = compare.differences(runs)
    assert list(diff["reduction_pct"]) == [d["difference"].difference_pp for d in found]
    view = views.compare_reductions(runs, reference)
    assert view.spec["data"]["values"] == interactive.records(table)
    boxes = [p["bind"] for p in view.spec["params"]]  # a checkbox per run hides it
    assert [b["name"] for b in boxes] == [f"{name} " for name in dict.fromkeys(shown["series"])]
    left, right = view.spec["hconcat"]
    assert left["transform"] == [
        {"filter": "datum.panel == 'runs'"},
        {"filter": "[show_0, show_1, show_2][datum.run]"},
    ]
    assert right["transform"] == [{"filter": "datum.panel == 'difference'"}]
    # The PNG's dots are the table's reductions, run by run.
    ax = view.figure.axes[0]
    drawn = [sorted(line.get_xdata()) for line in ax.lines if line.get_gid() == "compare_points"]
    expected = [sorted(rows["reduction_pct"]) for _, rows in shown.groupby("series", sort=False)]
    assert drawn == [pytest.approx(e) for e in expected]
    assert isinstance(sections.comparison(runs, reference)[0], views.View)
    # Runs of different configurations: no difference panel, one view.
    mixed = views.compare_reductions({"cpu": make_result(), "gpu": make_result(device="cuda")})
    assert "hconcat" not in mixed.spec and len(mixed.figure.axes) == 1


# --- intervals past the axis --------------------------------------------------------------


def _wild():
    """Three cases, Text's interval the quick run's: −137.66 % [−15772.11 %, 96.44 %]."""
    result = make_result(cases=("text", "audio", "image"))
    result.summary[0]["reduction_pct"] = -137.66
    result.summary[0]["reduction_ci95_pct"] = [-15772.11, 96.44]
    return result


def test_one_wild_interval_does_not_stretch_the_axis_and_is_listed_off_scale():
    forest = figuredata.forest_table(_wild())
    lo, hi = figuredata.axis_range(forest)
    assert -300 < lo < -137.66 and 96.44 < hi < 110  # the estimates and the sane ends
    ends = figuredata.off_scale(forest)
    assert ends[["input", "side", "value", "edge", "text"]].to_dict("records") == [
        {"input": "Text", "side": "low", "value": -15772.11, "edge": lo, "text": "-15772.1 %"}
    ]
    tame = figuredata.forest_table(make_result(cases=("text", "audio")))
    lo, hi = figuredata.axis_range(tame)
    assert lo < 0 < tame["low"].min() <= tame["high"].max() < hi  # 0 and every interval
    assert figuredata.off_scale(tame).empty


def test_the_forest_and_compare_charts_fit_their_axis_and_print_the_ends_past_it():
    result = _wild()
    lo, hi = figuredata.axis_range(figuredata.forest_table(result))
    spec = views.reduction_forest(result).spec
    units = {u.get("name"): u for u in _units(spec)}
    scales = [u["encoding"]["x"]["scale"] for u in _units(spec) if "field" in u["encoding"]["x"]]
    assert scales and all(s["domain"] == [round(lo, 3), round(hi, 3)] for s in scales)
    assert all(u["mark"]["clip"] for u in _units(spec) if "field" in u["encoding"]["x"])
    end = [{"input": "Text", "side": "low", "text": "-15772.1 %"}]
    assert units["off_scale_low"]["data"]["values"] == end  # the arrow
    assert units["off_scale_low_labels"]["data"]["values"] == end  # and its number
    assert "off_scale_high" not in units
    runs = {"monday": result, "tuesday": make_result(seed=2, cases=("text", "audio", "image"))}
    compare = views.compare_reductions(runs).spec
    [end] = [u for u in _units(compare) if u.get("name") == "off_scale_low"]
    assert end["data"]["values"] == [
        {"input": "Text", "series": "monday", "run": 0, "side": "low", "text": "-15772.1 %"}
    ]
    assert end["transform"] == compare["hconcat"][0]["transform"][1:]  # hidden with its run
    tame = views.reduction_forest(make_result()).spec
    assert not [u for u in _units(tame) if (u.get("name") or "").startswith("off_scale")]


# --- the PNG and the chart, mark by mark: runs that draw every mark -------------------

# Every view's PNG and chart are read back (tests/support/figure_parity.py) and must draw
# the same marks from the same rows of figuredata's tables, panel by panel; a chart may
# only pick rows. A renderer that computes a value of its own (a trend, a density, a box,
# an axis) or draws or drops something the other does not fails: the last tests break a
# renderer on purpose and show it.


def _summarize(result: RunResult) -> RunResult:
    """``result`` summarized again from its records, as the runner would."""
    for i, row in enumerate(result.summary):
        mine = [r for r in result.records if r["case"] == row["case"]]
        result.summary[i] = summary_row(row["case"], row["tokens"], mine, seed=None)
    result.metadata["host_stability"] = assess_host(result.records).to_json()
    return result


def drifting(device: str = "cpu") -> RunResult:
    """Two cases over five workers: Text's order effect and baseline drift, Audio's
    reduction falling block by block (a trend) and two blocks at a low CPU frequency (an
    excursion); a call tail; a canary; on ``cuda`` an SM clock idle at the first block."""
    result = make_result(
        cases=("text", "audio"),
        workers=5,
        blocks=30,
        outlier_worker=2,
        drift=0.05,
        order_shift=0.1,
        tail=4,
        device=device,
    )
    for record in result.records:
        audio = record["case"] == "audio"
        if audio and record["variant"] == "fixed":
            slower = 1 + 0.01 * record["block"]
            record["samples_us"] = [[v * slower for v in s] for s in record["samples_us"]]
        slow = audio and record["block"] in (7, 8)
        record["cpu_mhz_start"] = record["cpu_mhz_end"] = (
            2400.0 if slow else 2600.0 + record["block"] % 3
        )
        if device == "cuda":
            record["gpu_mhz_start"] = 345.0 if record["block"] == 0 else 1980.0
            record["gpu_mhz_end"] = 1980.0
    return _summarize(result)


def flagged() -> RunResult:
    """An outlier worker (amber, hollow) and outlier blocks (ringed); Text's interval the
    quick run's wild one (off the forest's axis) and an A/A interval."""
    result = _with_clocks(
        make_result(cases=("text", "audio", "image"), workers=5, blocks=30, outlier_worker=2)
    )
    result.summary[0]["reduction_pct"] = -137.66
    result.summary[0]["reduction_ci95_pct"] = [-15772.11, 96.44]
    result.summary[1]["aa"] = {"reduction_pct": 0.1, "reduction_ci95_pct": [-1.0, 1.2]}
    return result


def one_worker() -> RunResult:
    """One worker process: no spans, the run's reduction as the line."""
    return make_result(workers=1, outlier=3)


def report_views(result: RunResult) -> list[views.View]:
    """Every view the report's sections show for ``result``."""
    items = [item for section in sections.REPORT_SECTIONS for item in section.render(result)]
    return [item for item in items if isinstance(item, views.View)]


def compare_views() -> list[tuple[views.View, list[pd.DataFrame]]]:
    """The compare figure: runs of one configuration (a difference panel, a wild
    interval), with the PR's table; and runs of two devices (no difference panel)."""
    reference = compare.reference_results()
    out = []
    for runs, ref in (
        ({"monday": flagged(), "tuesday": make_result(seed=2, cases=("text", "audio"))}, reference),
        ({"cpu": make_result(), "gpu": make_result(device="cuda")}, None),
    ):
        table = figuredata.compare_table(runs, ref)
        shown = table[table["panel"] == figuredata.RUNS]
        out.append((views.compare_reductions(runs, ref), [table, figuredata.off_scale(shown)]))
    return out


# --- the PNG and the chart, mark by mark: every figure --------------------------------


@pytest.fixture(scope="module")
def checked() -> list[tuple[views.View, list[pd.DataFrame]]]:
    """Every view of the report for runs that draw every mark (two with a per-call ledger,
    one counting instructions), and the compare view."""
    out = []
    counted = (with_work(flagged()), with_work(one_worker(), instructions=False))
    for result in (drifting(), drifting("cuda"), flagged(), one_worker(), *counted):
        tables = run_tables(result)
        out += [(view, tables) for view in report_views(result)]
    return out + compare_views()


def test_every_figure_draws_the_same_marks_from_the_same_rows_in_the_png_and_the_chart(checked):
    for view, tables in checked:
        title = view.spec["title"]["text"]
        assert problems(view, tables) == [], title


def test_every_layer_of_every_chart_is_compared_on_rows_it_draws(checked):
    """The runs above exercise every mark: a layer never drawn would pass unchecked."""
    seen = {layer["name"] for view, _ in checked for layer in chart_layers(view.spec)}
    drawn = set().union(*(drawn_layers(view) for view, _ in checked))
    assert seen - drawn - set(CHART_ONLY) == set()
    assert {"trend", "baseline_drift", "order_effect", "headline", "worker_reductions"} <= seen
    assert {"outlier_rings", "trace_rings", "off_scale_low", "aa", "differences"} <= seen
    assert {"call_violins", "block_boxes", "block_whiskers", "worker_medians"} <= seen
    assert {"diagonal", "disagreement_points", "disagreement_labels_right"} <= seen
    assert {"operator_bars", "operator_values_inside", "operator_values_outside"} <= seen


def test_the_png_has_a_panel_for_every_case_its_chart_offers(checked):
    """Each per-case chart's menu offers the cases the PNG has panels for (the per-call
    PNG, one case, excepted: docs/interactive.md)."""
    for view, _ in checked:
        cases = chart_cases(view.spec)
        panels = {ax.get_gid() for ax in view.figure.axes if ax.get_gid()}
        if view.spec["title"]["text"].startswith("Per-call"):
            assert panels <= cases and len(panels) == 1
        else:
            assert panels == cases, view.spec["title"]["text"]


def test_the_interval_charts_fit_the_axis_the_png_has():
    for result in (flagged(), make_result()):
        view = views.reduction_forest(result)
        scales = [
            layer["encoding"]["x"]["scale"]["domain"]
            for layer in chart_layers(view.spec)
            if "field" in layer["encoding"].get("x", {})
        ]
        assert scales and all(
            s == pytest.approx(view.figure.axes[0].get_xlim(), abs=1e-3) for s in scales
        )


# --- a broken renderer fails ----------------------------------------------------------------


class _Proxy:
    """``figuredata`` as a renderer would see it, one function replaced."""

    def __init__(self, **replaced: Callable) -> None:
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(figuredata, name)


def _ordinary_least_squares(result: RunResult) -> pd.DataFrame:
    """The paired table with its trend refitted by least squares (not Theil–Sen)."""
    table = figuredata.paired_table(result)
    for _, sub in table.groupby(["case", "tokens"]):
        if sub["trend_pct"].notna().any():
            slope, intercept = np.polyfit(sub["order"], sub["reduction_pct"], 1)
            table.loc[sub.index, "trend_pct"] = intercept + slope * sub["order"]
    return table


def test_a_png_that_fits_its_own_trend_fails(monkeypatch):
    result = drifting()
    monkeypatch.setattr(static, "figuredata", _Proxy(paired_table=_ordinary_least_squares))
    found = problems(views.paired_blocks(result), run_tables(result))
    assert found and all(" trend: " in p for p in found), found


def test_a_png_that_draws_its_violins_from_its_own_density_fails(monkeypatch):
    result = drifting()

    def wider(calls: pd.DataFrame) -> pd.DataFrame:
        return figuredata.call_violins(calls).assign(right=lambda v: v["right"] + 0.05)

    monkeypatch.setattr(static, "figuredata", _Proxy(call_violins=wider))
    found = problems(views.call_distribution(result), run_tables(result))
    assert found and all(" call_violins: " in p for p in found), found


def test_a_chart_that_aggregates_its_own_boxes_fails():
    result = drifting()
    view = views.block_distributions(result)
    spec = copy.deepcopy(view.spec)
    [boxes] = [layer for layer in spec["layer"] if layer["name"] == "block_boxes"]
    boxes.pop("data")  # the old way: Vega-Lite's own quartiles of the block halves
    boxes["transform"] = [
        *boxes["transform"],
        {"aggregate": [{"op": "q1", "field": "us", "as": "q1"}], "groupby": ["half"]},
    ]
    found = problems(views.View(view.figure, spec), run_tables(result))
    assert any("the chart computes" in p for p in found), found


def test_a_chart_that_drops_a_mark_or_a_png_that_drops_one_fails():
    result = flagged()
    view = views.paired_blocks(result)
    spec = copy.deepcopy(view.spec)
    spec["layer"] = [layer for layer in spec["layer"] if layer.get("name") != "worker_reductions"]
    found = problems(views.View(view.figure, spec), run_tables(result))
    assert any("a PNG artist no chart layer draws" in p for p in found), found
    for artist in view.figure.findobj(lambda a: a.get_gid() == "outlier_rings"):
        artist.remove()
    found = problems(view, run_tables(result))
    assert found and all(" outlier_rings: PNG only [] (0)" in p for p in found), found


def test_a_chart_with_rows_no_table_holds_fails():
    result = flagged()
    view = views.reduction_forest(result)
    spec = copy.deepcopy(view.spec)
    for row in spec["data"]["values"]:
        row["reduction_pct"] += 1.0  # computed in the renderer, drawn in the chart only
    found = problems(views.View(view.figure, spec), run_tables(result))
    assert any("no figuredata table's rows" in p for p in found), found
    assert any(" forest_points: " in p for p in found), found
