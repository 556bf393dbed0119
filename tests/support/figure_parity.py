"""Reading a view back on both sides, to compare what its PNG and its chart draw
(tests/test_interactive.py, "The PNG and the chart, mark by mark").

Each view (``views.View``: the matplotlib figure and the Vega-Lite spec of one figure) is
read back panel by panel:

- the chart: each named layer's rows (its own data, or its parent's through the parent's
  transforms), the rows its filters keep with the menus set to the panel's case (every
  run's checkbox ticked, the trace's menu on all cases; a filter on a click's pick, such
  as the operators' ``op_pick``, keeps the panel's case), less the rows an opacity
  condition hides or whose positions are missing, as the points its encoding puts them
  at (a rule from ``x`` to ``x2`` is both ends; a pixel position is no data);
- the PNG: every artist of the panel's axes, whose ``gid`` names the chart layer that
  draws the same rows (``name`` or ``name:detail``), as the points it draws in data
  coordinates (a categorical y read as its tick's label).

``problems`` says where the two sets differ for a layer, where an artist carries no
such gid, where a chart computes (a transform other than a filter) and where a chart's
data are not rows of a table ``figuredata`` builds. What one renderer cannot draw is
listed in ``CHART_ONLY`` with the reason docs/interactive.md gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import Collection, PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Annotation, Text

from embedbench.report import figuredata, interactive, views
from embedbench.report.results import RunResult

# Drawn by one renderer only, and why (docs/interactive.md, "What each renderer draws").
CHART_ONLY = {
    "call_points": "every call, each with its tooltip; the PNG summarises them as violins",
    "operator_cases": "the case picker of the operators' chart; the PNG has a panel per case",
}
POSITION = ("x", "x2", "y", "y2")
HIDING = ("opacity", "strokeOpacity", "fillOpacity")
ATOL = 1e-3  # the chart keeps the calls and the violins' outlines to 3 decimals
Point = tuple[Any, ...]


def run_tables(result: RunResult) -> list[pd.DataFrame]:
    """Every table ``figuredata`` builds for one run's figures (a chart's data must be
    rows of one of them)."""
    paired = figuredata.paired_table(result)
    edges = figuredata.edge_table(result)
    calls = figuredata.call_table(result)
    forest = figuredata.forest_table(result)
    boxes = figuredata.block_boxes(paired)
    disagreement = figuredata.disagreement_table(result)
    return [
        paired,
        figuredata.worker_spans(paired),
        figuredata.block_halves(paired),
        boxes,
        figuredata.block_whiskers(boxes),
        calls,
        figuredata.call_violins(calls),
        figuredata.call_medians(calls),
        *(figuredata.trace_table(edges, paired, c) for c in ("cpu_mhz", "gpu_mhz", "canary_us")),
        figuredata.worker_medians(result),
        forest,
        figuredata.forest_workers(result),
        figuredata.off_scale(forest),
        disagreement,
        figuredata.diagonal_table(disagreement),
        figuredata.operator_table(result),
        figuredata.operator_cases(result),
    ]


# --- the chart ----------------------------------------------------------------------------


class _Datum(dict):
    """A row in an expression: a column it lacks reads as None (JavaScript's undefined)."""

    def __missing__(self, key: str) -> None:
        return None


def _is_valid(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def evaluate(expression: str, row: Mapping[str, Any], env: Mapping[str, Any]) -> bool:
    """A Vega expression of the kinds the specs use (``datum.x``, ``==``, ``&&``, ``||``,
    ``isValid``, ``[a, b][datum.run]``), evaluated in Python; anything else raises."""
    code = re.sub(r"\bdatum\.(\w+)", r'datum["\1"]', expression)
    code = re.sub(r"\[([\w, ]+)\]\[(.+?)\]\]", r"pick([\1], \2])", code)
    code = code.replace("&&", " and ").replace("||", " or ").replace("isValid(", "valid(")
    scope = {
        **env,
        "datum": _Datum(row),
        "valid": _is_valid,
        "pick": lambda items, i: _is_valid(i) and bool(items[int(i)]),
    }
    return bool(eval(code, {"__builtins__": {}}, scope))  # the specs' own filters


def keeps(transform: Mapping[str, Any], row: Mapping[str, Any], env: Mapping[str, Any]) -> bool:
    """Whether a filter keeps ``row``: an expression evaluated (``evaluate``), or a click's
    pick (``{"param": ...}``) taken as picking the panel's case and length."""
    condition = transform["filter"]
    if isinstance(condition, Mapping):
        assert set(condition) <= {"param", "empty"}, condition
        return row.get("case") == env.get("sel_case") and row.get("tokens") == env.get("sel_tokens")
    return evaluate(condition, row, env)


def chart_layers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every layer of ``spec`` with a mark, at any depth: its name, encoding, rows and the
    transforms that reach them (a parent's reach a layer that has no data of its own)."""
    found = []

    def walk(node: Mapping[str, Any], rows: list[dict], transforms: list[dict]) -> None:
        if "data" in node:
            rows, transforms = node["data"]["values"], []
        transforms = [*transforms, *node.get("transform", [])]
        if "mark" in node:
            found.append({**node, "rows": rows, "transforms": transforms})
        for child in (*node.get("layer", []), *node.get("hconcat", [])):
            walk(child, rows, transforms)

    walk(spec, [], [])
    return found


def _channel(encoding: Mapping[str, Any], channel: str, row: Mapping[str, Any]) -> Any:
    """What ``channel`` puts a row at: a field's value, a constant datum; None for a pixel
    value or no such channel."""
    entry = encoding.get(channel) or {}
    if "field" in entry:
        return row.get(entry["field"])
    return entry.get("datum")


def _hidden(encoding: Mapping[str, Any], row: Mapping[str, Any], env: Mapping) -> bool:
    """Whether an opacity channel's condition leaves the row at 0 (a selection's condition
    counts as met: nothing is picked)."""
    for channel in HIDING:
        entry = encoding.get(channel) or {}
        condition = entry.get("condition")
        if condition is None:
            continue
        met = "param" in condition or evaluate(condition["test"], row, env)
        if (condition["value"] if met else entry.get("value")) == 0:
            return True
    return False


def chart_points(layer: Mapping[str, Any], env: Mapping[str, Any]) -> list[Point]:
    """The points a layer draws with the menus at ``env``: (x, y) for each end of its
    position channels, the text appended for a text mark."""
    encoding = layer["encoding"]
    fields = [encoding[c]["field"] for c in POSITION if "field" in encoding.get(c, {})]
    points = []
    for row in layer["rows"]:
        if not all(keeps(t, row, env) for t in layer["transforms"]):
            continue
        if _hidden(encoding, row, env) or not all(_is_valid(row.get(f)) for f in fields):
            continue
        xs = [_channel(encoding, c, row) for c in ("x", "x2") if c == "x" or c in encoding]
        ys = [_channel(encoding, c, row) for c in ("y", "y2") if c == "y" or c in encoding]
        text = (_channel(encoding, "text", row),) if "text" in encoding else ()
        points += [(x, y, *text) for x in xs for y in ys]
    return points


def _nominal(encoding: Mapping[str, Any], channel: str) -> bool:
    return (encoding.get(channel) or {}).get("type") == "nominal"


# --- the PNG ------------------------------------------------------------------------------


def _display(artist: Any) -> list[tuple[np.ndarray, str | None]]:
    """An artist's drawn points in display coordinates (with its text, if any)."""
    if isinstance(artist, Annotation):
        return [(artist.axes.transData.transform([artist.xy]), artist.get_text())]
    if isinstance(artist, Text):
        xy = artist.get_transform().transform([artist.get_position()])
        return [(xy, artist.get_text())]
    if isinstance(artist, Line2D):
        return [(artist.get_transform().transform(artist.get_xydata()), None)]
    if isinstance(artist, PathCollection):
        offsets = artist.get_offset_transform().transform(artist.get_offsets())
        return [(offsets, None)]
    if isinstance(artist, Collection):
        transform = artist.get_transform()
        return [(transform.transform(path.vertices), None) for path in artist.get_paths()]
    if isinstance(artist, Patch):
        return [(artist.get_transform().transform(artist.get_path().vertices), None)]
    raise AssertionError(f"an artist the comparison cannot read: {artist!r}")


def _drawn(ax: Axes) -> list[Any]:
    return [*ax.lines, *ax.collections, *ax.patches, *ax.texts]


def _tick_label(ax: Axes, y: float) -> str:
    """The label of the y tick nearest ``y`` (a categorical row's, its offset within it)."""
    ticks = ax.get_yticks()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    return labels[int(np.argmin(np.abs(np.asarray(ticks) - y)))]


def png_points(ax: Axes, artist: Any, encoding: Mapping[str, Any]) -> list[Point]:
    """The points an artist draws in its axes' data coordinates, as the chart layer of
    the same name would give them: a channel that layer has no field or datum for is
    None, a categorical y its tick's label, a text mark's text appended."""
    to_data = artist.axes.transData.inverted()
    keep_x = any(c in encoding and "value" not in encoding[c] for c in ("x", "x2"))
    keep_y = any(c in encoding and "value" not in encoding[c] for c in ("y", "y2"))
    points = []
    for display, text in _display(artist):
        for x, y in to_data.transform(display):
            if (keep_x and np.isnan(x)) or (keep_y and np.isnan(y)):
                continue
            where = [
                x if keep_x else None,
                (_tick_label(ax, y) if _nominal(encoding, "y") else y) if keep_y else None,
            ]
            points.append((*where, *([text] if "text" in encoding else [])))
    return points


# --- the comparison -----------------------------------------------------------------------


def _split(points: Iterable[Point]) -> dict[tuple, np.ndarray]:
    """Points grouped by their non-numeric parts (texts, labels, absent channels), each
    group's numbers as an array."""
    groups: dict[tuple, list[list[float]]] = {}
    for point in set(points):
        numeric = [isinstance(v, int | float) and not isinstance(v, bool) for v in point]
        key = tuple(None if n else v for n, v in zip(numeric, point, strict=True))
        groups.setdefault(key, []).append(
            [float(v) for n, v in zip(numeric, point, strict=True) if n]
        )
    return {key: np.array(values, dtype=float) for key, values in groups.items()}


def _unmatched(these: dict[tuple, np.ndarray], those: dict[tuple, np.ndarray]) -> list[Point]:
    """The points of ``these`` with no point of ``those`` equal to them (within ATOL)."""
    left = []
    for key, values in these.items():
        other = those.get(key)
        if other is None or not len(other):
            matched = np.zeros(len(values), dtype=bool)
        elif values.shape[1] == 0:
            matched = np.ones(len(values), dtype=bool)
        else:
            close = np.abs(values[:, None, :] - other[None, :, :]) <= ATOL + 1e-9 * np.abs(other)
            matched = close.all(axis=2).any(axis=1)
        left += [(key, tuple(v)) for v in values[~matched]]
    return left


def _differ(png: list[Point], chart: list[Point]) -> str | None:
    """What only one side draws, in words (None when both draw the same points)."""
    a, b = _split(png), _split(chart)
    only_png, only_chart = _unmatched(a, b), _unmatched(b, a)
    if not (only_png or only_chart):
        return None
    return (
        f"PNG only {only_png[:3]} ({len(only_png)}), "
        f"chart only {only_chart[:3]} ({len(only_chart)})"
    )


def _from_tables(values: list[dict], tables: list[pd.DataFrame]) -> bool:
    """Whether ``values`` are some rows of one of ``tables`` (in order, some columns;
    rounded as the chart may round them), or the one empty row of a constant mark."""
    if values == [{}]:
        return True
    columns = list(values[0]) if values else []
    for table in tables:
        if not set(columns) <= set(table.columns):
            continue
        for digits in (None, interactive.CALL_DIGITS, interactive.VIOLIN_DIGITS):
            rows = iter(interactive.records(table, columns, digits=digits))
            if all(any(v == r for r in rows) for v in values):
                return True
    return False


def problems(view: views.View, tables: list[pd.DataFrame]) -> list[str]:
    """Where the PNG and the chart of ``view`` differ, or either draws what no table of
    ``figuredata`` (``tables``) holds; [] when they agree."""
    found = []
    layers = chart_layers(view.spec)
    by_name = {layer.get("name"): layer for layer in layers}
    found += [
        f"an unnamed chart layer: {layer['mark']}" for layer in layers if not layer.get("name")
    ]
    for layer in layers:
        computed = [t for t in layer["transforms"] if list(t) != ["filter"]]
        found += [f"{layer.get('name')}: the chart computes {t}" for t in computed]
        if computed:
            by_name.pop(layer.get("name"), None)  # nothing to compare its points with
        if not _from_tables(layer["rows"], tables):
            found.append(f"{layer.get('name')}: data that is no figuredata table's rows")
    panels: dict[str, list[Axes]] = {}
    for ax in view.figure.axes:
        if _drawn(ax):
            panels.setdefault(ax.get_gid() or "", []).append(ax)
    menus = {p["name"] for p in view.spec.get("params", [])}
    for panel, axes in panels.items():
        case, _, tokens = panel.partition("@")
        env: dict[str, Any] = {"sel_case": case or None, "sel_tokens": int(tokens or 0)}
        env |= {"trace_case": "all", **{m: True for m in menus if m.startswith("show_")}}
        png: dict[str, list[Point]] = {name: [] for name in by_name}
        for ax in axes:
            for artist in _drawn(ax):
                name = (artist.get_gid() or "").split(":")[0]
                if name not in by_name:
                    found.append(f"{panel}: a PNG artist no chart layer draws: {artist!r} {name!r}")
                    continue
                png[name] += png_points(axes[0], artist, by_name[name]["encoding"])
        for name, layer in by_name.items():
            if name in CHART_ONLY or name is None:
                continue
            differ = _differ(png[name], chart_points(layer, env))
            if differ:
                found.append(f"{panel} {name}: {differ}")
    return found


def drawn_layers(view: views.View) -> set[str]:
    """The chart layers of ``view`` that draw at least one row in one of the PNG's panels."""
    names = set()
    for ax in view.figure.axes:
        case, _, tokens = (ax.get_gid() or "").partition("@")
        env = {"sel_case": case or None, "sel_tokens": int(tokens or 0), "trace_case": "all"}
        env |= {p["name"]: True for p in view.spec.get("params", []) if "show_" in p["name"]}
        names |= {layer["name"] for layer in chart_layers(view.spec) if chart_points(layer, env)}
    return names


def chart_cases(spec: Mapping[str, Any]) -> set[str]:
    """The cases a chart's case and length menus offer, or its click's pick of a case
    where a layer filters on it: the cases of the layer that declares the pick
    ("case@tokens"; none without either)."""
    if any(p["name"] == "sel_case" for p in spec.get("params", [])):
        return {f"{r['case']}@{r['tokens']}" for r in spec["data"]["values"]}
    layers = chart_layers(spec)
    picks = {
        t["filter"]["param"]
        for layer in layers
        for t in layer["transforms"]
        if isinstance(t["filter"], Mapping)
    }
    return {
        f"{r['case']}@{r['tokens']}"
        for layer in layers
        if picks & {p["name"] for p in layer.get("params", [])}
        for r in layer["rows"]
    }
