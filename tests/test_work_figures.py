"""The figures of the per-call ledger: work against time, and each case's operators.

Their tables (``figuredata.disagreement_table``, ``diagonal_table``, ``operator_table``,
``operator_cases``) are checked as tables on runs built in memory with a ledger of known
counts (``with_work``); then the PNG (``workfigures``) and the chart (``workcharts``): the
chart's layers, tooltips, zoom and the click that picks a case for the operators. That
the PNG and the chart draw the same marks from these tables is checked with every other
view in tests/test_interactive.py (``with_work`` runs join its parity fixture).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from support.figure_parity import chart_cases, chart_layers, chart_points, keeps
from test_figures import make_result

from embedbench.report import figuredata, sections, views, workcharts, workfigures
from embedbench.report.results import RunResult

HIDDEN = 64  # the rows' width in the ledgers built here: each row 128 bytes of bf16
# Instructions per call: a fixed part, and this many per lookup.
BASE_INSTRUCTIONS, LOOKUP_INSTRUCTIONS = 200_000, 1_000_000


def ledger(case: str, tokens: int, variant: str, lookups: int, instructions: bool) -> dict:
    """A work.json row of ``lookups`` lookups of ``tokens`` ids, each widening its ids
    (``aten.to``) then gathering its rows (``aten.embedding``)."""
    rows, wide = tokens * HIDDEN * 2, tokens * 8
    embedding = {"read": lookups * (wide + rows), "written": lookups * rows}
    widen = {"read": lookups * tokens * 4, "written": lookups * wide}
    row: dict[str, Any] = {
        "case": case,
        "tokens": tokens,
        "variant": variant,
        "device": "cpu",
        "ops": {"aten.embedding": lookups, "aten.to": lookups},
        "op_bytes": {"aten.embedding": embedding, "aten.to": widen},
        "bytes_read": embedding["read"] + widen["read"],
        "bytes_written": embedding["written"] + widen["written"],
        "bytes_allocated": embedding["written"] + widen["written"],
        "syncs": 0,
        "kernels": None,
        "workers_agree": True,
    }
    if instructions:
        row["instructions"] = BASE_INSTRUCTIONS + LOOKUP_INSTRUCTIONS * lookups
    return row


def with_work(result: RunResult, *, instructions: bool = True) -> RunResult:
    """``result`` with a ledger for every summary row: the baseline two lookups (one for
    Text), the fixed form one; ``instructions`` counted where asked."""
    work = []
    for row in result.summary:
        case, tokens = row["case"], int(row["tokens"])
        before = 1 if case == "text" else 2
        work += [
            ledger(case, tokens, "baseline", before, instructions),
            ledger(case, tokens, "fixed", 1, instructions),
        ]
    return RunResult(
        result.directory,
        result.metadata,
        result.records,
        result.validation,
        result.summary,
        result.aa_records,
        work,
    )


@pytest.fixture(scope="module")
def counted() -> RunResult:
    return with_work(make_result(cases=("text", "audio", "image"), workers=5, blocks=15))


# -- the tables ----------------------------------------------------------------------------


def test_the_disagreement_table_has_each_case_once_per_measure(counted):
    table = figuredata.disagreement_table(counted)
    assert list(table.columns) == list(figuredata.DISAGREEMENT_COLUMNS)
    assert list(zip(table["case"], table["measure"], strict=True)) == [
        ("text", "bytes moved"),
        ("text", "instructions"),
        ("audio", "bytes moved"),
        ("audio", "instructions"),
        ("image", "bytes moved"),
        ("image", "instructions"),
    ]
    audio = table[table["case"] == "audio"].set_index("measure")
    assert audio.loc["bytes moved", "work_reduction_pct"] == pytest.approx(50.0)
    two, one = (BASE_INSTRUCTIONS + LOOKUP_INSTRUCTIONS * n for n in (2, 1))
    assert audio.loc["instructions", "work_reduction_pct"] == pytest.approx(100 * (1 - one / two))
    assert (
        audio.loc["instructions", "baseline_work"],
        audio.loc["instructions", "fixed_work"],
    ) == (
        two,
        one,
    )
    text = table[table["case"] == "text"]
    assert list(text["work_reduction_pct"]) == [0.0, 0.0]
    forest = figuredata.forest_table(counted).set_index("case")
    for row in table.to_dict("records"):
        summary = forest.loc[row["case"]]
        assert (row["reduction_pct"], row["low"], row["high"]) == (
            summary["reduction_pct"],
            summary["low"],
            summary["high"],
        )
        assert row["gap_pp"] == pytest.approx(row["reduction_pct"] - row["work_reduction_pct"])
        assert row["verdict"] == summary["verdict"]
    labelled = table[table["labelled"]]
    assert list(labelled["measure"]) == ["bytes moved"] * 3  # one label per case
    assert set(labelled["label_side"]) == {"left", "right"}
    assert table[~table["labelled"]]["label_side"].isna().all()


def test_without_instructions_only_the_bytes_are_set_against_time():
    table = figuredata.disagreement_table(with_work(make_result(), instructions=False))
    assert set(table["measure"]) == {"bytes moved"} and len(table) == 2


def test_a_case_without_a_ledger_or_an_interval_is_left_out(counted):
    partial = with_work(make_result(cases=("text", "audio", "image")))
    partial.work[:] = [r for r in partial.work if r["case"] != "image"]
    partial.summary[0] = {**partial.summary[0], "valid": False}  # text
    assert set(figuredata.disagreement_table(partial)["case"]) == {"audio"}
    assert figuredata.disagreement_table(make_result()).empty  # no work.json at all
    assert figuredata.diagonal_table(figuredata.disagreement_table(make_result())).empty


def test_the_diagonal_spans_every_point_and_zero_on_both_axes(counted):
    table = figuredata.disagreement_table(counted)
    diagonal = figuredata.diagonal_table(table)
    assert list(diagonal.columns) == ["x", "y"] and len(diagonal) == 2
    assert list(diagonal["x"]) == list(diagonal["y"])  # y = x
    lo, hi = diagonal["x"]
    points = [*table["work_reduction_pct"], *table["reduction_pct"], 0.0]
    assert lo < min(points) and hi > max(points)


def test_one_wild_interval_does_not_stretch_the_diagonal(counted):
    wild = with_work(make_result(cases=("text", "audio", "image")))
    wild.summary[0] = {**wild.summary[0], "reduction_ci95_pct": [-15772.11, 96.44]}
    lo, hi = figuredata.diagonal_table(figuredata.disagreement_table(wild))["x"]
    assert lo > -1000 and hi > 50


def test_the_operator_table_has_each_forms_operators_with_their_bytes(counted):
    table = figuredata.operator_table(counted)
    assert list(table.columns) == list(figuredata.OPERATOR_COLUMNS)
    assert len(table) == 3 * 2 * 2  # cases × forms × operators
    audio = table[table["case"] == "audio"].set_index(["variant", "op"])
    gather = audio.loc[("baseline", "aten.embedding")]
    rows, wide = 1172 * HIDDEN * 2, 1172 * 8
    assert (gather["calls"], gather["read"], gather["written"]) == (2, 2 * (wide + rows), 2 * rows)
    assert gather["moved"] == gather["read"] + gather["written"]
    assert gather["op_label"] == "aten.embedding ×2 → ×1"
    assert audio.loc[("fixed", "aten.to"), "op_label"] == "aten.to ×2 → ×1"
    assert gather["x_max"] == pytest.approx(figuredata.OPERATOR_REACH * gather["moved"])
    assert gather["label_at"] == "inside" and audio.loc[("fixed", "aten.to"), "label_at"] == (
        "outside"
    )
    ranks = dict(zip(table["op"], table["rank"], strict=True))
    assert ranks == {"aten.embedding": 0, "aten.to": 1}  # most bytes first
    assert set(table["start"]) == {0.0}


def test_the_pickers_rows_are_each_forms_bytes_per_call(counted):
    cases = figuredata.operator_cases(counted)
    assert list(cases.columns) == list(figuredata.OPERATOR_CASE_COLUMNS)
    assert list(zip(cases["case"], cases["variant"], strict=True)) == [
        (c, v) for c in ("text", "audio", "image") for v in ("baseline", "fixed")
    ]
    audio = cases[cases["case"] == "audio"].set_index("variant")
    work = {r["variant"]: r for r in counted.work if r["case"] == "audio"}
    for variant in ("baseline", "fixed"):
        row = work[variant]
        assert audio.loc[variant, "moved"] == row["bytes_read"] + row["bytes_written"]
        assert audio.loc[variant, "operators"] == sum(row["ops"].values())


# -- the chart -----------------------------------------------------------------------------


def _layer(spec: dict, name: str) -> dict:
    [layer] = [layer for layer in chart_layers(spec) if layer.get("name") == name]
    return layer


def test_the_disagreement_chart_draws_its_table_on_the_diagonals_axes(counted):
    view = views.work_disagreement(counted)
    spec = view.spec
    table = figuredata.disagreement_table(counted)
    diagonal = figuredata.diagonal_table(table)
    names = [layer["name"] for layer in chart_layers(spec)]
    assert names == [
        "diagonal",
        "disagreement_intervals",
        "disagreement_points",
        "disagreement_labels_right",
        "disagreement_labels_left",
    ]
    points = _layer(spec, "disagreement_points")
    domain = [round(float(v), 3) for v in diagonal["x"]]
    assert points["encoding"]["x"]["scale"]["domain"] == domain
    assert points["encoding"]["y"]["scale"]["domain"] == domain
    assert points["encoding"]["shape"]["scale"]["domain"] == ["bytes moved", "instructions"]
    params = {p["name"]: p for p in points["params"]}
    assert params["zoom"]["bind"] == "scales"
    assert params[workcharts.OPERATOR_PICK]["select"]["fields"] == ["case", "tokens"]
    fields = [t["field"] for t in points["encoding"]["tooltip"]]
    assert fields[:3] == ["input", "measure", "work_reduction_pct"] and "gap_pp" in fields
    drawn = chart_points(points, {})
    assert len(drawn) == len(table) == 6
    labels = [
        p[2]
        for name in ("left", "right")
        for p in chart_points(_layer(spec, f"disagreement_labels_{name}"), {})
    ]
    assert sorted(labels) == ["Audio", "Image", "Text"]
    assert spec["width"] == spec["height"]  # square: y = x at 45°


def test_the_drilldown_picks_a_case_by_a_click_and_shows_its_operators(counted):
    spec = views.operator_drilldown(counted).spec
    picker, bars = _layer(spec, "operator_cases"), _layer(spec, "operator_bars")
    pick, form = picker["params"]
    assert pick["name"] == workcharts.OPERATOR_PICK == "op_pick"
    assert pick["select"] == {
        "type": "point",
        "fields": ["case", "tokens"],
        "on": "click",
        "clear": False,
        "toggle": False,
    }
    assert pick["value"] == [{"case": "text", "tokens": 1172}]  # the first case to start
    assert form["name"] == workcharts.FORM_PICK and form["select"]["fields"] == ["variant"]
    assert bars["transforms"] == [{"filter": {"param": "op_pick", "empty": False}}]
    assert bars["encoding"]["opacity"]["condition"]["param"] == "form_pick"
    assert picker["rows"] == views.interactive.records(figuredata.operator_cases(counted))
    assert bars["rows"] == views.interactive.records(figuredata.operator_table(counted))
    audio = {"sel_case": "audio", "sel_tokens": 1172}
    shown = [r for r in bars["rows"] if all(keeps(t, r, audio) for t in bars["transforms"])]
    assert {(r["case"], r["variant"], r["op"]) for r in shown} == {
        ("audio", v, op) for v in ("baseline", "fixed") for op in ("aten.embedding", "aten.to")
    }
    fields = [t["field"] for t in bars["encoding"]["tooltip"]]
    assert fields == ["input", "variant", "op", "calls", "read", "written", "moved"]
    assert any(p["name"] == "zoom" for p in bars["params"])
    assert chart_cases(spec) == {"text@1172", "audio@1172", "image@1172"}


def test_the_chart_modules_import_neither_matplotlib_nor_ipython():
    code = (
        "import sys\n"
        "import embedbench.report.workcharts\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'IPython'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# -- the PNG and the report ----------------------------------------------------------------


def _gids(fig) -> set[str]:
    return {a.get_gid() for a in fig.findobj(lambda a: bool(a.get_gid()))}


def test_the_disagreement_png_draws_the_diagonal_and_every_point(counted):
    fig = workfigures.work_disagreement(counted)
    [ax] = fig.axes
    diagonal = figuredata.diagonal_table(figuredata.disagreement_table(counted))
    assert ax.get_xlim() == pytest.approx(tuple(diagonal["x"]))
    assert ax.get_ylim() == pytest.approx(tuple(diagonal["y"]))
    assert {"diagonal", "disagreement_intervals", "disagreement_points"} <= _gids(fig)
    assert (
        sum(len(c.get_offsets()) for c in ax.collections if c.get_gid() == "disagreement_points")
        == 6
    )
    alt = fig.alt_text
    assert "y = x diagonal" in alt and "memory- or launch-bound" in alt
    assert "Audio (bytes moved): work 50.0 %" in alt and "Audio (instructions)" in alt


def test_the_operator_png_has_a_panel_per_case_and_labels_each_operator(counted):
    fig = workfigures.operator_drilldown(counted)
    panels = [ax for ax in fig.axes if ax.get_gid()]
    assert [ax.get_gid() for ax in panels] == ["text@1172", "audio@1172", "image@1172"]
    audio = panels[1]
    ticks = [t.get_text() for t in audio.get_yticklabels()]
    assert ticks == ["aten.to ×2 → ×1", "aten.embedding ×2 → ×1"]  # most bytes on top
    bars = [p for p in audio.patches if p.get_gid() == "operator_bars"]
    assert len(bars) == 4
    widths = sorted(p.get_width() for p in bars)
    table = figuredata.operator_table(counted)
    mine = table[table["case"] == "audio"]
    assert widths == pytest.approx(sorted(mine["moved"]))
    assert audio.get_xlim()[1] == pytest.approx(float(mine["x_max"].iloc[0]))
    assert "Audio: aten.embedding ×2 → ×1, aten.to ×2 → ×1" in fig.alt_text


def test_the_report_shows_both_views_after_the_verdict_and_says_when_there_is_no_ledger(
    counted,
):
    first, second = sections.work_against_time(counted)
    assert isinstance(first, views.View) and isinstance(second, views.View)
    assert first.spec["title"]["text"].startswith("Work against time")
    assert second.spec["title"]["text"].startswith("Operators per call")
    [note] = sections.work_against_time(make_result())
    assert "No per-call ledger" in note.text
    titles = [s.title for s in sections.REPORT_SECTIONS]
    assert titles.index("Work against time") == titles.index("Interval and verdict") + 1


def test_a_run_with_a_ledger_but_no_interval_says_so_in_both_renderers():
    bare = with_work(make_result())
    for row in bare.summary:
        row["reduction_ci95_pct"] = None
    view = views.work_disagreement(bare)
    assert "no case with both a per-call ledger" in view.alt_text
    assert view.spec["data"]["values"] == [{"text": "no case with a ledger and an interval"}]
    assert len(views.operator_drilldown(bare).spec["hconcat"]) == 2  # the ledger is there
