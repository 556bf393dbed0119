"""The interactive renderer: Vega-Lite v5 specifications of the report's figures.

Each function takes the tidy table of ``figuredata`` that the static renderer draws too
and returns a plain JSON-able dict: no plotting library, no JavaScript here. JupyterLab 4
renders the specs itself (its built-in ``application/vnd.vegalite.v5+json`` renderer, also
in an untrusted notebook); the offline HTML renders them with the vega, vega-lite and
vega-embed builds inlined once per page (``data/vega``). docs/interactive.md has the
choice and what each view does.

Every view has tooltips with the numbers, zoom and pan (drag, wheel; double-click resets),
and the per-case views one case and one length menu instead of a panel per case. Clicking
a block selects its worker (``worker_pick``) and the block (``block_pick``); the HTML page
carries those selections across its charts.
"""

from __future__ import annotations

import json
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
    "EDGE_TOOLTIP",
    "EMBED_OPTIONS",
    "FOREST_TOOLTIP",
    "MIME",
    "PAIR_FIELDS",
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
COLORS = {"baseline": "#cf4520", "fixed": "#1f6fb2", "not recorded": "#8c8c8c"}
SHAPES = {"baseline": "circle", "fixed": "square", "not recorded": "diamond"}
WORKER_SHADE, OUTLIER_WORKER_SHADE, OUTLIER_WORKER_TEXT = "#f0f0f0", "#fbe9c6", "#9a6700"
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


def _keys(frame: pd.DataFrame) -> list[tuple[str, int]]:
    keys = {(c, int(t)) for c, t in zip(frame["case"], frame["tokens"], strict=True)}
    return sorted(keys, key=lambda k: tables.table_order(*k))


def selectors(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The case and length menus (``sel_case``, ``sel_tokens``), set to the first case."""
    keys = _keys(frame)
    cases = list(dict.fromkeys(c for c, _ in sorted(keys, key=lambda k: tables.table_order(*k))))
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


def _first_label() -> dict[str, Any]:
    return {"calculate": "datum.first ? datum.first : 'not recorded'", "as": "first_label"}


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


def _worker_layers(spans: pd.DataFrame) -> list[dict[str, Any]]:
    """Behind the blocks: every other worker's span shaded, an outlier worker's in amber,
    each labelled (w0, w1, …; "w2 outlier") at the top, with a tooltip saying why."""
    if spans.empty:
        return []
    data = {"values": records(spans)}
    where = [
        {"filter": SELECTED},
        {"calculate": "datum.start - 0.5", "as": "x0"},
        {"calculate": "datum.end + 0.5", "as": "x1"},
        {"calculate": "(datum.start + datum.end) / 2", "as": "mid"},
        {
            "calculate": "'w' + datum.worker + (datum.outlier_worker ? ' outlier' : '')",
            "as": "name",
        },
    ]
    x = {"field": "x0", "type": "quantitative"}
    tooltip = [
        {"field": "worker", "title": "worker"},
        {"field": "blocks", "title": "blocks in this span", "type": "quantitative"},
        *_tooltip(spans, [("worker_reason", "outlier worker, why", None)]),
    ]
    return [
        {
            "name": "worker_spans",
            "data": data,
            "transform": [*where, {"filter": "datum.shade || datum.outlier_worker"}],
            "mark": {"type": "rect"},
            "encoding": {
                "x": x,
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
            "transform": where,
            "mark": {"type": "text", "baseline": "top", "y": 4, "fontSize": 10},
            "encoding": {
                "x": {"field": "mid", "type": "quantitative"},
                "text": {"field": "name"},
                "color": {
                    "condition": {"test": "datum.outlier_worker", "value": OUTLIER_WORKER_TEXT},
                    "value": "#555",
                },
                "tooltip": tooltip,
            },
        },
    ]


def paired_blocks(
    paired: pd.DataFrame, description: str, spans: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Each block's reduction against its index in time order, for the case and length
    the menus pick; colour and shape: which variant ran first; outlier blocks ringed.
    Behind them each worker's span (``spans``, from ``figuredata.worker_spans``): an
    outlier worker's amber, its blocks hollow, the reason in their tooltips."""
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
        "transform": [{"filter": SELECTED}, _first_label()],
        "mark": {"type": "point", "filled": True, "cursor": "pointer", "strokeWidth": 1.6},
        "params": _picks(),
        "encoding": {
            "x": {
                "field": "order",
                "type": "quantitative",
                "title": "block (time order)",
                "axis": {"tickMinStep": 1, "format": "d"},
                "scale": {"nice": False, "zero": False},
            },
            "y": {
                "field": "reduction_pct",
                "type": "quantitative",
                "title": "block's reduction (%) = 100 × (1 − fixed / baseline)",
            },
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
        "transform": [{"filter": SELECTED}],
        "mark": {"type": "point", "size": 320, "stroke": "black", "strokeWidth": 1.5},
        "encoding": {
            "x": {"field": "order", "type": "quantitative"},
            "y": {"field": "reduction_pct", "type": "quantitative"},
            "strokeOpacity": {"condition": {"test": "datum.outlier", "value": 1}, "value": 0},
        },
    }
    zero = {
        "mark": {"type": "rule", "color": "grey", "strokeDash": [2, 2]},
        "encoding": {"y": {"datum": 0}},
    }
    shading = _worker_layers(spans if spans is not None else pd.DataFrame())
    return _chart(
        title,
        description,
        {
            "params": selectors(paired),
            "data": {"values": records(paired)},
            "layer": [*shading, zero, rings, points],
        },
    )


def _position(field: str = "half") -> dict[str, Any]:
    """x at 1 (baseline) or 2 (fixed), a block's two halves at the same small offset."""
    return {
        "calculate": f"(datum.{field} == 'baseline' ? 1 : 2)"
        " + ((datum.block * 37) % 11 / 10 - 0.5) * 0.3",
        "as": "x",
    }


def _variant_axis(title: str = "") -> dict[str, Any]:
    return {
        "field": "x",
        "type": "quantitative",
        "title": title,
        "scale": {"domain": [0.5, 2.5]},
        "axis": {
            "values": [1, 2],
            "labelExpr": "datum.value == 1 ? 'baseline' : 'fixed'",
            "grid": False,
        },
    }


def _boxes(value: str) -> list[dict[str, Any]]:
    """Per variant: a bar from the first to the third quartile of ``value``, and its
    median as a line."""
    aggregate = {
        "aggregate": [
            {"op": "q1", "field": value, "as": "q1"},
            {"op": "median", "field": value, "as": "median"},
            {"op": "q3", "field": value, "as": "q3"},
        ],
        "groupby": ["half"],
    }
    centre = {"calculate": "datum.half == 'baseline' ? 1 : 2", "as": "x"}
    color = {
        "field": "half",
        "title": "variant",
        "scale": {"domain": list(VARIANTS), "range": [COLORS[v] for v in VARIANTS]},
    }
    return [
        {
            "transform": [aggregate, centre],
            "mark": {"type": "bar", "size": 60, "opacity": 0.18},
            "encoding": {
                "x": _variant_axis(),
                "y": {"field": "q1", "type": "quantitative"},
                "y2": {"field": "q3"},
                "color": color,
            },
        },
        {
            "transform": [
                aggregate,
                {"calculate": "(datum.half == 'baseline' ? 1 : 2) - 0.3", "as": "x"},
                {"calculate": "datum.x + 0.6", "as": "x2"},
            ],
            "mark": {"type": "rule", "color": "#333", "strokeWidth": 2},
            "encoding": {
                "x": _variant_axis(),
                "x2": {"field": "x2"},
                "y": {"field": "median", "type": "quantitative"},
            },
        },
    ]


def block_distributions(paired: pd.DataFrame, description: str) -> dict[str, Any]:
    """Block medians of host latency per variant for the case and length the menus pick,
    each block's two halves joined by a line, the quartiles behind them."""
    title = "Per-block medians: each line joins one block's baseline and fixed halves"
    if paired.empty:
        return _note(title, description, "no complete block in this run")
    us = {
        "field": "us",
        "type": "quantitative",
        "title": "block median host latency (µs)",
        "scale": {"zero": False},
    }
    color = {
        "field": "half",
        "title": "variant",
        "scale": {"domain": list(VARIANTS), "range": [COLORS[v] for v in VARIANTS]},
    }
    lines = {
        "mark": {"type": "line", "color": "#9a9a9a", "strokeWidth": 1},
        "encoding": {
            "x": _variant_axis(),
            "y": us,
            "detail": {"field": "block"},
            "opacity": {"condition": {"param": "worker_pick", "value": 0.8}, "value": 0.15},
        },
    }
    points = {
        "name": "distribution_points",
        "mark": {"type": "point", "filled": True, "cursor": "pointer"},
        "params": [
            {"name": "zoom", "select": {"type": "interval", "encodings": ["y"]}, "bind": "scales"},
            *_picks()[1:],
        ],
        "encoding": {
            "x": _variant_axis(),
            "y": us,
            "color": color,
            "stroke": {"condition": {"test": "datum.outlier", "value": "black"}, "value": None},
            **_highlight(),
            "tooltip": [
                {"field": "half", "title": "variant"},
                {"field": "us", "title": "this half µs", "type": "quantitative", "format": ".2f"},
                *_tooltip(paired, BLOCK_TOOLTIP),
            ],
        },
    }
    return _chart(
        title,
        description,
        {
            "params": selectors(paired),
            "data": {"values": records(paired)},
            "transform": [
                {"filter": SELECTED},
                _first_label(),
                {"fold": [f"{v}_us" for v in VARIANTS], "as": ["half_column", "us"]},
                {"calculate": "replace(datum.half_column, '_us', '')", "as": "half"},
                _position(),
            ],
            "layer": [*_boxes("us"), lines, points],
        },
    )


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
PAIR_FIELDS = ("order", "baseline_us", "fixed_us", "reduction_pct", "flags")


def _key(frame: pd.DataFrame) -> pd.Series:
    return frame["case"] + "|" + frame["tokens"].astype(str) + "|" + frame["block"].astype(str)


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
    """``column`` read at each block half's edge over wall time, coloured by the variant
    that ran (one segment per half when ``segments``), each worker's median as a dashed
    step when ``medians`` is given; the tooltip adds the block's pair (both halves' µs,
    its reduction, its flags). A case menu narrows it to one case or shows all."""
    reads = edges[edges[column].notna()].copy()
    reads["key"] = _key(reads)
    pairs = paired.copy()
    pairs["key"] = _key(pairs) if len(pairs) else []
    cases = list(dict.fromkeys(c for c, _ in _keys(reads)))
    labels = dict(zip(reads["case"], reads["label"], strict=True))
    color = {
        "field": "variant",
        "title": "ran",
        "scale": {"domain": list(VARIANTS), "range": [COLORS[v] for v in VARIANTS]},
    }
    x = {"field": "wall_s", "type": "quantitative", "title": "wall time since the first block (s)"}
    y = {"field": column, "type": "quantitative", "title": y_title, "scale": {"zero": False}}
    tooltip = _tooltip(reads, EDGE_TOOLTIP) + _tooltip(
        paired, [f for f in BLOCK_TOOLTIP if f[0] in PAIR_FIELDS]
    )
    layers: list[dict[str, Any]] = []
    if segments:
        layers.append(
            {
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
                "stroke": {
                    "condition": {"test": "datum.frequency_flag", "value": "black"},
                    "value": None,
                },
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
    if medians is not None and len(medians):
        layers.append(
            {
                "data": {"values": records(medians)},
                "mark": {"type": "rule", "color": "black", "strokeDash": [4, 3]},
                "encoding": {
                    "x": {"field": "start_s", "type": "quantitative"},
                    "x2": {"field": "end_s"},
                    "y": {"field": "median_us", "type": "quantitative"},
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
            "transform": [
                {"filter": "trace_case == 'all' || datum.case == trace_case"},
                {
                    "lookup": "key",
                    "from": {
                        "data": {"values": records(pairs, ["key", *PAIR_FIELDS])},
                        "key": "key",
                        "fields": list(PAIR_FIELDS),
                    },
                },
            ],
            "layer": layers,
        },
    )


CALL_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("variant", "variant", None),
    ("block", "block", None),
    ("worker", "worker", None),
    ("call", "call in its block", None),
    ("host_us", "host latency µs", ".2f"),
)


def call_distribution(calls: pd.DataFrame, description: str) -> dict[str, Any]:
    """Every timed call of the case and length the menus pick, per variant, on a log
    axis: nothing clipped (zoom in on the body, out to the tail); the quartiles and the
    median behind the dots."""
    title = "Per-call host latency: every call, none clipped"
    if calls.empty:
        return _note(title, description, "no measured calls in this run")
    y = {
        "field": "host_us",
        "type": "quantitative",
        "title": "host latency per call (µs; log scale)",
        "scale": {"type": "log"},
    }
    color = {
        "field": "half",
        "title": "variant",
        "scale": {"domain": list(VARIANTS), "range": [COLORS[v] for v in VARIANTS]},
    }
    points = {
        "name": "call_points",
        "mark": {"type": "point", "filled": True, "size": 14},
        "params": [
            {"name": "zoom", "select": {"type": "interval", "encodings": ["y"]}, "bind": "scales"},
            *_picks()[1:],
        ],
        "encoding": {
            "x": _variant_axis(),
            "y": y,
            "color": color,
            "opacity": {"condition": {"param": "worker_pick", "value": 0.55}, "value": 0.08},
            "tooltip": _tooltip(calls, CALL_TOOLTIP),
        },
    }
    boxes = _boxes("host_us")
    for layer in boxes:
        layer["encoding"]["y"] = {**layer["encoding"]["y"], "scale": {"type": "log"}}
    return _chart(
        title,
        description,
        {
            "params": selectors(calls),
            # ns resolution, as the timers: the size of every call of every case
            "data": {"values": records(calls, digits=3)},
            "transform": [
                {"filter": SELECTED},
                {"calculate": "datum.variant", "as": "half"},
                {
                    "calculate": "(datum.half == 'baseline' ? 1 : 2)"
                    " + ((datum.block * 7 + datum.call * 13) % 17 / 16 - 0.5) * 0.5",
                    "as": "x",
                },
            ],
            "layer": [points, *boxes],
        },
    )


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


def reduction_forest(
    forest: pd.DataFrame, workers: pd.DataFrame, description: str
) -> dict[str, Any]:
    """The reduction per case with the interval the verdict uses, coloured by verdict;
    each worker's own reduction as an open circle; the A/A interval as a grey band."""
    title = "Reduction per case with the interval the verdict uses"
    if forest.empty:
        return _note(title, description, "no valid measured case")
    several = forest["tokens"].nunique() > 1
    rows = forest.copy()
    rows["row"] = [
        tables.input_label(c, t, several) for c, t in zip(rows["case"], rows["tokens"], strict=True)
    ]
    order = list(rows["row"])
    units = workers.copy()
    units["row"] = (
        [
            tables.input_label(c, t, several)
            for c, t in zip(units["case"], units["tokens"], strict=True)
        ]
        if len(units)
        else []
    )
    y = {"field": "row", "type": "nominal", "title": None, "sort": order}
    x = {
        "field": "reduction_pct",
        "type": "quantitative",
        "title": "host latency reduction (%); positive: fixed is faster",
    }
    color = {
        "field": "verdict",
        "title": "verdict",
        "scale": {"domain": list(VERDICT_COLORS), "range": list(VERDICT_COLORS.values())},
    }
    tooltip = _tooltip(rows, FOREST_TOOLTIP)
    scale, ends = _off_scale_marks(rows, y)
    x["scale"] = scale
    layers: list[dict[str, Any]] = [
        {
            "mark": {"type": "rule", "color": "grey", "strokeDash": [4, 3]},
            "encoding": {"x": {"datum": 0}},
        },
    ]
    if rows["aa_low"].notna().any():
        layers.append(
            {
                "transform": [{"filter": "isValid(datum.aa_low)"}],
                "mark": {"type": "bar", "color": "#d0d7de", "opacity": 0.7, "height": 18},
                "encoding": {
                    "y": y,
                    "x": {"field": "aa_low", "type": "quantitative"},
                    "x2": {"field": "aa_high"},
                    "tooltip": tooltip,
                },
            }
        )
    layers += [
        {
            "mark": {"type": "rule", "strokeWidth": 3, "clip": True},
            "encoding": {
                "y": y,
                "x": {"field": "low", "type": "quantitative", "title": x["title"], "scale": scale},
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
            "encoding": {"y": y, "x": x, "color": color, "tooltip": tooltip},
        },
    ]
    if len(units):
        layers.append(
            {
                "data": {"values": records(units)},
                "mark": {
                    "type": "point",
                    "filled": False,
                    "size": 40,
                    "color": "#333",
                    "yOffset": 8,
                },
                "encoding": {
                    "y": y,
                    "x": {"field": "reduction_pct", "type": "quantitative"},
                    "tooltip": [
                        {"field": "row", "title": "case"},
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
    _fit_x(layers, scale)
    layers += ends
    return _chart(
        title,
        description,
        {"height": max(28 * len(rows), 80), "data": {"values": records(rows)}, "layer": layers},
    )


def _fit_x(layers: list[dict[str, Any]], scale: dict[str, Any]) -> None:
    """Give every layer's x field the one fitted scale, and clip their marks to it."""
    for layer in layers:
        x = layer.get("encoding", {}).get("x", {})
        if "field" in x:
            x["scale"] = scale
            mark = layer["mark"]
            layer["mark"] = {**(mark if isinstance(mark, dict) else {"type": mark}), "clip": True}


def _off_scale_marks(
    rows: pd.DataFrame, y: dict[str, Any], offset: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The x scale of an interval chart, fit to ``figuredata.axis_range`` (zoom out with
    the wheel for the rest), and a text mark at the chart's edge for each interval end
    beyond it: an arrow and the end's number."""
    lo, hi = figuredata.axis_range(rows)
    scale = {"domain": [round(lo, 3), round(hi, 3)], "nice": False, "zero": False}
    ends = figuredata.off_scale(rows, lo, hi)
    if ends.empty:
        return scale, []
    marks = rows.loc[ends["row"]].reset_index(drop=True)
    marks["side"] = list(ends["side"])
    marks["end_text"] = [
        f"◀ {v:.1f} %" if side == "low" else f"{v:.1f} % ▶"
        for side, v in zip(ends["side"], ends["value"], strict=True)
    ]
    columns = [c for c in ("row", "series", "side", "end_text") if c in marks]
    layers = []
    for side, x, align in (("low", 2, "left"), ("high", WIDTH - 2, "right")):
        mine = marks[marks["side"] == side]
        if mine.empty:
            continue
        encoding: dict[str, Any] = {
            "y": y,
            "text": {"field": "end_text"},
            "x": {"value": x},
        }
        if offset:
            encoding["yOffset"] = offset
        layers.append(
            {
                "name": f"off_scale_{side}",
                "data": {"values": records(mine, columns)},
                "mark": {"type": "text", "dy": -7, "fontSize": 10, "align": align},
                "encoding": {**encoding, "color": {"value": "#57606a"}},
            }
        )
    return scale, layers


COMPARE_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("series", "run", None),
    ("label", "case", None),
    ("tokens", "length (tokens)", None),
    ("reduction_pct", "reduction (%)", ".2f"),
    ("low", "interval low (%)", ".2f"),
    ("high", "interval high (%)", ".2f"),
)


def compare_reductions(compare: pd.DataFrame, description: str) -> dict[str, Any]:
    """Each run's reduction per case with the verdict's interval, one colour per run; a
    checkbox per run hides it (the axis then fits the runs left)."""
    title = "Reduction per case across runs"
    if compare.empty:
        return _note(title, description, "no valid rows to compare")
    several = compare["tokens"].nunique() > 1
    rows = compare.copy()
    rows["row"] = [
        tables.input_label(c, t, several) for c, t in zip(rows["case"], rows["tokens"], strict=True)
    ]
    keys = sorted(
        set(zip(rows["case"], rows["tokens"], strict=True)), key=lambda k: tables.table_order(*k)
    )
    order = [tables.input_label(c, t, several) for c, t in keys]
    runs = list(dict.fromkeys(rows["series"]))
    rows["run"] = [runs.index(series) for series in rows["series"]]
    shown = [
        {"name": f"show_{i}", "value": True, "bind": {"input": "checkbox", "name": f"{run} "}}
        for i, run in enumerate(runs)
    ]
    y = {"field": "row", "type": "nominal", "title": None, "sort": order}
    offset = {"field": "series", "type": "nominal", "sort": runs}
    color = {
        "field": "series",
        "type": "nominal",
        "title": "run",
        "sort": runs,
        "scale": {"domain": runs, "range": [SERIES[i % len(SERIES)] for i in range(len(runs))]},
        "legend": {"orient": "bottom", "direction": "vertical", "labelLimit": 600},
    }
    tooltip = _tooltip(rows, COMPARE_TOOLTIP)
    x_title = "host latency reduction (%) with the verdict's 95 % interval"
    scale, ends = _off_scale_marks(rows, y, offset)
    layers: list[dict[str, Any]] = [
        {
            "mark": {"type": "rule", "color": "grey", "strokeDash": [4, 3]},
            "encoding": {"x": {"datum": 0}},
        },
        {
            "transform": [{"filter": "isValid(datum.low)"}],
            "mark": {"type": "rule", "strokeWidth": 2},
            "encoding": {
                "y": y,
                "yOffset": offset,
                "x": {"field": "low", "type": "quantitative", "title": x_title},
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
                "x": {"field": "reduction_pct", "type": "quantitative", "title": x_title},
                "color": color,
                "shape": {
                    "condition": {"test": "isValid(datum.low)", "value": "circle"},
                    "value": "diamond",
                },
                "tooltip": tooltip,
            },
        },
    ]
    _fit_x(layers, scale)
    for end in ends:  # hidden with its run
        end["transform"] = [
            {"calculate": f"indexof({json.dumps(runs)}, datum.series)", "as": "run"},
            {"filter": f"[{', '.join(p['name'] for p in shown)}][datum.run]"},
        ]
    return _chart(
        title,
        description,
        {
            "height": {"step": 14 * max(len(runs), 2)},
            "params": shown,
            "data": {"values": records(rows)},
            "transform": [{"filter": f"[{', '.join(p['name'] for p in shown)}][datum.run]"}],
            "layer": [*layers, *ends],
        },
    )
