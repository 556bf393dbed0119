"""The interactive renderer: Vega-Lite v5 specifications of the report's figures.

Each function takes the tidy tables of ``figuredata`` that the static renderer draws too
(building the figure's other tables from them with ``figuredata``'s functions) and
returns a plain JSON-able dict: no plotting library, no JavaScript here. A spec only maps
the tables' columns to marks: its data are the tables' rows, its transforms only pick rows
(the menus' case, a run's checkbox), never compute a value, so the chart draws what the
PNG draws (``tests/test_interactive.py``). Each layer that draws rows is named; the
static figure's artists carry the same names. JupyterLab 4 renders the specs itself (its
built-in ``application/vnd.vegalite.v5+json`` renderer, also in an untrusted notebook);
the offline HTML renders them with the vega, vega-lite and vega-embed builds inlined once
per page (``data/vega``). docs/interactive.md has the choice and what each view does.

Every view has tooltips with the numbers, zoom and pan (drag, wheel; double-click resets),
and the per-case views one case and one length menu instead of a panel per case. Clicking
a block selects its worker (``worker_pick``) and the block (``block_pick``); the HTML page
carries those selections across its charts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from embedbench.cases import VARIANTS
from embedbench.harness import stats
from embedbench.report import figuredata, tables

__all__ = [
    "BLOCK_TOOLTIP",
    "CALL_TOOLTIP",
    "COLORS",
    "COMPARE_TOOLTIP",
    "DIFFERENCE_TOOLTIP",
    "EDGE_TOOLTIP",
    "EMBED_OPTIONS",
    "FOREST_TOOLTIP",
    "MIME",
    "PICKS",
    "SCHEMA",
    "SELECTED",
    "SERIES",
    "SHAPES",
    "VERDICT_COLORS",
    "block_distributions",
    "call_distribution",
    "compare_reductions",
    "edge_trace",
    "paired_blocks",
    "records",
    "reduction_forest",
    "selectors",
]

MIME = "application/vnd.vegalite.v5+json"
SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
WIDTH, HEIGHT = 560, 280  # with its legend, the width of JupyterLab's output area
COLORS = {"baseline": "#cf4520", "fixed": "#1f6fb2", figuredata.NOT_RECORDED: "#8c8c8c"}
SHAPES = {"baseline": "circle", "fixed": "square", figuredata.NOT_RECORDED: "diamond"}
WORKER_SHADE, OUTLIER_WORKER_SHADE, OUTLIER_WORKER_TEXT = "#f0f0f0", "#fbe9c6", "#9a6700"
DRIFT_COLOR, DIFFERS_COLOR = "#8250df", "#bf8700"  # as the PNG's
SERIES = ("#1f6fb2", "#cf4520", "#1a7f37", "#8250df", "#bf8700", "#57606a")  # as the PNG's
VERDICT_COLORS = {
    stats.FASTER: "#1a7f37",
    stats.SLOWER: "#d1242f",
    stats.NO_DIFFERENCE: "#57606a",
}
# The embed options both renderers get (JupyterLab reads them from the output's metadata):
# the export menu, not the links that post the spec to the online Vega editor.
EMBED_OPTIONS: dict[str, Any] = {
    "renderer": "svg",
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}
# Tooltip fields of a block: (column, title, format); a column a run never recorded is
# left out.
BLOCK_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("block", "block", None),
    ("worker", "worker", None),
    ("order", "order (time)", None),
    ("first", "ran first", None),
    ("baseline_us", "baseline µs", ".2f"),
    ("fixed_us", "fixed µs", ".2f"),
    ("reduction_pct", "reduction (%)", ".2f"),
    ("flags", "flags", None),
    ("worker_reason", "outlier worker, why", None),
    ("cpu_mhz", "CPU MHz", ".0f"),
    ("gpu_mhz", "GPU MHz", ".0f"),
    ("canary_us", "canary µs", ".1f"),
)
PICKS = ("worker_pick", "block_pick")


def _plain(value: Any, digits: int | None) -> Any:
    """A JSON value: None for NaN/None, numpy to Python, floats rounded when asked."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if digits is None else round(value, digits)
    return value


def records(
    frame: pd.DataFrame, columns: Sequence[str] | None = None, *, digits: int | None = None
) -> list[dict[str, Any]]:
    """The rows of ``frame`` (only ``columns`` when given) as JSON-able dicts, floats kept
    whole (a tooltip rounds once, as the tables do) unless ``digits`` rounds them."""
    columns = list(columns or frame.columns)
    return [
        {c: _plain(v, digits) for c, v in zip(columns, row, strict=True)}
        for row in frame[columns].itertuples(index=False, name=None)
    ]


def _recorded(frame: pd.DataFrame, column: str) -> bool:
    return (
        column in frame
        and bool(frame[column].notna().any())
        and bool((frame[column].astype(str) != "").any())
    )


def _tooltip(frame: pd.DataFrame, fields: Sequence[tuple[str, str, str | None]]) -> list[dict]:
    out = []
    for column, title, fmt in fields:
        if not _recorded(frame, column):
            continue
        numeric = pd.api.types.is_numeric_dtype(frame[column]) and column != "tokens"
        entry: dict[str, Any] = {
            "field": column,
            "title": title,
            "type": "quantitative" if numeric else "nominal",
        }
        if fmt:
            entry["format"] = fmt
        out.append(entry)
    return out


def selectors(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The case and length menus (``sel_case``, ``sel_tokens``), set to the first case."""
    keys = figuredata.case_keys(frame)
    cases = list(dict.fromkeys(c for c, _ in keys))
    labels = {c: label for c, label in zip(frame["case"], frame["label"], strict=True)}
    lengths = sorted({t for _, t in keys})
    return [
        {
            "name": "sel_case",
            "value": keys[0][0],
            "bind": {
                "input": "select",
                "options": cases,
                "labels": [labels[c] for c in cases],
                "name": "case ",
            },
        },
        {
            "name": "sel_tokens",
            "value": keys[0][1],
            "bind": {"input": "select", "options": lengths, "name": "length (tokens) "},
        },
    ]


SELECTED = "datum.case == sel_case && datum.tokens == sel_tokens"
PICKED = [{"filter": SELECTED}]
ONE = {"values": [{}]}  # the data of a constant mark (the 0 line): drawn once


def _picks() -> list[dict[str, Any]]:
    """Zoom and pan on both axes, and the click selections of a worker and a block."""
    return [
        {"name": "zoom", "select": "interval", "bind": "scales"},
        {
            "name": "worker_pick",
            "select": {"type": "point", "fields": ["worker"], "on": "click", "clear": "dblclick"},
        },
        {
            "name": "block_pick",
            "select": {
                "type": "point",
                "fields": ["case", "tokens", "block"],
                "on": "click",
                "clear": "dblclick",
            },
        },
    ]


def _highlight() -> dict[str, Any]:
    """Opacity and size conditions: the picked worker's blocks stand out, the picked
    block most."""
    return {
        "opacity": {"condition": {"param": "worker_pick", "value": 1.0}, "value": 0.2},
        "size": {"condition": {"param": "block_pick", "empty": False, "value": 260}, "value": 60},
    }


def _chart(title: str, description: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": SCHEMA,
        "title": {"text": title, "anchor": "start", "fontSize": 13},
        "description": description,
        "width": WIDTH,
        "height": HEIGHT,
        "config": {"view": {"stroke": "#ddd"}, "axis": {"grid": True, "gridOpacity": 0.4}},
        **body,
    }


def _note(title: str, description: str, message: str) -> dict[str, Any]:
    """A chart with one line of text where there is nothing to draw."""
    return _chart(
        title,
        description,
        {
            "height": 40,
            "data": {"values": [{"text": message}]},
            "mark": {"type": "text", "align": "left", "x": 0, "y": 20},
            "encoding": {"text": {"field": "text"}},
        },
    )


def _any(frame: pd.DataFrame, column: str) -> bool:
    """Whether any row of ``frame`` draws ``column`` (a layer with none is left out: an
    empty layer makes vega warn of an infinite extent)."""
    return bool(len(frame)) and bool(frame[column].notna().any())


def _q(field: str, **more: Any) -> dict[str, Any]:
    return {"field": field, "type": "quantitative", **more}


# --- the paired blocks --------------------------------------------------------------------


def _worker_layers(spans: pd.DataFrame) -> list[dict[str, Any]]:
    """Behind the blocks: every other worker's span shaded, an outlier worker's in amber,
    each labelled (w0, w1, …; "w2 outlier") at the top, with a tooltip saying why; each
    worker's own reduction as a line over its span."""
    if spans.empty:
        return []
    data = {"values": records(spans)}
    tooltip = [
        {"field": "worker", "title": "worker"},
        {"field": "blocks", "title": "blocks in this span", "type": "quantitative"},
        *_tooltip(spans, [("worker_reason", "outlier worker, why", None)]),
    ]
    layers = [
        {
            "name": "worker_spans",
            "data": data,
            "transform": [*PICKED, {"filter": "datum.shade || datum.outlier_worker"}],
            "mark": {"type": "rect"},
            "encoding": {
                "x": _q("x0"),
                "x2": {"field": "x1"},
                "color": {
                    "condition": {"test": "datum.outlier_worker", "value": OUTLIER_WORKER_SHADE},
                    "value": WORKER_SHADE,
                },
                "tooltip": tooltip,
            },
        },
        {
            "name": "worker_labels",
            "data": data,
            "transform": PICKED,
            "mark": {"type": "text", "baseline": "top", "y": 4, "fontSize": 10},
            "encoding": {
                "x": _q("mid"),
                "text": {"field": "text"},
                "color": {
                    "condition": {"test": "datum.outlier_worker", "value": OUTLIER_WORKER_TEXT},
                    "value": "#555",
                },
                "tooltip": tooltip,
            },
        },
    ]
    if _any(spans, "reduction_pct"):
        layers.append(
            {
                "name": "worker_reductions",
                "data": data,
                "transform": PICKED,
                "mark": {"type": "rule", "color": "#333", "strokeWidth": 1.6},
                "encoding": {
                    "x": _q("line_x0"),
                    "x2": {"field": "line_x1"},
                    "y": _q("reduction_pct"),
                    "tooltip": [
                        {"field": "worker", "title": "worker"},
                        {
                            "field": "reduction_pct",
                            "title": "worker's own reduction (%)",
                            "format": ".2f",
                        },
                    ],
                },
            }
        )
    return layers


def _line_layers(paired: pd.DataFrame, stroke: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines through a case's blocks that ``figuredata.paired_table`` holds: the run's
    reduction (where no worker's own is drawn), each run order's median reduction (order
    effect, in the order's colour) and the reductions' trend (drift)."""
    layers = []
    if _any(paired, "headline_pct"):
        layers.append(
            {
                "name": "headline",
                "transform": PICKED,
                "mark": {"type": "rule", "color": "#333", "strokeWidth": 1.2},
                "encoding": {
                    "y": _q("headline_pct"),
                    "tooltip": [{"field": "headline_pct", "title": "the run's reduction (%)"}],
                },
            }
        )
    if _any(paired, "order_effect_pct"):
        layers.append(
            {
                "name": "order_effect",
                "transform": PICKED,
                "mark": {"type": "rule", "strokeDash": [6, 3], "strokeWidth": 1.2},
                "encoding": {
                    "y": _q("order_effect_pct"),
                    "stroke": stroke,
                    "tooltip": [
                        {"field": "first_label", "title": "ran first"},
                        {
                            "field": "order_effect_pct",
                            "title": "median reduction of its run order (%)",
                            "format": ".2f",
                        },
                    ],
                },
            }
        )
    if _any(paired, "trend_pct"):
        layers.append(
            {
                "name": "trend",
                "transform": PICKED,
                "mark": {"type": "line", "color": DRIFT_COLOR, "strokeDash": [6, 3, 2, 3]},
                "encoding": {
                    "x": _q("order"),
                    "y": _q("trend_pct"),
                    "tooltip": [
                        {"field": "order", "title": "order (time)"},
                        {"field": "trend_pct", "title": "trend (%)", "format": ".2f"},
                    ],
                },
            }
        )
    return layers


def _baseline_layer() -> dict[str, Any]:
    """The baseline's block medians on a right-hand axis (drift detected)."""
    return {
        "name": "baseline_drift",
        "transform": PICKED,
        "mark": {"type": "line", "color": DRIFT_COLOR, "opacity": 0.6, "point": True},
        "encoding": {
            "x": _q("order"),
            "y": _q(
                "baseline_drift_us",
                title="baseline block median (µs), drift detected",
                scale={"zero": False},
                axis={"orient": "right", "titleColor": DRIFT_COLOR, "grid": False},
            ),
            "tooltip": [
                {"field": "order", "title": "order (time)"},
                {"field": "baseline_drift_us", "title": "baseline µs", "format": ".2f"},
            ],
        },
    }


def paired_blocks(
    paired: pd.DataFrame, description: str, spans: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Each block's reduction against its index in time order, for the case and length
    the menus pick; colour and shape: which variant ran first; outlier blocks ringed.
    Behind them each worker's span (``spans``, from ``figuredata.worker_spans``): an
    outlier worker's amber, its blocks hollow, the reason in their tooltips; its own
    reduction as a line. The lines ``paired`` holds (the run's reduction, the order
    effect, the trend, the baseline's drift on a right-hand axis) where it has them."""
    title = "Paired blocks over time: each dot is one block's baseline/fixed pair"
    if paired.empty:
        return _note(title, description, "no complete block in this run")
    first = {
        "field": "first_label",
        "title": "ran first",
        "scale": {"domain": list(COLORS), "range": list(COLORS.values())},
    }
    points = {
        "name": "paired_points",
        "transform": PICKED,
        "mark": {"type": "point", "filled": True, "cursor": "pointer", "strokeWidth": 1.6},
        "params": _picks(),
        "encoding": {
            "x": _q(
                "order",
                title="block (time order)",
                axis={"tickMinStep": 1, "format": "d"},
                scale={"nice": False, "zero": False},
            ),
            "y": _q("reduction_pct", title="block's reduction (%) = 100 × (1 − fixed / baseline)"),
            # an outlier worker's blocks hollow: white inside, ringed in their colour
            "fill": {"condition": {"test": "datum.outlier_worker", "value": "white"}, **first},
            "stroke": first,
            "shape": {
                "field": "first_label",
                "title": "ran first",
                "scale": {"domain": list(SHAPES), "range": list(SHAPES.values())},
            },
            **_highlight(),
            "tooltip": _tooltip(paired, BLOCK_TOOLTIP),
        },
    }
    # every block has a ring, seen only on an outlier block: a case with none draws an
    # empty layer otherwise, which vega warns about (an infinite extent)
    rings = {
        "name": "outlier_rings",
        "transform": PICKED,
        "mark": {"type": "point", "size": 320, "stroke": "black", "strokeWidth": 1.5},
        "encoding": {
            "x": _q("order"),
            "y": _q("reduction_pct"),
            "strokeOpacity": {"condition": {"test": "datum.outlier", "value": 1}, "value": 0},
        },
    }
    zero = {
        "name": "zero",
        "data": ONE,
        "mark": {"type": "rule", "color": "grey", "strokeDash": [2, 2]},
        "encoding": {"y": {"datum": 0}},
    }
    shading = _worker_layers(spans if spans is not None else pd.DataFrame())
    layers = [*shading, zero, *_line_layers(paired, first), rings, points]
    body: dict[str, Any] = {"layer": layers}
    if _any(paired, "baseline_drift_us"):
        body = {
            "layer": [{"layer": layers}, _baseline_layer()],
            "resolve": {"scale": {"y": "independent"}},
        }
    return _chart(
        title,
        description,
        {"params": selectors(paired), "data": {"values": records(paired)}, **body},
    )


# --- box and dots -------------------------------------------------------------------------


def _variant_axis(field: str, title: str = "") -> dict[str, Any]:
    """An x of a variant's position (1 baseline, 2 fixed, the tables' ``x``)."""
    return _q(
        field,
        title=title,
        scale={"domain": [0.5, 2.5]},
        axis={
            "values": [1, 2],
            "labelExpr": "datum.value == 1 ? 'baseline' : 'fixed'",
            "grid": False,
        },
    )


def _variant_color(field: str) -> dict[str, Any]:
    return {
        "field": field,
        "title": "variant",
        "scale": {"domain": list(VARIANTS), "range": [COLORS[v] for v in VARIANTS]},
    }


def block_distributions(paired: pd.DataFrame, description: str) -> dict[str, Any]:
    """Block medians of host latency per variant for the case and length the menus pick,
    each block's two halves joined by a line, each variant's box behind them: the rows of
    ``figuredata.block_halves``, ``block_boxes`` and ``block_whiskers``."""
    title = "Per-block medians: each line joins one block's baseline and fixed halves"
    if paired.empty:
        return _note(title, description, "no complete block in this run")
    halves = figuredata.block_halves(paired)
    boxes = figuredata.block_boxes(paired)
    whiskers = figuredata.block_whiskers(boxes)

    def us(field: str) -> dict[str, Any]:
        return _q(field, title="block median host latency (µs)", scale={"zero": False})

    box_data = {"values": records(boxes)}
    whisker_data = {"values": records(whiskers)}
    grey = {"type": "rule", "color": "#333"}
    layers = [
        {
            "name": "block_boxes",
            "data": box_data,
            "transform": PICKED,
            "mark": {"type": "rect", "opacity": 0.2, "stroke": "black", "strokeWidth": 1},
            "encoding": {
                "x": _variant_axis("left"),
                "x2": {"field": "right"},
                "y": us("q1"),
                "y2": {"field": "q3"},
                "color": _variant_color("variant"),
            },
        },
        {
            "name": "block_whiskers",
            "data": whisker_data,
            "transform": PICKED,
            "mark": grey,
            "encoding": {"x": _variant_axis("x"), "y": us("quartile"), "y2": {"field": "reach"}},
        },
        {
            "name": "block_caps",
            "data": whisker_data,
            "transform": PICKED,
            "mark": grey,
            "encoding": {
                "x": _variant_axis("cap_left"),
                "x2": {"field": "cap_right"},
                "y": us("reach"),
            },
        },
        {
            "name": "block_medians",
            "data": box_data,
            "transform": PICKED,
            "mark": {**grey, "strokeWidth": 2},
            "encoding": {
                "x": _variant_axis("left"),
                "x2": {"field": "right"},
                "y": us("median"),
                "tooltip": [
                    {"field": "variant", "title": "variant"},
                    {"field": "median", "title": "median of the blocks µs", "format": ".2f"},
                    {"field": "q1", "title": "first quartile µs", "format": ".2f"},
                    {"field": "q3", "title": "third quartile µs", "format": ".2f"},
                ],
            },
        },
        {
            "name": "block_pairs",
            "transform": PICKED,
            "mark": {"type": "line", "color": "#9a9a9a", "strokeWidth": 1},
            "encoding": {
                "x": _variant_axis("x"),
                "y": us("us"),
                "detail": {"field": "block"},
                "opacity": {"condition": {"param": "worker_pick", "value": 0.8}, "value": 0.15},
            },
        },
        {
            "name": "distribution_points",
            "transform": PICKED,
            "mark": {"type": "point", "filled": True, "cursor": "pointer"},
            "params": [
                {
                    "name": "zoom",
                    "select": {"type": "interval", "encodings": ["y"]},
                    "bind": "scales",
                },
                *_picks()[1:],
            ],
            "encoding": {
                "x": _variant_axis("x"),
                "y": us("us"),
                "color": _variant_color("half"),
                "stroke": {"condition": {"test": "datum.outlier", "value": "black"}, "value": None},
                **_highlight(),
                "tooltip": [
                    {"field": "half", "title": "variant"},
                    {
                        "field": "us",
                        "title": "this half µs",
                        "type": "quantitative",
                        "format": ".2f",
                    },
                    *_tooltip(halves, BLOCK_TOOLTIP),
                ],
            },
        },
    ]
    return _chart(
        title,
        description,
        {"params": selectors(paired), "data": {"values": records(halves)}, "layer": layers},
    )


# --- the edge traces ----------------------------------------------------------------------

EDGE_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("block", "block", None),
    ("worker", "worker", None),
    ("variant", "variant that ran", None),
    ("edge", "edge of the half", None),
    ("wall_s", "wall time (s)", ".3f"),
    ("cpu_mhz", "CPU MHz", ".0f"),
    ("gpu_mhz", "GPU MHz", ".0f"),
    ("canary_us", "canary µs", ".1f"),
)


def edge_trace(
    edges: pd.DataFrame,
    paired: pd.DataFrame,
    column: str,
    title: str,
    y_title: str,
    description: str,
    *,
    medians: pd.DataFrame | None = None,
    segments: bool = False,
) -> dict[str, Any]:
    """``column`` read at each block half's edge over wall time (``figuredata.trace_table``),
    coloured by the variant that ran (one segment per half when ``segments``), the rows
    it rings ringed, each worker's median as a dashed step when ``medians`` is given; the
    tooltip adds the block's pair (both halves' µs, its reduction, its flags). A case menu
    narrows it to one case or shows all."""
    reads = figuredata.trace_table(edges, paired, column)
    cases = list(dict.fromkeys(c for c, _ in figuredata.case_keys(reads)))
    labels = dict(zip(reads["case"], reads["label"], strict=True))
    color = _variant_color("variant") | {"title": "ran"}
    x = _q("wall_s", title="wall time since the first block (s)")
    y = _q(column, title=y_title, scale={"zero": False})
    tooltip = _tooltip(reads, EDGE_TOOLTIP) + _tooltip(
        reads, [f for f in BLOCK_TOOLTIP if f[0] in figuredata.PAIR_FIELDS]
    )
    layers: list[dict[str, Any]] = []
    if segments:
        layers.append(
            {
                "name": "trace_segments",
                "mark": {"type": "line", "strokeWidth": 1.2},
                "encoding": {
                    "x": x,
                    "y": y,
                    "color": color,
                    "detail": {"field": "key"},
                    "opacity": {"condition": {"param": "worker_pick", "value": 1}, "value": 0.2},
                },
            }
        )
    layers.append(
        {
            "name": "trace_points",
            "mark": {"type": "point", "filled": True, "cursor": "pointer"},
            "params": _picks(),
            "encoding": {
                "x": x,
                "y": y,
                "color": color,
                **{
                    "opacity": {"condition": {"param": "worker_pick", "value": 1.0}, "value": 0.2},
                    "size": {
                        "condition": {"param": "block_pick", "empty": False, "value": 200},
                        "value": 30,
                    },
                },
                "tooltip": tooltip,
            },
        }
    )
    if reads["ring"].any():
        # every read has a ring, seen only where the table rings it (as the outlier rings)
        layers.append(
            {
                "name": "trace_rings",
                "mark": {"type": "point", "size": 80, "stroke": "black", "strokeWidth": 1},
                "encoding": {
                    "x": x,
                    "y": y,
                    "strokeOpacity": {"condition": {"test": "datum.ring", "value": 1}, "value": 0},
                },
            }
        )
    if medians is not None and len(medians):
        layers.append(
            {
                "name": "worker_medians",
                "data": {"values": records(medians)},
                "mark": {"type": "rule", "color": "black", "strokeDash": [4, 3]},
                "encoding": {
                    "x": _q("start_s"),
                    "x2": {"field": "end_s"},
                    "y": _q("median_us"),
                    "tooltip": [
                        {"field": "worker", "title": "worker"},
                        {
                            "field": "median_us",
                            "title": "worker's median canary µs",
                            "format": ".1f",
                        },
                    ],
                },
            }
        )
    menu = {
        "name": "trace_case",
        "value": "all",
        "bind": {
            "input": "select",
            "options": ["all", *cases],
            "labels": ["all cases", *(labels[c] for c in cases)],
            "name": "case ",
        },
    }
    return _chart(
        title,
        description,
        {
            "params": [menu],
            "data": {"values": records(reads)},
            "transform": [{"filter": "trace_case == 'all' || datum.case == trace_case"}],
            "layer": layers,
        },
    )


# --- every call ---------------------------------------------------------------------------

CALL_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("variant", "variant", None),
    ("block", "block", None),
    ("worker", "worker", None),
    ("call", "call in its block", None),
    ("host_us", "host latency µs", ".2f"),
)
CALL_DIGITS = 3  # ns resolution, as the timers: the size of every call of every case
VIOLIN_DIGITS = 3  # a violin's outline: µs to the ns, x to a thousandth of a variant's width


def call_distribution(calls: pd.DataFrame, description: str) -> dict[str, Any]:
    """Every timed call of the case and length the menus pick, per variant, on a log
    axis: nothing clipped (zoom in on the body, out to the tail); behind the dots the
    PNG's violins and medians (``figuredata.call_violins``, ``call_medians``)."""
    title = "Per-call host latency: every call, none clipped"
    if calls.empty:
        return _note(title, description, "no measured calls in this run")
    violins = figuredata.call_violins(calls)
    medians = figuredata.call_medians(calls)

    def y(field: str) -> dict[str, Any]:
        return _q(field, title="host latency per call (µs; log scale)", scale={"type": "log"})

    median_data = {"values": records(medians)}
    layers: list[dict[str, Any]] = []
    if len(violins):
        layers.append(
            {
                "name": "call_violins",
                "data": {"values": records(violins, digits=VIOLIN_DIGITS)},
                "transform": PICKED,
                "mark": {"type": "area", "orient": "horizontal", "opacity": 0.35},
                "encoding": {
                    "y": y("host_us"),
                    "x": _variant_axis("left"),
                    "x2": {"field": "right"},
                    "color": _variant_color("variant"),
                    "detail": {"field": "variant"},
                },
            }
        )
    layers += [
        {
            "name": "call_medians",
            "data": median_data,
            "transform": PICKED,
            "mark": {"type": "rule", "strokeWidth": 2.2},
            "encoding": {
                "x": _variant_axis("left"),
                "x2": {"field": "right"},
                "y": y("median"),
                "color": _variant_color("variant"),
                "tooltip": [
                    {"field": "variant", "title": "variant"},
                    {"field": "median", "title": "median µs", "format": ".2f"},
                    {"field": "note", "title": "calls (PNG range)"},
                ],
            },
        },
        {
            "name": "call_median_labels",
            "data": median_data,
            "transform": PICKED,
            "mark": {"type": "text", "align": "left", "fontSize": 10},
            "encoding": {
                "x": _variant_axis("text_x"),
                "y": y("median"),
                "text": {"field": "text"},
                "color": _variant_color("variant"),
            },
        },
        {
            "name": "call_points",
            "transform": PICKED,
            "mark": {"type": "point", "filled": True, "size": 14},
            "params": [
                {
                    "name": "zoom",
                    "select": {"type": "interval", "encodings": ["y"]},
                    "bind": "scales",
                },
                *_picks()[1:],
            ],
            "encoding": {
                "x": _variant_axis("x"),
                "y": y("host_us"),
                "color": _variant_color("variant"),
                "opacity": {"condition": {"param": "worker_pick", "value": 0.55}, "value": 0.08},
                "tooltip": _tooltip(calls, CALL_TOOLTIP),
            },
        },
    ]
    return _chart(
        title,
        description,
        {
            "params": selectors(calls),
            "data": {"values": records(calls, digits=CALL_DIGITS)},
            "layer": layers,
        },
    )


# --- intervals: the forest and the compare figure ------------------------------------------

FOREST_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("reduction_pct", "reduction (%)", ".2f"),
    ("low", "interval low (%)", ".2f"),
    ("high", "interval high (%)", ".2f"),
    ("verdict", "verdict", None),
    ("method", "interval", None),
    ("aa_low", "A/A low (%)", ".2f"),
    ("aa_high", "A/A high (%)", ".2f"),
)
ROW = "input"  # the y of an interval chart: the row's label
EDGE_INSET = 5  # px: an interval end past the axis is drawn this far inside its edge


def _fit_x(layers: list[dict[str, Any]], scale: dict[str, Any]) -> None:
    """Give every layer's x field the one fitted scale, and clip their marks to it."""
    for layer in layers:
        x = layer.get("encoding", {}).get("x", {})
        if "field" in x:
            x["scale"] = scale
            mark = layer["mark"]
            layer["mark"] = {**(mark if isinstance(mark, dict) else {"type": mark}), "clip": True}


def _axis(rows: pd.DataFrame) -> dict[str, Any]:
    """The x scale of an interval chart: ``figuredata.axis_range`` of its rows (zoom out
    with the wheel for the rest)."""
    lo, hi = figuredata.axis_range(rows)
    return {"domain": [round(lo, 3), round(hi, 3)], "nice": False, "zero": False}


def _off_scale_marks(
    rows: pd.DataFrame, y: dict[str, Any], offset: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The interval ends of ``figuredata.off_scale``, at the chart's edge on their side:
    an arrow, and the end's number beside it."""
    ends = figuredata.off_scale(rows)
    columns = [c for c in (ROW, "series", "run", "side", "text") if c in ends]
    layers = []
    for side, x, align, shape in (
        ("low", EDGE_INSET, "left", "triangle-left"),
        ("high", WIDTH - EDGE_INSET, "right", "triangle-right"),
    ):
        mine = ends[ends["side"] == side]
        if mine.empty:
            continue
        data = {"values": records(mine, columns)}
        encoding: dict[str, Any] = {"y": y, "x": {"value": x}, "color": {"value": "#57606a"}}
        if offset:
            encoding["yOffset"] = offset
        layers += [
            {
                "name": f"off_scale_{side}",
                "data": data,
                "mark": {"type": "point", "shape": shape, "filled": True, "size": 70},
                "encoding": encoding,
            },
            {
                "name": f"off_scale_{side}_labels",
                "data": data,
                "mark": {
                    "type": "text",
                    "dy": -7,
                    "dx": 9 if side == "low" else -9,
                    "fontSize": 10,
                    "align": align,
                },
                "encoding": {**encoding, "text": {"field": "text"}},
            },
        ]
    return layers


def reduction_forest(
    forest: pd.DataFrame, workers: pd.DataFrame, description: str
) -> dict[str, Any]:
    """The reduction per case with the interval the verdict uses, coloured by verdict;
    each worker's own reduction as an open circle; the A/A interval as a grey band; the
    x axis and the interval ends past it from ``figuredata``."""
    title = "Reduction per case with the interval the verdict uses"
    if forest.empty:
        return _note(title, description, "no valid measured case")
    y = {"field": ROW, "type": "nominal", "title": None, "sort": list(forest[ROW])}
    x_title = "host latency reduction (%); positive: fixed is faster"
    color = {
        "field": "verdict",
        "title": "verdict",
        "scale": {"domain": list(VERDICT_COLORS), "range": list(VERDICT_COLORS.values())},
    }
    tooltip = _tooltip(forest, FOREST_TOOLTIP)
    layers: list[dict[str, Any]] = [
        {
            "name": "zero",
            "data": ONE,
            "mark": {"type": "rule", "color": "grey", "strokeDash": [4, 3]},
            "encoding": {"x": {"datum": 0}},
        },
    ]
    if forest["aa_low"].notna().any():
        layers.append(
            {
                "name": "aa",
                "mark": {"type": "bar", "color": "#d0d7de", "opacity": 0.7, "height": 18},
                "encoding": {
                    "y": y,
                    "x": _q("aa_low"),
                    "x2": {"field": "aa_high"},
                    "tooltip": tooltip,
                },
            }
        )
    layers += [
        {
            "name": "forest_intervals",
            "mark": {"type": "rule", "strokeWidth": 3},
            "encoding": {
                "y": y,
                "x": _q("low", title=x_title),
                "x2": {"field": "high"},
                "color": color,
                "tooltip": tooltip,
            },
        },
        {
            "name": "forest_points",
            "mark": {"type": "point", "filled": True, "size": 90},
            "params": [
                {
                    "name": "zoom",
                    "select": {"type": "interval", "encodings": ["x"]},
                    "bind": "scales",
                }
            ],
            "encoding": {
                "y": y,
                "x": _q("reduction_pct", title=x_title),
                "color": color,
                "tooltip": tooltip,
            },
        },
    ]
    if len(workers):
        layers.append(
            {
                "name": "forest_workers",
                "data": {"values": records(workers)},
                "mark": {
                    "type": "point",
                    "filled": False,
                    "size": 40,
                    "color": "#333",
                    "yOffset": 8,
                },
                "encoding": {
                    "y": y,
                    "x": _q("reduction_pct"),
                    "tooltip": [
                        {"field": ROW, "title": "case"},
                        {"field": "worker", "title": "worker"},
                        {
                            "field": "reduction_pct",
                            "title": "worker's own reduction (%)",
                            "format": ".2f",
                        },
                    ],
                },
            }
        )
    _fit_x(layers, _axis(forest))
    return _chart(
        title,
        description,
        {
            "height": max(28 * len(forest), 80),
            "data": {"values": records(forest)},
            "layer": [*layers, *_off_scale_marks(forest, y)],
        },
    )


COMPARE_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("series", "run", None),
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("reduction_pct", "reduction (%)", ".2f"),
    ("low", "interval low (%)", ".2f"),
    ("high", "interval high (%)", ".2f"),
)
DIFFERENCE_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("series", "runs (B − A)", None),
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("reduction_pct", "difference (pp)", ".2f"),
    ("low", "interval low (pp)", ".2f"),
    ("high", "interval high (pp)", ".2f"),
)
DIFFERENCE_WIDTH = 300


def _panel(name: str) -> dict[str, Any]:
    return {"filter": f"datum.panel == '{name}'"}


def _differences(rows: pd.DataFrame, y: dict[str, Any]) -> dict[str, Any]:
    """The difference panel: each same-configuration pair's B − A per case with its
    interval, amber where it excludes 0."""
    pairs = list(dict.fromkeys(rows["series"]))
    offset = {"field": "series", "type": "nominal", "sort": pairs}
    color = {"condition": {"test": "datum.differs", "value": DIFFERS_COLOR}}
    color["value"] = VERDICT_COLORS[stats.NO_DIFFERENCE]
    tooltip = _tooltip(rows, DIFFERENCE_TOOLTIP)
    x_title = "difference B − A (percentage points), 95 % interval"
    return {
        "width": DIFFERENCE_WIDTH,
        "transform": [_panel(figuredata.DIFFERENCE)],
        "layer": [
            {
                "name": "difference_zero",
                "data": ONE,
                "mark": {"type": "rule", "color": "grey", "strokeDash": [4, 3]},
                "encoding": {"x": {"datum": 0}},
            },
            {
                "name": "differences",
                "mark": {"type": "rule", "strokeWidth": 2.2},
                "encoding": {
                    "y": y,
                    "yOffset": offset,
                    "x": _q("low", title=x_title),
                    "x2": {"field": "high"},
                    "color": color,
                    "tooltip": tooltip,
                },
            },
            {
                "name": "difference_points",
                "mark": {"type": "point", "filled": True, "size": 50},
                "encoding": {
                    "y": y,
                    "yOffset": offset,
                    "x": _q("reduction_pct", title=x_title),
                    "color": color,
                    "tooltip": tooltip,
                },
            },
        ],
    }


def compare_reductions(compare: pd.DataFrame, description: str) -> dict[str, Any]:
    """Each run's reduction per case with the verdict's interval, one colour per run; a
    checkbox per run hides it (the axis then fits the runs left); beside it, where runs
    share a configuration, each pair's difference (``figuredata.compare_table``'s two
    panels)."""
    title = "Reduction per case across runs"
    runs = compare[compare["panel"] == figuredata.RUNS] if len(compare) else compare
    if runs.empty:
        return _note(title, description, "no valid rows to compare")
    differences = compare[compare["panel"] == figuredata.DIFFERENCE]
    keys = sorted(
        set(zip(runs["case"], runs["tokens"], runs[ROW], strict=True)),
        key=lambda k: tables.table_order(k[0], int(k[1])),
    )
    names = list(dict.fromkeys(runs["series"]))
    shown = [
        {"name": f"show_{i}", "value": True, "bind": {"input": "checkbox", "name": f"{run} "}}
        for i, run in enumerate(names)
    ]
    visible = {"filter": f"[{', '.join(p['name'] for p in shown)}][datum.run]"}
    y = {"field": ROW, "type": "nominal", "title": None, "sort": [k[2] for k in keys]}
    offset = {"field": "series", "type": "nominal", "sort": names}
    color = {
        "field": "series",
        "type": "nominal",
        "title": "run",
        "sort": names,
        "scale": {"domain": names, "range": [SERIES[i % len(SERIES)] for i in range(len(names))]},
        "legend": {"orient": "bottom", "direction": "vertical", "labelLimit": 600},
    }
    tooltip = _tooltip(runs, COMPARE_TOOLTIP)
    x_title = "host latency reduction (%) with the verdict's 95 % interval"
    layers: list[dict[str, Any]] = [
        {
            "name": "zero",
            "data": ONE,
            "mark": {"type": "rule", "color": "grey", "strokeDash": [4, 3]},
            "encoding": {"x": {"datum": 0}},
        },
        {
            "name": "compare_intervals",
            "mark": {"type": "rule", "strokeWidth": 2},
            "encoding": {
                "y": y,
                "yOffset": offset,
                "x": _q("low", title=x_title),
                "x2": {"field": "high"},
                "color": color,
                "tooltip": tooltip,
            },
        },
        {
            "name": "compare_points",
            "mark": {"type": "point", "filled": True, "size": 60},
            "params": [
                {
                    "name": "zoom",
                    "select": {"type": "interval", "encodings": ["x"]},
                    "bind": "scales",
                },
            ],
            "encoding": {
                "y": y,
                "yOffset": offset,
                "x": _q("reduction_pct", title=x_title),
                "color": color,
                "shape": {
                    "condition": {"test": "isValid(datum.low)", "value": "circle"},
                    "value": "diamond",
                },
                "tooltip": tooltip,
            },
        },
    ]
    _fit_x(layers, _axis(runs))
    ends = _off_scale_marks(runs, y, offset)
    for end in ends:  # hidden with its run
        end["transform"] = [visible]
    step = {"step": 14 * max(len(names), 2)}
    view: dict[str, Any] = {
        "transform": [_panel(figuredata.RUNS), visible],
        "layer": [*layers, *ends],
    }
    if differences.empty:
        body: dict[str, Any] = {"height": step, **view}
    else:  # side by side, of one fixed height: a step would size each view its own way
        height = step["step"] * len(keys)
        beside = {**y, "axis": {"labels": False, "ticks": False}}
        body = {
            "hconcat": [
                {"width": WIDTH, "height": height, **view},
                {"height": height, **_differences(differences, beside)},
            ],
            "resolve": {"scale": {"y": "shared", "color": "independent"}},
        }
    spec = _chart(
        title,
        description,
        {"params": shown, "data": {"values": records(compare)}, **body},
    )
    if "hconcat" in spec:  # a concatenation sizes its views, not itself
        del spec["width"], spec["height"]
    return spec
