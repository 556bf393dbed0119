"""The interactive renderer's charts of the per-call ledger (work.json): Vega-Lite v5 specs
of the tables ``workfigures`` draws as PNGs, with ``interactive``'s conventions (one
title and config, tooltips, zoom, named layers whose transforms only filter rows).

- ``work_disagreement``: each case's wall-time reduction with its interval against its
  counted work reduction, the y = x diagonal, both axes the diagonal's limits; a click on
  a point picks its case (``op_pick``), which the offline page carries to the operators'
  chart;
- ``operator_drilldown``: on the left each case's bytes moved per call, a bar per form;
  clicking one picks the case (``op_pick``: the operators on the right are that case's)
  and the form (``form_pick``: the other form's bars fade; double-click shows both).

No plotting library, no JavaScript here (docs/interactive.md).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from embedbench.cases import VARIANTS
from embedbench.report import interactive
from embedbench.report.interactive import COLORS, VERDICT_COLORS, records

__all__ = [
    "DISAGREEMENT_TOOLTIP",
    "FORM_PICK",
    "OPERATOR_CASE_TOOLTIP",
    "OPERATOR_PICK",
    "OPERATOR_TOOLTIP",
    "SHAPES",
    "operator_drilldown",
    "work_disagreement",
]

OPERATOR_PICK = "op_pick"  # the picked case: fields case and tokens
FORM_PICK = "form_pick"  # the picked form: field variant
SHAPES = {"bytes moved": "circle", "instructions": "square"}  # as workfigures.MARKERS
_q = interactive._q  # a quantitative field's encoding
SIDE = 440  # the disagreement chart is square: both axes share the diagonal's limits
DISAGREEMENT_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("input", "case", None),
    ("measure", "work counted", None),
    ("work_reduction_pct", "work reduction (%)", ".2f"),
    ("baseline_work", "baseline work per call", ",.0f"),
    ("fixed_work", "fixed work per call", ",.0f"),
    ("reduction_pct", "wall-time reduction (%)", ".2f"),
    ("low", "interval low (%)", ".2f"),
    ("high", "interval high (%)", ".2f"),
    ("gap_pp", "time − work (pp); below 0: under the diagonal", ".2f"),
    ("verdict", "verdict", None),
)
OPERATOR_CASE_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("input", "case", None),
    ("variant", "form", None),
    ("moved", "bytes moved per call", ",.0f"),
    ("operators", "operator calls per call", None),
)
OPERATOR_TOOLTIP: tuple[tuple[str, str, str | None], ...] = (
    ("input", "case", None),
    ("variant", "form", None),
    ("op", "operator", None),
    ("calls", "calls per call", None),
    ("read", "bytes read", ",.0f"),
    ("written", "bytes written", ",.0f"),
    ("moved", "bytes moved", ",.0f"),
)


def _pick(first: dict[str, Any] | None = None) -> dict[str, Any]:
    """The case pick: one case at a time, kept until another is clicked (``first``: the
    case it starts on)."""
    select = {
        "type": "point",
        "fields": ["case", "tokens"],
        "on": "click",
        "clear": False if first else "dblclick",
        "toggle": False,
    }
    param: dict[str, Any] = {"name": OPERATOR_PICK, "select": select}
    if first:
        param["value"] = [first]
    return param


def _verdict_color() -> dict[str, Any]:
    return {
        "field": "verdict",
        "title": "verdict",
        "scale": {"domain": list(VERDICT_COLORS), "range": list(VERDICT_COLORS.values())},
    }


def work_disagreement(
    table: pd.DataFrame, diagonal: pd.DataFrame, description: str
) -> dict[str, Any]:
    """Each case's wall-time reduction (y) with the verdict's interval against its work
    reduction (x), coloured by verdict, a shape per measure, labelled by case; the y = x
    diagonal from ``figuredata.diagonal_table``, whose ends are both axes' limits."""
    title = "Work against time: each case's wall-time reduction against its work reduction"
    if table.empty:
        return interactive._note(title, description, "no case with a ledger and an interval")
    lo, hi = (round(float(v), 3) for v in (diagonal["x"].iloc[0], diagonal["x"].iloc[-1]))
    scale = {"domain": [lo, hi], "nice": False, "zero": False}
    x_title = "work reduction (%): 1 − fixed / baseline of the counted work"
    y_title = "wall-time reduction (%) with the verdict's interval"
    x = _q("work_reduction_pct", title=x_title, scale=scale)
    y = _q("reduction_pct", title=y_title, scale=scale)
    tooltip = interactive._tooltip(table, DISAGREEMENT_TOOLTIP)
    measures = list(dict.fromkeys(table["measure"]))
    shape = {
        "field": "measure",
        "title": "work counted",
        "scale": {"domain": measures, "range": [SHAPES[m] for m in measures]},
    }
    layers: list[dict[str, Any]] = [
        {
            "name": "diagonal",
            "data": {"values": records(diagonal)},
            "mark": {"type": "line", "color": "#8c8c8c", "strokeDash": [6, 4], "clip": True},
            "encoding": {
                "x": _q("x", scale=scale),
                "y": _q("y", scale=scale),
            },
        },
        {
            "name": "disagreement_intervals",
            "mark": {"type": "rule", "strokeWidth": 2, "opacity": 0.7, "clip": True},
            "encoding": {
                "x": x,
                "y": _q("low", scale=scale),
                "y2": {"field": "high"},
                "color": _verdict_color(),
                "tooltip": tooltip,
            },
        },
        {
            "name": "disagreement_points",
            "mark": {"type": "point", "filled": True, "cursor": "pointer", "clip": True},
            "params": [
                {"name": "zoom", "select": "interval", "bind": "scales"},
                _pick(),
            ],
            "encoding": {
                "x": x,
                "y": y,
                "color": _verdict_color(),
                "shape": shape,
                "size": {
                    "condition": {"param": OPERATOR_PICK, "empty": False, "value": 200},
                    "value": 70,
                },
                "tooltip": tooltip,
            },
        },
    ]
    for side, align, dx in (("right", "left", 7), ("left", "right", -7)):
        layers.append(
            {
                "name": f"disagreement_labels_{side}",
                "transform": [{"filter": f"datum.labelled && datum.label_side == '{side}'"}],
                "mark": {"type": "text", "align": align, "dx": dx, "dy": -5, "fontSize": 10},
                "encoding": {"x": x, "y": y, "text": {"field": "input"}, "tooltip": tooltip},
            }
        )
    spec = interactive._chart(
        title,
        description,
        {"data": {"values": records(table)}, "layer": layers},
    )
    spec["width"] = spec["height"] = SIDE
    return spec


def operator_drilldown(
    operators: pd.DataFrame, cases: pd.DataFrame, description: str
) -> dict[str, Any]:
    """Left: each case's bytes moved per call, a bar per form (``cases``:
    ``figuredata.operator_cases``). Right: the operators of the case clicked on the left
    (``op_pick``, the first case until then), a bar per form of the bytes each moves
    (``operators``: ``figuredata.operator_table``), the other form faded once a form is
    clicked (``form_pick``); tooltips with the calls and bytes read and written."""
    title = "Operators per call: click a case's bar to list its operators"
    if operators.empty or cases.empty:
        return interactive._note(title, description, "no per-call ledger in this run")
    first = cases.iloc[0]
    case_rows = list(dict.fromkeys(cases["input"]))
    labels = list(operators.sort_values(["rank", "op_label"])["op_label"].drop_duplicates())
    color = {
        "field": "variant",
        "title": "form",
        "scale": {"domain": list(VARIANTS), "range": [COLORS[v] for v in VARIANTS]},
        "legend": {"orient": "bottom"},  # the right of the operators is their labels'
    }
    offset = {"field": "variant", "sort": list(VARIANTS)}
    # Bytes as the PNG's ticks write them; the bars' own labels reach past the longest.
    label = "datum.value == 0 ? '0' : format(datum.value / 1e6, '~g') + ' MB'"
    moved = {"axis": {"labelExpr": label, "tickCount": 4}}
    form = {
        "name": FORM_PICK,
        "select": {"type": "point", "fields": ["variant"], "on": "click", "clear": "dblclick"},
    }
    left = {
        "width": 200,
        "height": {"step": 26},
        "data": {"values": records(cases)},
        "layer": [
            {
                "name": "operator_cases",
                "mark": {"type": "bar", "cursor": "pointer"},
                "params": [_pick({"case": first["case"], "tokens": int(first["tokens"])}), form],
                "encoding": {
                    "y": {"field": "input", "type": "nominal", "title": None, "sort": case_rows},
                    "yOffset": offset,
                    "x": _q("moved", title="bytes moved per call", **moved),
                    "x2": {"field": "start"},
                    "color": color,
                    "opacity": {
                        "condition": {"param": OPERATOR_PICK, "empty": False, "value": 1.0},
                        "value": 0.35,
                    },
                    "tooltip": interactive._tooltip(cases, OPERATOR_CASE_TOOLTIP),
                },
            }
        ],
    }
    fade = {"condition": {"param": FORM_PICK, "value": 1.0}, "value": 0.25}
    picked = [{"filter": {"param": OPERATOR_PICK, "empty": False}}]
    y = {"field": "op_label", "type": "nominal", "title": None, "sort": labels}
    right = {
        "width": 300,
        "height": {"step": 30},
        "data": {"values": records(operators)},
        "transform": picked,
        "layer": [
            {
                "name": "operator_bars",
                "mark": {"type": "bar"},
                "params": [
                    {
                        "name": "zoom",
                        "select": {"type": "interval", "encodings": ["x"]},
                        "bind": "scales",
                    }
                ],
                "encoding": {
                    "y": y,
                    "yOffset": offset,
                    "x": _q("moved", title="bytes moved by the operator", **moved),
                    "x2": {"field": "start"},
                    "color": color,
                    "opacity": fade,
                    "tooltip": interactive._tooltip(operators, OPERATOR_TOOLTIP),
                },
            },
            *(
                {
                    "name": f"operator_values_{where}",
                    "transform": [{"filter": f"datum.label_at == '{where}'"}],
                    "mark": {
                        "type": "text",
                        "align": "right" if inside else "left",
                        "dx": -3 if inside else 3,
                        "fontSize": 9,
                        "color": "white" if inside else "#333",
                    },
                    "encoding": {
                        "y": y,
                        "yOffset": offset,
                        "x": _q("moved"),
                        "text": {"field": "moved_text"},
                        "opacity": fade,
                    },
                }
                for where, inside in (("inside", True), ("outside", False))
            ),
        ],
    }
    spec = interactive._chart(
        title,
        description,
        {
            "hconcat": [left, right],
            "resolve": {"scale": {"x": "independent", "y": "independent"}},
        },
    )
    del spec["width"], spec["height"]  # a concatenation sizes its views, not itself
    return spec
