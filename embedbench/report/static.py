"""The static renderer: matplotlib figures of a run, returned to the caller (never shown,
never a backend switch), each drawn from its tables in ``figuredata``.

It only maps those tables' columns to matplotlib artists: every value drawn (a trend, a
violin's outline, a box, a worker's own reduction, an axis limit, an interval end past
it) is a table's, the same rows the interactive renderer draws. Each artist that draws
rows carries a ``gid`` naming the chart's layer that draws the same rows (``name`` or
``name:detail``), which ``tests/test_interactive.py`` compares.

Every figure is a ``ReportFigure``: a ``matplotlib.figure.Figure`` built without pyplot
(so library code holds no global figure state) that carries its alt text. A notebook
displays it as a PNG with that text (``_ipython_display_``); the HTML export writes the
same ``<img alt=...>`` (``ReportFigure.img_html``). The interactive renderer
(``interactive``) draws the same tables; docs/interactive.md says how the two travel together.

The figures follow the paired design: each block runs baseline and fixed once each, in
an order drawn per block, inside one of several worker processes; the verdict reads one
interval (between processes, or Hodges–Lehmann in one process).
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, ScalarFormatter
from matplotlib.transforms import blended_transform_factory

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.harness import stats
from embedbench.report import compare, figuredata, hostprose, tables
from embedbench.report.results import RunResult

__all__ = [
    "COLORS",
    "DIFFERS_COLOR",
    "DRIFT_COLOR",
    "FIGURE_DPI",
    "ORDER_MARKERS",
    "OUTLIER_EDGE",
    "OUTLIER_WORKER_SHADE",
    "OUTLIER_WORKER_TEXT",
    "SERIES_COLORS",
    "UNKNOWN_ORDER",
    "VERDICT_COLORS",
    "WORKER_SHADE",
    "ReportFigure",
    "block_distributions",
    "call_distribution",
    "canary_trace",
    "compare_reductions",
    "frequency_note",
    "frequency_trace",
    "gpu_clock_trace",
    "paired_blocks",
    "reduction_forest",
]

FIGURE_DPI = 90
COLORS = {"baseline": "#cf4520", "fixed": "#1f6fb2"}
UNKNOWN_ORDER = "#8c8c8c"
ORDER_MARKERS = {"baseline": "o", "fixed": "s"}
VERDICT_COLORS = {
    stats.FASTER: "#1a7f37",
    stats.SLOWER: "#d1242f",
    stats.NO_DIFFERENCE: "#57606a",
}
OUTLIER_EDGE = "black"
DRIFT_COLOR = "#8250df"
DIFFERS_COLOR = "#bf8700"
WORKER_SHADE = "#f0f0f0"
OUTLIER_WORKER_SHADE = "#fbe9c6"  # the blocks of a worker the diagnostics flag
OUTLIER_WORKER_TEXT = "#9a6700"
SERIES_COLORS = ("#1f6fb2", "#cf4520", "#1a7f37", "#8250df", "#bf8700", "#57606a")


class ReportFigure(Figure):
    """A figure with its alt text: in a notebook it shows as a PNG carrying that text."""

    alt_text: str = ""

    def png(self, dpi: int = FIGURE_DPI) -> bytes:
        """The figure as PNG bytes."""
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=dpi)
        return buffer.getvalue()

    def img_html(self, dpi: int = FIGURE_DPI) -> str:
        """An inline ``<img>`` of the figure with its alt text."""
        data = base64.b64encode(self.png(dpi)).decode("ascii")
        alt = html.escape(self.alt_text or "figure", quote=True)
        return f'<img alt="{alt}" src="data:image/png;base64,{data}">'

    def to_html(self) -> str:
        """As a report section's item in the HTML page: ``img_html()``."""
        return self.img_html()

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """The image as PNG (alt text in its metadata) and as ``<img alt=...>`` HTML, which
        nbconvert and JupyterLab prefer, so the alt text reaches an exported page."""
        png = self.png()
        data = base64.b64encode(png).decode("ascii")
        alt = self.alt_text or "figure"
        img = f'<img alt="{html.escape(alt, quote=True)}" src="data:image/png;base64,{data}">'
        bundle = {"image/png": data, "text/html": img, "text/plain": f"<figure: {alt}>"}
        return bundle, {"image/png": {"alt": alt}}

    def _ipython_display_(self) -> None:
        """Display once, from the bundle above (the inline backend would render it again)."""
        from IPython.display import display

        data, metadata = self._repr_mimebundle_()
        display(data, raw=True, metadata=metadata)


def _new(width: float, height: float) -> ReportFigure:
    return ReportFigure(figsize=(width, height), layout="constrained")


def _message_panel(title: str, message: str) -> ReportFigure:
    """A small figure that says why there is nothing to draw."""
    fig = _new(8, 1.4)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.4, textwrap.fill(message, 90), ha="center", va="center", fontsize=10)
    fig.alt_text = f"{title}: {message}"
    return fig


def _grid(n: int, ncols: int = 3) -> tuple[int, int]:
    cols = min(ncols, n)
    return int(np.ceil(n / cols)), cols


def _case_panels(
    frame: pd.DataFrame, width: float, height: float, margin: float
) -> tuple[list[tuple[str, int]], bool, ReportFigure, np.ndarray]:
    """One panel per (case, tokens) of ``frame``, three to a row, ``width`` × ``height``
    inches each plus ``margin`` inches for titles and legend (unused panels hidden):
    the keys in table order, whether there are several lengths, the figure and its axes."""
    keys = figuredata.case_keys(frame)
    nrows, ncols = _grid(len(keys))
    fig = _new(width * ncols, height * nrows + margin)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat[len(keys) :]:
        ax.set_axis_off()
    return keys, len({t for _, t in keys}) > 1, fig, axes


def _lower_or_higher(reduction: float) -> str:
    """``fixed 20.7 % lower`` or ``fixed 4.3 % higher`` (never a negative 'lower')."""
    word = "lower" if reduction >= 0 else "higher"
    return f"fixed {abs(reduction):.1f} % {word}"


def _label(case: str, tokens: int, several: bool) -> str:
    return tables.input_label(case, tokens, several)


# --- the paired blocks of one case --------------------------------------------------------


def _case_rows(frame: pd.DataFrame, case: str, tokens: int) -> pd.DataFrame:
    """The rows of one case and length of a figure's table."""
    return frame[(frame["case"] == case) & (frame["tokens"] == tokens)]


def _draw_workers(ax: Axes, spans: pd.DataFrame) -> tuple[bool, bool]:
    """Each worker's span of one case (``figuredata.worker_spans``): its band (an outlier
    worker's amber), its label and its own reduction (the t interval's unit) where there
    is one; returns whether it drew spans and whether it drew their reductions."""
    top = blended_transform_factory(ax.transData, ax.transAxes)
    lines = False
    for span in spans.itertuples(index=False):
        if span.outlier_worker:
            ax.axvspan(
                span.x0,
                span.x1,
                color=OUTLIER_WORKER_SHADE,
                zorder=0,
                gid="worker_spans:outlier-worker",
            )
        elif span.shade:
            ax.axvspan(span.x0, span.x1, color=WORKER_SHADE, zorder=0, gid="worker_spans")
        ax.text(
            span.mid,
            0.98,
            span.text,
            transform=top,
            ha="center",
            va="top",
            fontsize=7,
            color=OUTLIER_WORKER_TEXT if span.outlier_worker else "#555",
            fontweight="bold" if span.outlier_worker else "normal",
            gid="worker_labels",
        )
        if not pd.isna(span.reduction_pct):
            lines = True
            ax.hlines(
                span.reduction_pct,
                span.line_x0,
                span.line_x1,
                color="#333",
                lw=1.4,
                zorder=2,
                gid="worker_reductions",
            )
    return not spans.empty, lines


def _outlier_worker_lines(odd: Mapping[int, str]) -> list[str]:
    """One title line per outlier worker: which, and its likely reason (wrapped)."""
    return [
        textwrap.fill(f"outlier worker w{w}: {reason}", 62, subsequent_indent="  ")
        for w, reason in sorted(odd.items())
    ]


def _drawn(paired: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows of ``paired`` that draw ``column`` (not None there)."""
    return paired[paired[column].notna()]


def _draw_lines(ax: Axes, paired: pd.DataFrame) -> set[str]:
    """The lines through one case's blocks the diagnostics ask for, from ``paired``'s
    columns: each run order's median reduction (order effect), the reductions' trend
    and, on a right-hand axis, the baseline's block medians (drift); returns the legend
    entries they need."""
    used = set()
    order = _drawn(paired, "order_effect_pct")
    for first, value in order.groupby("first", sort=False)["order_effect_pct"].first().items():
        ax.axhline(
            value, color=COLORS[first], ls="--", lw=1.2, zorder=2, gid=f"order_effect:{first}"
        )
        used.add("order")
    trend = _drawn(paired, "trend_pct")
    if len(trend):
        ax.plot(
            trend["order"],
            trend["trend_pct"],
            color=DRIFT_COLOR,
            lw=1.5,
            ls="-.",
            zorder=4,
            gid="trend",
        )
        used.add("trend")
    baseline = _drawn(paired, "baseline_drift_us")
    if len(baseline):
        twin = ax.twinx()
        twin.set_gid(ax.get_gid())
        twin.plot(
            baseline["order"],
            baseline["baseline_drift_us"],
            color=DRIFT_COLOR,
            lw=1,
            alpha=0.6,
            marker=".",
            gid="baseline_drift",
        )
        twin.tick_params(axis="y", labelsize=7, colors=DRIFT_COLOR)
        used.add("baseline_drift")
    return used


def _scatter_by_order(ax: Axes, paired: pd.DataFrame) -> None:
    """Each block's reduction, coloured and shaped by the variant that ran first; the
    blocks of an outlier worker hollow; outlier blocks ringed."""
    hollow = paired["outlier_worker"].fillna(False).astype(bool)
    for first in (*VARIANTS, None):
        mask = paired["first"].isna() if first is None else paired["first"] == first
        color = COLORS.get(first or "", UNKNOWN_ORDER)
        marker = ORDER_MARKERS.get(first or "", "D")
        gid = f"paired_points:first-{first or 'unknown'}"
        for part, open_ in ((paired[mask & ~hollow], False), (paired[mask & hollow], True)):
            if len(part):
                ax.scatter(
                    part["order"],
                    part["reduction_pct"],
                    s=22,
                    facecolors="none" if open_ else color,
                    edgecolors=color,
                    linewidths=1.3 if open_ else 0,
                    marker=marker,
                    zorder=5,
                    gid=f"{gid}-outlier-worker" if open_ else gid,
                )
    outliers = paired[paired["outlier"]]
    if not outliers.empty:
        ax.scatter(
            outliers["order"],
            outliers["reduction_pct"],
            s=130,
            facecolors="none",
            edgecolors=OUTLIER_EDGE,
            linewidths=1.4,
            zorder=6,
            gid="outlier_rings",
        )


def _paired_legend(used: set[str]) -> list[Any]:
    """Legend entries of the paired view, for what was drawn."""
    entries: dict[str, Any] = {
        "baseline": Line2D(
            [], [], ls="", marker="o", color=COLORS["baseline"], label="baseline ran first"
        ),
        "fixed": Line2D([], [], ls="", marker="s", color=COLORS["fixed"], label="fixed ran first"),
        "unknown": Line2D(
            [], [], ls="", marker="D", color=UNKNOWN_ORDER, label="order not recorded"
        ),
        "outlier": Line2D(
            [],
            [],
            ls="",
            marker="o",
            ms=11,
            mfc="none",
            mec=OUTLIER_EDGE,
            label="outlier block (diagnostics)",
        ),
        "workers": Patch(color=WORKER_SHADE, label="blocks of one worker process (w0, w1, …)"),
        "outlier_worker": Line2D(
            [],
            [],
            ls="",
            marker="o",
            mfc="none",
            mec=OUTLIER_WORKER_TEXT,
            label="an outlier worker's blocks (hollow, amber; why: in the title)",
        ),
        "worker_line": Line2D([], [], color="#333", lw=1.4, label="that worker's own reduction"),
        "headline": Line2D([], [], color="#333", lw=1.2, label="the run's reduction"),
        "trend": Line2D([], [], color=DRIFT_COLOR, ls="-.", label="trend (drift detected)"),
        "baseline_drift": Line2D(
            [],
            [],
            color=DRIFT_COLOR,
            marker=".",
            alpha=0.6,
            label="baseline block median, right axis (drift detected)",
        ),
        "order": Line2D(
            [],
            [],
            color="#555",
            ls="--",
            label="median per run order, in its colour (order effect detected)",
        ),
    }
    return [handle for key, handle in entries.items() if key in used]


def paired_blocks(result: RunResult) -> ReportFigure:
    """Each block's reduction against block index (time order), one panel per case.

    Colour: which variant ran first in the block. With several worker processes each
    worker's blocks are shaded and its own reduction drawn (the units the verdict's t
    interval is made of). Outlier blocks (diagnostics) are ringed; drift and an order
    effect are drawn where the diagnostics detect them, and named in the panel's title.
    A worker whose own reduction the others don't support (the diagnostics' outlier
    worker) has its blocks hollow on an amber band, and its likely reason in the title.
    Every line and band is a column of ``figuredata.paired_table`` or
    ``figuredata.worker_spans``.
    """
    frame = figuredata.blocks_frame(result)
    title = "Paired blocks over time"
    if frame.empty:
        return _message_panel(title, "no measured blocks in this run")
    keys, several, fig, axes = _case_panels(frame, 4.4, 3.2, 1.4)
    table = figuredata.paired_table(result)
    spans = figuredata.worker_spans(table)
    alt_parts: list[str] = []
    used: set[str] = set()
    for ax, (case, tokens) in zip(axes.flat, keys, strict=False):
        paired = figuredata.case_paired(table, case, tokens)
        label = _label(case, tokens, several)
        if paired.empty:
            ax.set_axis_off()
            ax.set_title(f"{label}: no complete block", fontsize=10)
            continue
        ax.set_gid(f"{case}@{tokens}")
        odd = figuredata.outlier_worker_reasons(result, case, tokens)
        shaded, per_worker = _draw_workers(ax, _case_rows(spans, case, tokens))
        used.update({"workers"} if shaded else set(), {"worker_line"} if per_worker else set())
        for value in _drawn(paired, "headline_pct")["headline_pct"].unique():
            ax.axhline(value, color="#333", lw=1.2, zorder=2, gid="headline")
            used.add("headline")
        _scatter_by_order(ax, paired)
        used.update(str(f) if isinstance(f, str) else "unknown" for f in paired["first"])
        if paired["outlier"].any():
            used.add("outlier")
        if paired["outlier_worker"].any():
            used.add("outlier_worker")
        ax.axhline(0, color="grey", ls=":", lw=1, gid="zero")
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0), max(high, 0))
        used |= _draw_lines(ax, paired)
        found = figuredata.paired_findings(result, case, tokens)
        lines = [label, *found, *_outlier_worker_lines(odd)]
        ax.set_title("\n".join(lines), fontsize=10 if len(lines) == 1 else 9)
        ax.set_xlim(-0.6, len(paired) - 0.4)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", alpha=0.3)
        blocks = [int(b) for b in paired.loc[paired["outlier"], "block"]]
        part = f"{label}: {len(paired)} blocks"
        if blocks:
            part += f", outlier blocks {', '.join(map(str, blocks))}"
        part += "".join(
            f", outlier worker {w} (hollow points: {reason})" for w, reason in sorted(odd.items())
        )
        alt_parts.append(", ".join([part, *found]))
    for ax in axes[-1]:
        ax.set_xlabel("block (time order)")
    fig.supylabel("block's reduction (%) = 100 × (1 − fixed / baseline)")
    fig.suptitle("Paired blocks over time: each dot is one block's baseline/fixed pair")
    handles = _paired_legend(used)
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 4 if axes.shape[1] > 2 else 3),
        fontsize=8,
        frameon=False,
    )
    workers = result.summary[0].get("workers") if result.summary else None
    fig.alt_text = (
        "Scatter plots, one per case, of each block's host-latency reduction against its "
        "index in time order, coloured by which variant ran first"
        + (f", across {workers} worker processes" if workers and workers > 1 else "")
        + ". "
        + ". ".join(alt_parts)
        + "."
    )
    return fig


# --- box and dots -------------------------------------------------------------------------


def _draw_boxes(ax: Axes, boxes: pd.DataFrame) -> None:
    """One case's boxes (``figuredata.block_boxes``) as matplotlib draws a box plot, from
    the table's statistics: the box, its median, the whiskers and their caps."""
    stats_ = [
        {
            "med": box.median,
            "q1": box.q1,
            "q3": box.q3,
            "whislo": box.whislo,
            "whishi": box.whishi,
            "label": box.variant,
        }
        for box in boxes.itertuples(index=False)
    ]
    drawn = ax.bxp(
        stats_,
        positions=list(boxes["x"]),
        widths=figuredata.BOX_WIDTH,
        patch_artist=True,
        showfliers=False,
        zorder=1,
    )
    for patch, variant in zip(drawn["boxes"], boxes["variant"], strict=True):
        patch.set_facecolor(COLORS[variant])
        patch.set_alpha(0.2)
        patch.set_gid("block_boxes")
    for median in drawn["medians"]:
        median.set_color("#333")
        median.set_gid("block_medians")
    for name in ("whiskers", "caps"):
        for line in drawn[name]:
            line.set_gid(f"block_{name}")


def block_distributions(result: RunResult) -> ReportFigure:
    """Block medians of host latency per variant, one panel per case, each block's two
    halves joined by a line; outlier blocks (diagnostics) drawn in black; behind them
    each variant's box (``figuredata.block_boxes``)."""
    frame = figuredata.blocks_frame(result)
    title = "Per-block host latency"
    if frame.empty:
        return _message_panel(title, "no measured blocks in this run")
    keys, several, fig, axes = _case_panels(frame, 4.2, 3.1, 1.0)
    table = figuredata.paired_table(result)
    halves = figuredata.block_halves(table)
    boxes = figuredata.block_boxes(table)
    not_from_zero: list[str] = []
    alt_parts: list[str] = []
    any_outlier = False
    for ax, (case, tokens) in zip(axes.flat, keys, strict=False):
        mine = _case_rows(halves, case, tokens)
        label = _label(case, tokens, several)
        if mine.empty:
            ax.set_axis_off()
            ax.set_title(f"{label}: no complete block", fontsize=10)
            continue
        ax.set_gid(f"{case}@{tokens}")
        box = _case_rows(boxes, case, tokens)
        _draw_boxes(ax, box)
        for _, pair in mine.groupby("block", sort=False):
            outlier = bool(pair["outlier"].iloc[0])
            any_outlier |= outlier
            ax.plot(
                pair["x"],
                pair["us"],
                color=OUTLIER_EDGE if outlier else "#9a9a9a",
                lw=1.5 if outlier else 0.7,
                alpha=1.0 if outlier else 0.6,
                zorder=2,
                gid="block_pairs",
            )
        for variant in VARIANTS:
            half = mine[mine["half"] == variant]
            ax.scatter(
                half["x"],
                half["us"],
                s=14,
                color=COLORS[variant],
                edgecolors=[OUTLIER_EDGE if o else "none" for o in half["outlier"]],
                linewidths=1.2,
                zorder=3,
                gid=f"distribution_points:{variant}",
            )
        ax.set_xticks([1, 2], list(VARIANTS))
        row = result.summary_row(case, tokens) or {}
        reduction = row.get("reduction_pct")
        suffix = "" if reduction is None else f": {_lower_or_higher(reduction)}"
        ax.set_title(label + suffix, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if ax.get_ylim()[0] > 0:
            not_from_zero.append(label)
        medians = dict(zip(box["variant"], box["median"], strict=True))
        alt_parts.append(
            f"{label}: median block baseline {medians['baseline']:.1f} μs, fixed "
            f"{medians['fixed']:.1f} μs" + ("" if reduction is None else f" ({suffix[2:]})")
        )
    ylabel = "block median host latency (μs)"
    shown = list(not_from_zero)
    if shown and len(shown) == len(keys):
        ylabel += "; y axes do not start at 0"
    elif shown:
        ylabel += f"; axis not from 0 in {', '.join(shown)}"
    fig.supylabel(ylabel)
    fig.suptitle(
        "Per-block medians: each line joins one block's baseline and fixed halves"
        + (" (black: outlier block)" if any_outlier else "")
    )
    fig.alt_text = (
        "Box-and-dot plots of block median host latency, baseline and fixed, one panel per "
        "case, a line joining the two halves of each block; each panel has its own scale"
        + (", not starting at 0" if shown else "")
        + ". "
        + "; ".join(alt_parts)
        + "."
    )
    return fig


# --- every call of one case ---------------------------------------------------------------


def _sparse_log_label(value: float, _position: int) -> str:
    """A minor tick's label on a log axis only at 2 and 5 times a power of ten."""
    leading = value / 10 ** np.floor(np.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(leading) in (2, 5) else ""


def call_distribution(result: RunResult, case: str | None = None) -> ReportFigure:
    """Every call's host latency for one case (its first length), per variant: a violin
    of the calls within the plotted range (0.5th to 99th percentile; whole, never cut by
    the frame), each variant's median in its colour, and how many calls lie outside the
    range; violins, medians and axis from ``figuredata.call_violins``, ``call_medians``
    and ``call_axes``."""
    reason = figuredata.DETAIL_REASON if case is None else "the case asked for"
    case = case or figuredata.detail_case(result)
    every = figuredata.call_table(result)
    calls = figuredata.case_calls(every, case) if case else every.iloc[0:0]
    title = "Per-call host latency"
    if calls.empty:
        return _message_panel(title, "no measured calls in this run")
    tokens = int(calls["tokens"].iloc[0])  # case_calls's: the first length
    lengths = set(every.loc[every["case"] == case, "tokens"])
    label = CASE_LABELS.get(case, case) + (f" at {tokens} tokens" if len(lengths) > 1 else "")
    [axis] = figuredata.call_axes(calls).itertuples(index=False)
    violins = figuredata.call_violins(calls)
    medians = figuredata.call_medians(calls)
    fig = _new(8, 4.8)
    ax = fig.add_subplot()
    ax.set_gid(f"{case}@{tokens}")
    for variant in VARIANTS:
        outline = violins[violins["variant"] == variant]
        if len(outline):
            ax.fill_betweenx(
                outline["host_us"],
                outline["left"],
                outline["right"],
                color=COLORS[variant],
                alpha=0.35,
                lw=0,
                gid="call_violins",
            )
    for median in medians.itertuples(index=False):
        color = COLORS[median.variant]
        ax.hlines(
            median.median,
            median.left,
            median.right,
            color=color,
            lw=2.2,
            zorder=3,
            gid="call_medians",
        )
        ax.text(
            median.text_x,
            median.median,
            median.text,
            color=color,
            va="center",
            fontsize=8,
            gid="call_median_labels",
        )
    if axis.log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(FuncFormatter(_sparse_log_label))
    ax.set_ylim(axis.y_min, axis.y_max)
    notes = dict(zip(medians["variant"], medians["note"], strict=True))
    ticks = [f"{v}\n" + textwrap.fill(notes.get(v, "no calls"), 40) for v in VARIANTS]
    ax.set_xticks([1, 2], ticks, fontsize=9)
    ax.set_xlim(0.4, 2.9)
    ax.set_ylabel(f"host latency per call (μs; {axis.scale})")
    ax.set_title(
        f"Per-call host latency: {label}\n({reason}; "
        f"{figuredata.LOW_PERCENTILE:g}th–{figuredata.HIGH_PERCENTILE:g}th percentile shown)",
        fontsize=11,
    )
    ax.grid(axis="y", alpha=0.3, which="both")
    alt_parts = [f"{m.variant} median {m.median:.1f} μs, {m.note}" for m in medians.itertuples()]
    fig.alt_text = (
        f"Violin plots of every call's host latency for {label} ({reason}), baseline and "
        f"fixed, {axis.low:.0f}–{axis.high:.0f} μs shown ({axis.scale}): "
        + "; ".join(alt_parts)
        + "."
    )
    return fig


# --- CPU frequency ------------------------------------------------------------------------


def _reads(edges: pd.DataFrame, column: str) -> pd.Series:
    """Every value of ``column`` read at a block half's edge (empty when none)."""
    return edges[column].dropna().astype(float) if len(edges) else pd.Series(dtype=float)


def frequency_note(result: RunResult) -> str | None:
    """One line when the core's frequency cannot be observed (None when it can: then
    ``frequency_trace`` draws it)."""
    edges = figuredata.edge_table(result)
    source = result.metadata.get("cpu_frequency_source", "unknown")
    if edges.empty:
        return "CPU frequency: no measured blocks in this run."
    mhz = _reads(edges, "cpu_mhz")
    if mhz.empty:
        return f"CPU frequency not observable on this machine (source: {source})."
    if mhz.nunique() == 1:
        return (
            f"CPU frequency not observable on this machine: {source} reports a constant "
            f"{mhz.iloc[0]:.0f} MHz at every block (typical of a VM or a fixed nominal value)."
        )
    return None


def _trace(result: RunResult, column: str) -> pd.DataFrame:
    """``figuredata.trace_table`` of ``column`` for ``result``."""
    edges = figuredata.edge_table(result)
    return figuredata.trace_table(edges, figuredata.paired_table(result), column)


def _draw_trace(ax: Axes, trace: pd.DataFrame, column: str, segments: bool) -> list[Line2D]:
    """A trace's reads over wall time since the first block, coloured by the variant
    that ran (joined per block half when ``segments``), the rows the table rings ringed;
    the legend's handles."""
    for variant in VARIANTS:
        sub = trace[trace["variant"] == variant]
        if segments:
            for _, half in sub.groupby("key", sort=False):
                ax.plot(
                    half["wall_s"],
                    half[column],
                    color=COLORS[variant],
                    lw=1.2,
                    gid=f"trace_segments:{variant}",
                )
    for variant in VARIANTS:
        sub = trace[trace["variant"] == variant]
        ax.plot(
            sub["wall_s"],
            sub[column],
            ls="",
            marker=".",
            ms=4,
            color=COLORS[variant],
            gid=f"trace_points:{variant}",
        )
    ringed = trace[trace["ring"]]
    if len(ringed):
        ax.scatter(
            ringed["wall_s"],
            ringed[column],
            s=80,
            facecolors="none",
            edgecolors=OUTLIER_EDGE,
            zorder=4,
            gid="trace_rings",
        )
    ax.set_xlabel("wall time since the first block (s)")
    ax.grid(alpha=0.3)
    style = {"marker": "."} if segments else {"ls": "", "marker": "."}
    return [Line2D([], [], color=COLORS[v], label=f"{v} ran", **style) for v in VARIANTS]


RING_LABEL = "excursion: > 2 % from\nits case's median MHz"


def frequency_trace(result: RunResult) -> ReportFigure | None:
    """The pinned core's MHz at the start and end of every block half, over wall time,
    coloured by the variant that ran, blocks the diagnostics flag ringed; None when the
    frequency is not observable (``frequency_note`` says so in one line)."""
    if frequency_note(result) is not None:
        return None
    trace = _trace(result, "cpu_mhz")
    source = result.metadata.get("cpu_frequency_source", "unknown")
    core = result.metadata.get("cpu_core")
    fig = _new(11, 4)
    ax = fig.add_subplot()
    mhz = _reads(trace, "cpu_mhz")
    handles = _draw_trace(ax, trace, "cpu_mhz", segments=True)
    ringed = trace[trace["ring"]]
    if len(ringed):
        handles.append(
            Line2D([], [], ls="", marker="o", mfc="none", mec=OUTLIER_EDGE, label=RING_LABEL)
        )
    fig.legend(handles=handles, fontsize=8, loc="outside right upper", frameon=False)
    ax.set_ylabel("MHz (axis not from 0)")
    ax.set_title(
        f"CPU frequency of core {core} at each block half's start and end (source: {source})",
        fontsize=11,
    )
    blocks = ringed.groupby(["case", "tokens"])["block"].nunique().sum() if len(ringed) else 0
    fig.alt_text = (
        f"Line segments of core {core}'s frequency at the start and end of each block half "
        f"over wall time, coloured by the variant that ran: {mhz.min():.0f}–{mhz.max():.0f} "
        f"MHz, median {mhz.median():.0f}; {blocks} blocks flagged for a frequency excursion."
    )
    return fig


def gpu_clock_trace(result: RunResult) -> ReportFigure | None:
    """The GPU's SM clock (NVML) at the start and end of every block half, over wall time,
    coloured by the variant that ran; None when no clock was recorded (CPU runs, or no
    NVML). A GPU that dropped to idle clocks in a gap shows as a low first block."""
    trace = _trace(result, "gpu_mhz")
    clocks = _reads(trace, "gpu_mhz")
    if clocks.empty:
        return None
    fig = _new(11, 3.6)
    ax = fig.add_subplot()
    handles = _draw_trace(ax, trace, "gpu_mhz", segments=True)
    fig.legend(handles=handles, fontsize=8, loc="outside right upper", frameon=False)
    ax.set_ylabel("SM clock, MHz (axis not from 0)")
    name = result.metadata.get("device_name") or "the GPU"
    ax.set_title(f"SM clock of {name} at each block half's start and end (NVML)", fontsize=11)
    fig.alt_text = (
        f"Line segments of the GPU's SM clock at the start and end of each block half over "
        f"wall time, coloured by the variant that ran: {clocks.min():.0f}–{clocks.max():.0f} "
        f"MHz, median {clocks.median():.0f}."
    )
    return fig


def canary_trace(result: RunResult) -> ReportFigure | None:
    """The canary (a gather of half a lookup's rows from a table past the last-level cache)
    read at every block half's end (and a series' first start), over wall time, coloured
    by the variant that had just run, with each worker's median as a dashed step: the
    machine's effective speed, the trace a VM's hidden CPU frequency leaves; None when the
    run recorded no canary."""
    trace = _trace(result, "canary_us")
    reads = _reads(trace, "canary_us")
    if reads.empty:
        return None
    fig = _new(11, 3.6)
    ax = fig.add_subplot()
    handles = _draw_trace(ax, trace, "canary_us", segments=False)
    medians = figuredata.worker_medians(result)
    for worker in medians.itertuples(index=False):
        ax.plot(
            [worker.start_s, worker.end_s],
            [worker.median_us] * 2,
            color="black",
            ls="--",
            lw=1,
            gid="worker_medians",
        )
    if len(medians):
        handles.append(Line2D([], [], color="black", ls="--", label="worker's median"))
    fig.legend(handles=handles, fontsize=8, loc="outside right upper", frameon=False)
    ax.set_ylabel("canary read, µs (axis not from 0)")
    verdict = hostprose.host_verdict(result.metadata)
    canary = result.metadata.get("canary") or {}
    kind = str(canary.get("kind") or "host memory read")
    size = canary.get("bytes")
    what = f"{size / 2**20:.1f} MiB {kind}" if size else kind
    ax.set_title(f"Canary ({what}) at each block half's edge: host {verdict}", fontsize=11)
    fig.alt_text = (
        f"Dots of the canary's read time ({kind}) at each block half's edge over wall time, "
        "coloured "
        f"by the variant that had just run: {reads.min():.0f}–{reads.max():.0f} µs, "
        f"median {reads.median():.0f}; host {verdict}."
    )
    return fig


# --- the verdict --------------------------------------------------------------------------


def _clip_intervals(
    ax: Axes,
    frame: pd.DataFrame,
    y: Callable[[Mapping[str, Any]], float],
    color: Callable[[Mapping[str, Any]], str],
) -> int:
    """Fit ``ax``'s x axis to ``figuredata.axis_range`` of ``frame`` and draw each end of
    ``figuredata.off_scale`` as an arrow at its edge carrying its number, at ``y(row)``
    in ``color(row)``; returns how many."""
    ax.set_xlim(*figuredata.axis_range(frame))
    ends = figuredata.off_scale(frame)
    for end in ends.to_dict("records"):
        left = end["side"] == "low"
        at, shade = (end["edge"], y(end)), color(end)
        gid = f"off_scale_{end['side']}"
        ax.plot(*at, "<" if left else ">", color=shade, ms=9, zorder=5, clip_on=False, gid=gid)
        ax.annotate(
            end["text"],
            at,
            xytext=(8 if left else -8, 4),
            textcoords="offset points",
            ha="left" if left else "right",
            va="bottom",
            fontsize=7,
            color=shade,
            gid=f"{gid}_labels",
        )
    return len(ends)


def _verdict_color(verdict: Any) -> str:
    return VERDICT_COLORS.get(verdict, "#57606a")


def reduction_forest(result: RunResult) -> ReportFigure:
    """Reduction per case with the interval the verdict uses, coloured by verdict, each
    row labelled with its figure; each worker's own reduction (the t interval's units)
    and the A/A interval where there is one; the axis and the ends past it from
    ``figuredata``."""
    forest = figuredata.forest_table(result)
    if forest.empty:
        return _message_panel("Host latency reduction", "no valid measured case")
    units = figuredata.forest_workers(result)
    rows = list(forest.iloc[::-1].to_dict("records"))  # drawn bottom-up
    ys = {row["input"]: y for y, row in enumerate(rows)}
    summary = [result.summary_row(r["case"], r["tokens"]) or {} for r in rows]
    fig = _new(11.5, 0.6 * len(rows) + 2.1)
    ax = fig.add_subplot()
    has_workers = has_aa = False
    for y, row in enumerate(rows):
        color = _verdict_color(row["verdict"])
        if not pd.isna(row["aa_low"]):
            has_aa = True
            ax.fill_betweenx(
                [y - 0.3, y + 0.3],
                row["aa_low"],
                row["aa_high"],
                color="#d0d7de",
                alpha=0.7,
                zorder=1,
                lw=0,
                gid="aa",
            )
        # The headline is the interval's own estimate (Hodges–Lehmann's in one process),
        # so the dot lies on the bar, though not always at its middle.
        low, high = row["low"], row["high"]
        ax.hlines(y, low, high, color=color, lw=2.5, zorder=3, gid="forest_intervals")
        ax.plot(
            [low, high],
            [y, y],
            "|",
            color=color,
            ms=12,
            mew=2,
            zorder=3,
            gid="forest_intervals:caps",
        )
        ax.plot(row["reduction_pct"], y, "o", color=color, ms=7, zorder=4, gid="forest_points")
        mine = units[units["input"] == row["input"]]
        if len(mine):
            has_workers = True
            ax.plot(
                mine["reduction_pct"],
                [y - 0.22] * len(mine),
                ls="",
                marker="o",
                ms=4,
                mfc="none",
                mec=color,
                alpha=0.8,
                zorder=3,
                gid="forest_workers",
            )
    ax.axvline(0, color="grey", ls="--", lw=1, gid="zero")
    clipped = _clip_intervals(
        ax, forest, lambda end: ys[end["input"]], lambda end: _verdict_color(end["verdict"])
    )
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [r["input"] for r in rows])
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(range(len(rows)), [r["reading"] for r in rows])
    for tick, row in zip(right.get_yticklabels(), rows, strict=True):
        tick.set_color(_verdict_color(row["verdict"]))
    right.tick_params(axis="y", length=0)
    methods = {r["method"] for r in rows}
    method = f"\n({methods.pop()})" if len(methods) == 1 else ""
    ax.set_xlabel(
        "host latency reduction (%); positive: fixed is faster"
        + ("; ◀ ▶ an interval past the axis, its end printed" if clipped else "")
    )
    levels = {tables.level_text(r.get("ci_level", stats.CONFIDENCE)) for r in summary}
    level = f"{levels.pop()} " if len(levels) == 1 else ""
    ax.set_title(
        f"Reduction per case with the {level}interval the verdict uses{method}", fontsize=11
    )
    ax.grid(axis="x", alpha=0.3)
    handles = [
        Line2D([], [], color=c, lw=2.5, marker="o", label=v)
        for v, c in VERDICT_COLORS.items()
        if any(r["verdict"] == v for r in rows)
    ]
    if has_workers:
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                ms=4,
                mfc="none",
                mec="#333",
                label="each worker's own reduction",
            )
        )
    if has_aa:
        handles.append(Patch(color="#d0d7de", label="A/A interval (no real difference)"))
    fig.legend(
        handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False
    )
    fig.alt_text = (
        "Forest plot of the host latency reduction per case with the interval the "
        "verdict uses: " + "; ".join(f"{r['input']} {r['reading']}" for r in reversed(rows)) + "."
    )
    return fig


# --- across runs --------------------------------------------------------------------------


def _offsets(names: list[Any]) -> dict[Any, float]:
    """Each name's offset from its row's y: spread over 0.8 of a row, first on top."""
    step = 0.8 / len(names)
    return {name: (i - (len(names) - 1) / 2) * step for i, name in enumerate(names)}


def _draw_runs(ax: Axes, runs: pd.DataFrame, ypos: Mapping[str, int]) -> list[Any]:
    """Each run's reductions (``compare_table``'s runs panel), one colour per run, its
    intervals as error bars, the axis fit and the ends past it; the legend's handles."""
    names = list(dict.fromkeys(runs["series"]))
    offsets = _offsets(names)

    def y(row: Mapping[str, Any]) -> float:
        return ypos[row["input"]] - offsets[row["series"]]

    def color(row: Mapping[str, Any]) -> str:
        return SERIES_COLORS[names.index(row["series"]) % len(SERIES_COLORS)]

    handles = []
    for name, rows in runs.groupby("series", sort=False):
        shade = color({"series": name})
        ys = [y(r) for r in rows.to_dict("records")]
        has_ci = bool(rows["low"].notna().any())
        parts: list[Any] = []
        if has_ci:
            ci = rows[rows["low"].notna()]
            ci_ys = [y(r) for r in ci.to_dict("records")]
            bars = ax.errorbar(
                ci["reduction_pct"],
                ci_ys,
                xerr=[ci["reduction_pct"] - ci["low"], ci["high"] - ci["reduction_pct"]],
                fmt="none",
                capsize=3,
                color=shade,
            )
            for artist in bars.get_children():
                artist.set_gid("compare_intervals")
            parts.append(bars)
        (points,) = ax.plot(
            rows["reduction_pct"],
            ys,
            ls="",
            marker="o" if has_ci else "D",
            ms=6,
            color=shade,
            gid="compare_points",
        )
        handles.append((tuple([*parts, points]), name))
    ax.axvline(0, color="grey", lw=1, ls="--", gid="zero")
    clipped = _clip_intervals(ax, runs, y, color)
    ax.set_xlabel(
        "host latency reduction (%) with the verdict's 95 % interval"
        + ("; ◀ ▶ past the axis, its end printed" if clipped else "")
    )
    return handles


def _draw_differences(ax: Axes, differences: pd.DataFrame, ypos: Mapping[str, int]) -> list[str]:
    """Each same-configuration pair's difference per case (``compare_table``'s difference
    panel), its interval coloured by whether it excludes 0; the alt text's parts."""
    pairs = sorted(set(zip(differences["a"], differences["b"], strict=True)))
    offsets = _offsets(pairs)
    alt = []
    for pair in pairs:
        mine = differences[(differences["a"] == pair[0]) & (differences["b"] == pair[1])]
        for row in mine.to_dict("records"):
            y = ypos[row["input"]] - offsets[pair]
            color = DIFFERS_COLOR if row["differs"] else VERDICT_COLORS[stats.NO_DIFFERENCE]
            ax.hlines(y, row["low"], row["high"], color=color, lw=2.2, gid="differences")
            ax.plot(row["reduction_pct"], y, "o", color=color, gid="difference_points")
        alt.append(
            f"difference {pair[1]} minus {pair[0]}: "
            + ", ".join(
                f"{r['label']} {r['reduction_pct']:+.1f} pp [{r['low']:+.1f}, {r['high']:+.1f}]"
                for r in mine.to_dict("records")
            )
        )
    ax.axvline(0, color="grey", lw=1, ls="--", gid="difference_zero")
    ax.set_xlabel("difference B − A (percentage points), 95 % interval")
    names = "; ".join(f"B = {b}, A = {a}" for a, b in pairs)
    ax.set_title(textwrap.fill(f"Same configuration: {names}", 60), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(
        handles=[
            Line2D([], [], color=DIFFERS_COLOR, lw=2, label="runs differ"),
            Line2D(
                [],
                [],
                color=VERDICT_COLORS[stats.NO_DIFFERENCE],
                lw=2,
                label="no detectable difference",
            ),
        ],
        fontsize=8,
    )
    return alt


def compare_reductions(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> ReportFigure:
    """Reduction per case across runs (and the PR's reference table), each with its
    interval; beside it, for runs of the same configuration, the row-wise difference with
    its interval: both panels of ``figuredata.compare_table``. A caption says when CPU
    rows sit beside GPU rows.

    Runs timed with different windows are refused unless ``allow_mixed_windows``, which
    labels every series with its window (``report.compared_windows``).
    """
    table = figuredata.compare_table(runs, reference, allow_mixed_windows=allow_mixed_windows)
    shown = table[table["panel"] == figuredata.RUNS]
    if shown.empty:
        return _message_panel("Reduction across runs", "no valid rows to compare")
    differences = table[table["panel"] == figuredata.DIFFERENCE]
    keys = sorted(
        set(zip(shown["case"], shown["tokens"], shown["input"], strict=True)),
        key=lambda k: tables.table_order(k[0], int(k[1])),
    )
    ypos = {key[2]: len(keys) - 1 - j for j, key in enumerate(keys)}
    names = list(dict.fromkeys(shown["series"]))
    caption = compare.regime_caption(dict(runs), dict(reference) if reference else None)
    height = 0.2 * len(keys) * max(len(names), 2) + 2.6
    fig = _new(13 if len(differences) else 10, height)
    if len(differences):
        ax, dax = fig.subplots(1, 2, sharey=True, width_ratios=(3, 2))
    else:
        ax, dax = fig.add_subplot(), None
    handles = _draw_runs(ax, shown, ypos)
    ax.set_yticks(range(len(keys)), [key[2] for key in keys][::-1])
    ax.set_title("Reduction per case across runs", fontsize=11)
    fig.legend(
        [h for h, _ in handles],
        [n for _, n in handles],
        handler_map={tuple: HandlerTuple(ndivide=1)},
        loc="outside upper center",
        ncols=min(len(names), 4),
        fontsize=8,
        frameon=False,
    )
    ax.grid(axis="x", alpha=0.3)
    alt = [
        f"{name}: "
        + ", ".join(f"{r['input']} {r['reduction_pct']:.1f} %" for r in rows.to_dict("records"))
        for name, rows in shown.groupby("series", sort=False)
    ]
    if dax is not None:
        alt += _draw_differences(dax, differences, ypos)
    if caption:
        fig.supxlabel(textwrap.fill(caption, 150), fontsize=9, color="#9a6700")
    fig.alt_text = (
        "Dot-and-interval plot of the host latency reduction per case for each run. "
        + "; ".join(alt)
        + (f". {caption}" if caption else ".")
    )
    return fig
