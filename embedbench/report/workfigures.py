"""The static renderer's figures of the per-call ledger (work.json): matplotlib PNGs drawn
from ``figuredata``'s tables, as ``static`` draws the timing figures.

- ``work_disagreement``: each case's wall-time reduction (with the verdict's interval)
  against its counted work reduction, bytes moved and, where counted, instructions, with
  the y = x diagonal (``figuredata.disagreement_table``, ``diagonal_table``);
- ``operator_drilldown``: one panel per case, each form's operators and the bytes each
  moves per call (``figuredata.operator_table``); the chart picks a case by a click.

Each artist that draws rows carries the ``gid`` of the chart layer (``workcharts``) that
draws the same rows, so ``tests/test_interactive.py`` compares them mark by mark. Nothing
is computed here, nothing shown, no backend switched.
"""

from __future__ import annotations

import textwrap

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from embedbench.cases import VARIANTS
from embedbench.report import figuredata, static, tables
from embedbench.report.results import RunResult
from embedbench.report.static import COLORS, VERDICT_COLORS, ReportFigure

__all__ = [
    "DISAGREEMENT_CAPTION",
    "MARKERS",
    "operator_drilldown",
    "work_disagreement",
]

# The marker of each measure (figuredata.MEASURES), as the chart's shapes.
MARKERS = {"bytes moved": "o", "instructions": "s"}
DISAGREEMENT_CAPTION = (
    "below the diagonal: memory- or launch-bound, less work did not buy proportionally "
    "less time; above it: more time gained than the counted work explains"
)
BAR_HEIGHT = 0.38  # a form's bar; the two forms of an operator sit either side of its row
DIAGONAL_COLOR = "#8c8c8c"


def _verdict_color(verdict: object) -> str:
    return VERDICT_COLORS.get(str(verdict), "#57606a")


def _point_text(row: dict) -> str:
    return (
        f"{row['input']} ({row['measure']}): work {row['work_reduction_pct']:.1f} %, time "
        f"{row['reduction_pct']:.1f} % [{row['low']:.1f}, {row['high']:.1f}], "
        f"{abs(row['gap_pp']):.1f} pp {'below' if row['gap_pp'] < 0 else 'above'} the diagonal"
    )


def work_disagreement(result: RunResult) -> ReportFigure:
    """Each case's wall-time reduction with the verdict's interval (y) against its counted
    work reduction (x), coloured by verdict, one marker per measure; the y = x diagonal;
    both axes the diagonal's limits (``figuredata``)."""
    table = figuredata.disagreement_table(result)
    title = "Work against time"
    if table.empty:
        return static._message_panel(
            title, "no case with both a per-call ledger (work.json) and an interval"
        )
    diagonal = figuredata.diagonal_table(table)
    fig = ReportFigure(figsize=(7.6, 6.9), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(diagonal["x"], diagonal["y"], ls="--", lw=1, color=DIAGONAL_COLOR, gid="diagonal")
    for measure, marker in MARKERS.items():
        rows = table[table["measure"] == measure]
        if rows.empty:
            continue
        colors = [_verdict_color(v) for v in rows["verdict"]]
        ax.vlines(
            rows["work_reduction_pct"],
            rows["low"],
            rows["high"],
            colors=colors,
            lw=2,
            alpha=0.7,
            zorder=2,
            gid="disagreement_intervals",
        )
        ax.scatter(
            rows["work_reduction_pct"],
            rows["reduction_pct"],
            marker=marker,
            s=46,
            c=colors,
            edgecolors="white",
            linewidths=0.6,
            zorder=3,
            gid="disagreement_points",
        )
    for row in table[table["labelled"].astype(bool)].to_dict("records"):
        ax.annotate(
            row["input"],
            (row["work_reduction_pct"], row["reduction_pct"]),
            xytext=(-6 if row["label_side"] == "left" else 6, 3),
            textcoords="offset points",
            ha="right" if row["label_side"] == "left" else "left",
            fontsize=8,
            color="#333",
            gid=f"disagreement_labels_{row['label_side']}",
        )
    lo, hi = float(diagonal["x"].iloc[0]), float(diagonal["x"].iloc[-1])
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    measures = list(dict.fromkeys(table["measure"]))
    ax.set_xlabel(f"work reduction (%): 1 − fixed / baseline of the {' and '.join(measures)}")
    ax.set_ylabel("wall-time reduction (%) with the verdict's interval")
    caption = textwrap.fill(f"{DISAGREEMENT_CAPTION}.", 80)
    ax.set_title(
        f"{title}: the dashed line is y = x\n{caption[0].upper()}{caption[1:]}", fontsize=10
    )
    handles = [
        Line2D([], [], ls="", marker="o", color=color, label=verdict)
        for verdict, color in VERDICT_COLORS.items()
        if (table["verdict"] == verdict).any()
    ]
    handles += [
        Line2D([], [], ls="", marker=MARKERS[m], color="#57606a", mfc="none", label=m)
        for m in measures
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    fig.alt_text = (
        "Scatter of each case's wall-time reduction with its interval against its counted "
        "work reduction, with the y = x diagonal; "
        + DISAGREEMENT_CAPTION
        + ": "
        + "; ".join(_point_text(row) for row in table.to_dict("records"))
        + "."
    )
    return fig


def _bytes_tick(value: float, _position: int) -> str:
    return "0" if value == 0 else f"{value / 1e6:g} MB"


def operator_drilldown(result: RunResult) -> ReportFigure:
    """Each case's operators, one panel per case: a bar per form of the bytes each
    operator moves per call (read + written), labelled with them, the operators in the
    run's order (most bytes first), each row naming its calls (baseline → fixed)."""
    table = figuredata.operator_table(result)
    title = "Operators per call"
    if table.empty:
        return static._message_panel(title, "no per-call ledger (work.json) in this run")
    keys, several, fig, axes = static._case_panels(table, 4.6, 0.6 + 0.55 * _most_ops(table), 1.1)
    alt_parts = []
    for ax, (case, tokens) in zip(axes.flat, keys, strict=False):
        mine = table[(table["case"] == case) & (table["tokens"] == tokens)]
        rows = mine.drop_duplicates("op").sort_values(["rank", "op"])
        labels = list(rows["op_label"])
        at = {label: len(labels) - 1 - i for i, label in enumerate(labels)}  # first on top
        ax.set_gid(f"{case}@{tokens}")
        for offset, variant in zip((BAR_HEIGHT / 2, -BAR_HEIGHT / 2), VARIANTS, strict=True):
            drawn = mine[(mine["variant"] == variant) & mine["moved"].notna()]
            ys = [at[label] + offset for label in drawn["op_label"]]
            bars = ax.barh(
                ys,
                drawn["moved"],
                left=drawn["start"],
                height=BAR_HEIGHT,
                color=COLORS[variant],
            )
            for bar in bars:
                bar.set_gid("operator_bars")
            for y, row in zip(ys, drawn.to_dict("records"), strict=True):
                inside = row["label_at"] == "inside"
                ax.annotate(
                    row["moved_text"],
                    (row["moved"], y),
                    xytext=(-3 if inside else 3, 0),
                    textcoords="offset points",
                    ha="right" if inside else "left",
                    va="center",
                    fontsize=7,
                    color="white" if inside else "#333",
                    gid=f"operator_values_{row['label_at']}",
                )
        ax.set_yticks(range(len(labels)), list(reversed(labels)), fontsize=8)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlim(0, float(mine["x_max"].iloc[0]))
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.xaxis.set_major_formatter(FuncFormatter(_bytes_tick))
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
        label = tables.input_label(case, tokens, several)
        ax.set_title(label, fontsize=10)
        alt_parts.append(f"{label}: " + ", ".join(labels))
    fig.suptitle(
        f"{title}: the bytes each operator moves (read + written), baseline and fixed; "
        "× its calls, baseline → fixed"
    )
    fig.legend(
        handles=[Patch(color=COLORS[v], label=v) for v in VARIANTS],
        loc="outside lower center",
        ncols=2,
        fontsize=8,
        frameon=False,
    )
    fig.alt_text = (
        "Horizontal bars of the bytes each aten operator moves in one call of each form, "
        "one panel per case, baseline and fixed side by side, each operator with its calls "
        "per call (baseline → fixed): " + "; ".join(alt_parts) + "."
    )
    return fig


def _most_ops(table: pd.DataFrame) -> int:
    """The most operators one case has (its panel's rows)."""
    return int(table.groupby(["case", "tokens"])["op"].nunique().max())
