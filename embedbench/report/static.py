"""The static renderer: matplotlib figures of a run, returned to the caller (never shown,
never a backend switch), each drawn from its table in ``figuredata``.

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
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, ScalarFormatter
from matplotlib.transforms import blended_transform_factory
from scipy import stats as sps

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.harness import stats
from embedbench.report import compare, figuredata, tables
from embedbench.report.results import RunResult

__all__ = [
    "COLORS",
    "DIFFERS_COLOR",
    "DRIFT_COLOR",
    "FIGURE_DPI",
    "LOG_SCALE_SPAN",
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


def _draw_workers(
    ax: Axes, paired: pd.DataFrame, row: dict[str, Any], odd: Mapping[int, str]
) -> tuple[bool, bool]:
    """Shade each worker's blocks (an outlier worker's, in ``odd``, in amber and labelled
    so) and draw its own reduction (the t interval's unit); returns whether it shaded
    workers and whether it drew their reductions."""
    spans = figuredata.worker_spans(paired)
    if spans.empty:
        return False, False
    units = row.get("worker_reduction_pct") or []
    workers = sorted(set(spans["worker"]))
    own = dict(zip(workers, units, strict=False)) if len(units) == len(workers) else {}
    top = blended_transform_factory(ax.transData, ax.transAxes)
    for worker, start, end, shade in spans[["worker", "start", "end", "shade"]].itertuples(
        index=False
    ):
        if worker in odd:
            ax.axvspan(
                start - 0.5, end + 0.5, color=OUTLIER_WORKER_SHADE, zorder=0, gid="outlier-worker"
            )
        elif shade:
            ax.axvspan(start - 0.5, end + 0.5, color=WORKER_SHADE, zorder=0)
        ax.text(
            (start + end) / 2,
            0.98,
            f"w{worker} outlier" if worker in odd else f"w{worker}",
            transform=top,
            ha="center",
            va="top",
            fontsize=7,
            color=OUTLIER_WORKER_TEXT if worker in odd else "#555",
            fontweight="bold" if worker in odd else "normal",
        )
        if worker in own:
            ax.hlines(
                own[worker],
                start - 0.4,
                end + 0.4,
                color="#333",
                lw=1.4,
                zorder=2,
                gid="worker-reduction",
            )
    return True, bool(own)


def _outlier_worker_lines(odd: Mapping[int, str]) -> list[str]:
    """One title line per outlier worker: which, and its likely reason (wrapped)."""
    return [
        textwrap.fill(f"outlier worker w{w}: {reason}", 62, subsequent_indent="  ")
        for w, reason in sorted(odd.items())
    ]


def _draw_drift(ax: Axes, paired: pd.DataFrame, diag: dict[str, Any]) -> list[str]:
    """The drift diagnostic where detected: a Theil–Sen trend of the block reductions and,
    when the baseline level moved, its block medians on a right-hand axis."""
    drift = diag.get("drift") or {}
    if not drift.get("detected"):
        return []
    alpha = drift.get("alpha", stats.ALPHA)
    found = []
    x = np.arange(len(paired), dtype=float)
    p_d, p_b = drift.get("p_log_ratio"), drift.get("p_baseline")
    if p_d is not None and p_d < alpha:
        slope, intercept, _, _ = sps.theilslopes(paired["reduction_pct"].to_numpy(), x)
        ax.plot(x, intercept + slope * x, color=DRIFT_COLOR, lw=1.5, ls="-.", zorder=4, gid="drift")
        way = "falls" if drift["rho_log_ratio"] > 0 else "rises"
        found.append(f"drift: reduction {way} (ρ {drift['rho_log_ratio']:.2f}, p {p_d:.2g})")
    if p_b is not None and p_b < alpha:
        twin = ax.twinx()
        twin.plot(
            x,
            paired["baseline_us"],
            color=DRIFT_COLOR,
            lw=1,
            alpha=0.6,
            marker=".",
            gid="baseline-drift",
        )
        twin.tick_params(axis="y", labelsize=7, colors=DRIFT_COLOR)
        way = "rises" if drift["rho_baseline"] > 0 else "falls"
        found.append(f"drift: baseline μs {way} (ρ {drift['rho_baseline']:.2f}, p {p_b:.2g})")
    return found


def _draw_order_effect(ax: Axes, diag: dict[str, Any]) -> list[str]:
    """The order-effect diagnostic where detected: each run order's median reduction."""
    order = diag.get("order_effect") or {}
    if not order.get("detected"):
        return []
    for variant in VARIANTS:
        value = order.get(f"{variant}_first_reduction_pct")
        if value is not None:
            ax.axhline(value, color=COLORS[variant], ls="--", lw=1.2, zorder=2, gid="order-effect")
    return [f"order effect {order['difference_pct_points']:+.1f} pp (p {order['p_value']:.2g})"]


def _scatter_by_order(ax: Axes, paired: pd.DataFrame) -> None:
    """Each block's reduction, coloured and shaped by the variant that ran first; the
    blocks of an outlier worker hollow."""
    x = np.arange(len(paired))
    hollow = paired["outlier_worker"].fillna(False).astype(bool).to_numpy()
    for first in (*VARIANTS, None):
        if first is None:
            mask = paired["first"].isna().to_numpy()
        else:
            mask = (paired["first"] == first).to_numpy()
        color = COLORS.get(first or "", UNKNOWN_ORDER)
        marker = ORDER_MARKERS.get(first or "", "D")
        gid = f"first-{first or 'unknown'}"
        for part, open_ in ((mask & ~hollow, False), (mask & hollow, True)):
            if part.any():
                ax.scatter(
                    x[part],
                    paired["reduction_pct"].to_numpy()[part],
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
            outliers.index.to_numpy(),
            outliers["reduction_pct"],
            s=130,
            facecolors="none",
            edgecolors=OUTLIER_EDGE,
            linewidths=1.4,
            zorder=6,
            gid="outliers",
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
    """
    frame = tables.blocks_frame(result)
    title = "Paired blocks over time"
    if frame.empty:
        return _message_panel(title, "no measured blocks in this run")
    keys, several, fig, axes = _case_panels(frame, 4.4, 3.2, 1.4)
    table = figuredata.paired_table(result)
    alt_parts: list[str] = []
    used: set[str] = set()
    for ax, (case, tokens) in zip(axes.flat, keys, strict=False):
        paired = figuredata.case_paired(table, case, tokens)
        label = _label(case, tokens, several)
        if paired.empty:
            ax.set_axis_off()
            ax.set_title(f"{label}: no complete block", fontsize=10)
            continue
        row = result.summary_row(case, tokens) or {}
        diag = figuredata.diagnostics(result, case, tokens)
        odd = figuredata.outlier_worker_reasons(result, case, tokens)
        shaded, per_worker = _draw_workers(ax, paired, row, odd)
        if shaded:
            used.add("workers")
        if per_worker:
            used.add("worker_line")
        elif row.get("reduction_pct") is not None:
            ax.axhline(row["reduction_pct"], color="#333", lw=1.2, zorder=2)
            used.add("headline")
        _scatter_by_order(ax, paired)
        used.update(str(f) if isinstance(f, str) else "unknown" for f in paired["first"])
        if paired["outlier"].any():
            used.add("outlier")
        if paired["outlier_worker"].any():
            used.add("outlier_worker")
        ax.axhline(0, color="grey", ls=":", lw=1)
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0), max(high, 0))
        drift = _draw_drift(ax, paired, diag)
        order = _draw_order_effect(ax, diag)
        used.update(
            {"trend"} if any("reduction" in d for d in drift) else set(),
            {"baseline_drift"} if any("baseline" in d for d in drift) else set(),
            {"order"} if order else set(),
        )
        found = drift + order
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


def block_distributions(result: RunResult) -> ReportFigure:
    """Block medians of host latency per variant, one panel per case, each block's two
    halves joined by a line; outlier blocks (diagnostics) drawn in black."""
    frame = tables.blocks_frame(result)
    title = "Per-block host latency"
    if frame.empty:
        return _message_panel(title, "no measured blocks in this run")
    keys, several, fig, axes = _case_panels(frame, 4.2, 3.1, 1.0)
    table = figuredata.paired_table(result)
    rng = np.random.default_rng(0)
    not_from_zero: list[str] = []
    alt_parts: list[str] = []
    any_outlier = False
    for ax, (case, tokens) in zip(axes.flat, keys, strict=False):
        paired = figuredata.case_paired(table, case, tokens)
        label = _label(case, tokens, several)
        if paired.empty:
            ax.set_axis_off()
            ax.set_title(f"{label}: no complete block", fontsize=10)
            continue
        data = [paired[f"{v}_us"].to_numpy() for v in VARIANTS]
        box = ax.boxplot(data, widths=0.5, patch_artist=True, showfliers=False, zorder=1)
        for patch, variant in zip(box["boxes"], VARIANTS, strict=True):
            patch.set_facecolor(COLORS[variant])
            patch.set_alpha(0.2)
        for median in box["medians"]:
            median.set_color("#333")
        jitter = rng.uniform(-0.1, 0.1, size=len(paired))
        for i, (_, block) in enumerate(paired.iterrows()):
            outlier = bool(block["outlier"])
            any_outlier |= outlier
            ax.plot(
                [1 + jitter[i], 2 + jitter[i]],
                [block["baseline_us"], block["fixed_us"]],
                color=OUTLIER_EDGE if outlier else "#9a9a9a",
                lw=1.5 if outlier else 0.7,
                alpha=1.0 if outlier else 0.6,
                zorder=2,
                gid="pair",
            )
        for x, variant in enumerate(VARIANTS, start=1):
            ax.scatter(
                x + jitter,
                paired[f"{variant}_us"],
                s=14,
                color=COLORS[variant],
                edgecolors=[OUTLIER_EDGE if o else "none" for o in paired["outlier"]],
                linewidths=1.2,
                zorder=3,
            )
        ax.set_xticks([1, 2], list(VARIANTS))
        row = result.summary_row(case, tokens) or {}
        reduction = row.get("reduction_pct")
        suffix = "" if reduction is None else f": {_lower_or_higher(reduction)}"
        ax.set_title(label + suffix, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if ax.get_ylim()[0] > 0:
            not_from_zero.append(label)
        alt_parts.append(
            f"{label}: median block baseline {np.median(data[0]):.1f} μs, fixed "
            f"{np.median(data[1]):.1f} μs" + ("" if reduction is None else f" ({suffix[2:]})")
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

LOG_SCALE_SPAN = 2.0  # a log axis once the plotted range spans more than this factor


def _violin(ax: Axes, x: float, values: np.ndarray, color: str, log: bool) -> tuple[float, float]:
    """A violin of ``values`` that tapers to nothing past the data (a Gaussian KDE
    evaluated two bandwidths beyond the extremes, in log space on a log axis); returns the
    span it covers, which the axis must hold whole."""
    data = np.log(values) if log else values
    if data.size < 2 or np.ptp(data) == 0:
        return float(values.min()), float(values.max())
    kde = sps.gaussian_kde(data)
    bandwidth = float(np.sqrt(kde.covariance[0, 0]))
    grid = np.linspace(data.min() - 2 * bandwidth, data.max() + 2 * bandwidth, 300)
    density = kde(grid)
    half = 0.4 * density / density.max()
    ys = np.exp(grid) if log else grid
    ax.fill_betweenx(ys, x - half, x + half, color=color, alpha=0.35, lw=0, gid="violin")
    return float(ys.min()), float(ys.max())


def _sparse_log_label(value: float, _position: int) -> str:
    """A minor tick's label on a log axis only at 2 and 5 times a power of ten."""
    leading = value / 10 ** np.floor(np.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(leading) in (2, 5) else ""


def call_distribution(result: RunResult, case: str | None = None) -> ReportFigure:
    """Every call's host latency for one case, per variant: a violin of the calls within
    the plotted range (0.5th to 99th percentile; whole, never cut by the frame), each
    variant's median in its colour, and how many calls lie outside the range."""
    reason = tables.DETAIL_REASON if case is None else "the case asked for"
    case = case or tables.detail_case(result)
    every = figuredata.call_table(result)
    calls = figuredata.case_calls(every, case) if case else every.iloc[0:0]
    title = "Per-call host latency"
    if calls.empty:
        return _message_panel(title, "no measured calls in this run")
    tokens = int(calls["tokens"].iloc[0])  # case_calls's: the first length
    lengths = set(every.loc[every["case"] == case, "tokens"])
    label = CASE_LABELS.get(case, case) + (f" at {tokens} tokens" if len(lengths) > 1 else "")
    fig = _new(8, 4.8)
    ax = fig.add_subplot()
    low, high = figuredata.call_range(calls)
    log = low > 0 and high / low > LOG_SCALE_SPAN
    spans = [low, high]
    outside_lines = []
    alt_parts = []
    for x, variant in enumerate(VARIANTS, start=1):
        values = calls.loc[calls["variant"] == variant, "host_us"].to_numpy()
        if not values.size:
            continue
        inside = values[(values >= low) & (values <= high)]
        above, below = int((values > high).sum()), int((values < low).sum())
        if inside.size:
            spans.extend(_violin(ax, x, inside, COLORS[variant], log))
        median = float(np.median(values))
        ax.hlines(median, x - 0.3, x + 0.3, color=COLORS[variant], lw=2.2, zorder=3, gid="median")
        ax.text(
            x + 0.32, median, f"median {median:.1f}", color=COLORS[variant], va="center", fontsize=8
        )
        hidden = []
        if above:
            hidden.append(f"{above} above {high:.0f} μs")
        if below:
            hidden.append(f"{below} below {low:.0f} μs")
        note = f"{len(values)} calls, " + (
            " and ".join(hidden) + " not shown" if hidden else "all shown"
        )
        outside_lines.append(f"{variant}: {note}")
        alt_parts.append(f"{variant} median {median:.1f} μs, {note}")
    bottom, top = min(spans), max(spans)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom / 1.05, top * 1.05)
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(FuncFormatter(_sparse_log_label))
    else:
        pad = 0.04 * (top - bottom or top or 1.0)
        ax.set_ylim(max(bottom - pad, 0.0), top + pad)
    ticks = [
        f"{v}\n" + textwrap.fill(line.split(": ", 1)[1], 40)
        for v, line in zip(VARIANTS, outside_lines, strict=True)
    ]
    ax.set_xticks([1, 2], ticks, fontsize=9)
    ax.set_xlim(0.4, 2.9)
    scale = "log scale" if log else ("linear" if ax.get_ylim()[0] <= 0 else "linear, not from 0")
    ax.set_ylabel(f"host latency per call (μs; {scale})")
    ax.set_title(
        f"Per-call host latency: {label}\n({reason}; "
        f"{figuredata.LOW_PERCENTILE:g}th–{figuredata.HIGH_PERCENTILE:g}th percentile shown)",
        fontsize=11,
    )
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.alt_text = (
        f"Violin plots of every call's host latency for {label} ({reason}), baseline and "
        f"fixed, {low:.0f}–{high:.0f} μs shown ({scale}): " + "; ".join(alt_parts) + "."
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


def _clock_segments(ax: Any, edges: pd.DataFrame, column: str) -> list[Line2D]:
    """One segment per block half, from its start's ``column`` to its end's over wall time
    since the first block, coloured by the variant that ran; the legend's handles."""
    for variant in VARIANTS:
        sub = edges[edges["variant"] == variant]
        for _, half in sub.groupby(["case", "tokens", "block"], sort=False):
            ax.plot(
                half["wall_s"],
                half[column],
                color=COLORS[variant],
                lw=1.2,
                marker=".",
                ms=4,
                gid=variant,
            )
    ax.set_xlabel("wall time since the first block (s)")
    ax.grid(alpha=0.3)
    return [Line2D([], [], color=COLORS[v], marker=".", label=f"{v} ran") for v in VARIANTS]


def frequency_trace(result: RunResult) -> ReportFigure | None:
    """The pinned core's MHz at the start and end of every block half, over wall time,
    coloured by the variant that ran, blocks the diagnostics flag ringed; None when the
    frequency is not observable (``frequency_note`` says so in one line)."""
    if frequency_note(result) is not None:
        return None
    edges = figuredata.edge_table(result)
    source = result.metadata.get("cpu_frequency_source", "unknown")
    core = result.metadata.get("cpu_core")
    fig = _new(11, 4)
    ax = fig.add_subplot()
    mhz = _reads(edges, "cpu_mhz")
    handles = _clock_segments(ax, edges, "cpu_mhz")
    flagged = edges[edges["frequency_flag"] & (edges["edge"] == "start")]
    if not flagged.empty:
        ax.scatter(
            flagged["wall_s"],
            flagged["cpu_mhz"],
            s=80,
            facecolors="none",
            edgecolors=OUTLIER_EDGE,
            zorder=4,
        )
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                mfc="none",
                mec=OUTLIER_EDGE,
                label="excursion: > 2 % from\nits case's median MHz",
            )
        )
    fig.legend(handles=handles, fontsize=8, loc="outside right upper", frameon=False)
    ax.set_ylabel("MHz (axis not from 0)")
    ax.set_title(
        f"CPU frequency of core {core} at each block half's start and end (source: {source})",
        fontsize=11,
    )
    blocks = flagged.groupby(["case", "tokens"])["block"].nunique().sum() if len(flagged) else 0
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
    edges = figuredata.edge_table(result)
    clocks = _reads(edges, "gpu_mhz")
    if clocks.empty:
        return None
    fig = _new(11, 3.6)
    ax = fig.add_subplot()
    handles = _clock_segments(ax, edges, "gpu_mhz")
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
    edges = figuredata.edge_table(result)
    reads = _reads(edges, "canary_us")
    if reads.empty:
        return None
    fig = _new(11, 3.6)
    ax = fig.add_subplot()
    handles = []
    for variant in VARIANTS:
        sub = edges[edges["variant"] == variant]
        ax.plot(
            sub["wall_s"],
            sub["canary_us"],
            ls="",
            marker=".",
            ms=4,
            color=COLORS[variant],
            gid=variant,
        )
        label = f"{variant} ran"
        handles.append(Line2D([], [], ls="", marker=".", color=COLORS[variant], label=label))
    ax.set_xlabel("wall time since the first block (s)")
    ax.grid(alpha=0.3)
    medians = figuredata.worker_medians(result)
    for _, worker in medians.iterrows():
        span = [worker["start_s"], worker["end_s"]]
        ax.plot(span, [worker["median_us"]] * 2, color="black", ls="--", lw=1, gid="median")
    if len(medians):
        handles.append(Line2D([], [], color="black", ls="--", label="worker's median"))
    fig.legend(handles=handles, fontsize=8, loc="outside right upper", frameon=False)
    ax.set_ylabel("canary read, µs (axis not from 0)")
    verdict = tables.host_verdict(result.metadata)
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
    ax: Axes, frame: pd.DataFrame, ys: Mapping[Any, float], colors: Mapping[Any, str]
) -> int:
    """Fit ``ax``'s x axis to ``figuredata.axis_range`` of ``frame`` and mark each interval
    end beyond it as an arrow at the edge carrying its number; returns how many."""
    lo, hi = figuredata.axis_range(frame)
    ax.set_xlim(lo, hi)
    ends = figuredata.off_scale(frame, lo, hi)
    for end in ends.itertuples(index=False):
        left = end.side == "low"
        x, y, color = lo if left else hi, ys[end.row], colors[end.row]
        ax.plot(
            x, y, "<" if left else ">", color=color, ms=9, zorder=5, clip_on=False, gid="off-scale"
        )
        ax.annotate(
            f"{end.value:.1f} %",
            (x, y),
            xytext=(8 if left else -8, 4),
            textcoords="offset points",
            ha="left" if left else "right",
            va="bottom",
            fontsize=7,
            color=color,
            gid="off-scale-label",
        )
    return len(ends)


def reduction_forest(result: RunResult) -> ReportFigure:
    """Reduction per case with the interval the verdict uses, coloured by verdict, each
    row labelled with its figure; each worker's own reduction (the t interval's units)
    and the A/A interval where there is one."""
    forest = figuredata.forest_table(result)
    if forest.empty:
        return _message_panel("Host latency reduction", "no valid measured case")
    units = figuredata.forest_workers(result)
    several = forest["tokens"].nunique() > 1
    rows = list(forest.iloc[::-1].to_dict("records"))  # drawn bottom-up
    summary = [result.summary_row(r["case"], r["tokens"]) or {} for r in rows]
    fig = _new(11.5, 0.6 * len(rows) + 2.1)
    ax = fig.add_subplot()
    has_workers = has_aa = False
    for y, row in enumerate(rows):
        color = VERDICT_COLORS.get(row["verdict"], "#57606a")
        if row["aa_low"] is not None and not pd.isna(row["aa_low"]):
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
        ax.hlines(y, low, high, color=color, lw=2.5, zorder=3, gid="interval")
        ax.plot([low, high], [y, y], "|", color=color, ms=12, mew=2, zorder=3)
        ax.plot(row["reduction_pct"], y, "o", color=color, ms=7, zorder=4)
        mine = units[(units["case"] == row["case"]) & (units["tokens"] == row["tokens"])]
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
            )
    ax.axvline(0, color="grey", ls="--", lw=1)
    drawn = pd.DataFrame(rows)
    clipped = _clip_intervals(
        ax,
        drawn,
        dict(enumerate(range(len(rows)))),
        {y: VERDICT_COLORS.get(r["verdict"], "#57606a") for y, r in enumerate(rows)},
    )
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [_label(r["case"], r["tokens"], several) for r in rows])
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(range(len(rows)), [r["reading"] for r in rows])
    for tick, row in zip(right.get_yticklabels(), rows, strict=True):
        tick.set_color(VERDICT_COLORS.get(row["verdict"], "#57606a"))
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
        "verdict uses: "
        + "; ".join(
            f"{_label(r['case'], r['tokens'], several)} {r['reading']}" for r in reversed(rows)
        )
        + "."
    )
    return fig


# --- across runs --------------------------------------------------------------------------


def _key_label(key: str, several: bool) -> str:
    case, tokens = key.split("@")
    return _label(case, int(tokens), several)


def _key_order(key: str) -> tuple[int, int]:
    case, tokens = key.split("@")
    return tables.table_order(case, int(tokens))


def compare_reductions(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> ReportFigure:
    """Reduction per case across runs (and the PR's reference table), each with its
    interval; beside it, for runs of the same configuration, the row-wise difference with
    its interval (``compare.differences``). A caption says when CPU rows sit beside GPU rows.

    Runs timed with different windows are refused unless ``allow_mixed_windows``, which
    labels every series with its window (``report.compared_windows``).
    """
    table = figuredata.compare_table(runs, reference, allow_mixed_windows=allow_mixed_windows)
    series: list[tuple[str, dict[str, tuple[float, tuple[float, float] | None]]]] = [
        (
            name,
            {
                f"{r.case}@{r.tokens}": (
                    r.reduction_pct,
                    None if pd.isna(r.low) else (float(r.low), float(r.high)),
                )
                for r in rows.itertuples()
            },
        )
        for name, rows in table.groupby("series", sort=False)
    ]
    keys = sorted({k for _, v in series for k in v}, key=_key_order)
    if not keys:
        return _message_panel("Reduction across runs", "no valid rows to compare")
    diffs = [
        d
        for d in compare.differences(dict(runs))
        if isinstance(d["difference"], stats.ReductionDifference)
    ]
    caption = compare.regime_caption(dict(runs), dict(reference) if reference else None)
    height = 0.2 * len(keys) * max(len(series), 2) + 2.6
    fig = _new(13 if diffs else 10, height)
    if diffs:
        ax, dax = fig.subplots(1, 2, sharey=True, width_ratios=(3, 2))
    else:
        ax, dax = fig.add_subplot(), None
    several = len({k.split("@")[1] for k in keys}) > 1
    step = 0.8 / len(series)
    ypos = {key: len(keys) - 1 - j for j, key in enumerate(keys)}
    for i, (name, values) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * step
        ys, xs, lows, highs = [], [], [], []
        for key, (value, ci) in values.items():
            ys.append(ypos[key] - offset)
            xs.append(value)
            lows.append(value - ci[0] if ci else 0.0)
            highs.append(ci[1] - value if ci else 0.0)
        has_ci = any(lows) or any(highs)
        ax.errorbar(
            xs,
            ys,
            xerr=[lows, highs] if has_ci else None,
            ls="",
            marker="o" if has_ci else "D",
            ms=6,
            capsize=3,
            color=SERIES_COLORS[i % len(SERIES_COLORS)],
            label=name,
        )
    ax.set_yticks(range(len(keys)), [_key_label(k, several) for k in keys][::-1])
    ax.axvline(0, color="grey", lw=1, ls="--")
    names = list(dict.fromkeys(table["series"]))
    clipped = _clip_intervals(
        ax,
        table,
        {
            i: ypos[f"{r.case}@{r.tokens}"] - (names.index(r.series) - (len(series) - 1) / 2) * step
            for i, r in zip(table.index, table.itertuples(), strict=True)
        },
        {
            i: SERIES_COLORS[names.index(name) % len(SERIES_COLORS)]
            for i, name in zip(table.index, table["series"], strict=True)
        },
    )
    ax.set_xlabel(
        "host latency reduction (%) with the verdict's 95 % interval"
        + ("; ◀ ▶ past the axis, its end printed" if clipped else "")
    )
    ax.set_title("Reduction per case across runs", fontsize=11)
    fig.legend(
        *ax.get_legend_handles_labels(),
        loc="outside upper center",
        ncols=min(len(series), 4),
        fontsize=8,
        frameon=False,
    )
    ax.grid(axis="x", alpha=0.3)
    alt = [
        f"{name}: " + ", ".join(f"{_key_label(k, several)} {v[0]:.1f} %" for k, v in values.items())
        for name, values in series
    ]
    if dax is not None:
        pairs = sorted({(d["a"], d["b"]) for d in diffs})
        dstep = 0.8 / len(pairs)
        for i, pair in enumerate(pairs):
            offset = (i - (len(pairs) - 1) / 2) * dstep
            mine = [d for d in diffs if (d["a"], d["b"]) == pair]
            for d in mine:
                diff = d["difference"]
                y = ypos[f"{d['case']}@{d['tokens']}"] - offset
                color = DIFFERS_COLOR if diff.excludes_zero else VERDICT_COLORS[stats.NO_DIFFERENCE]
                dax.hlines(y, diff.low, diff.high, color=color, lw=2.2, gid="difference")
                dax.plot(diff.difference_pp, y, "o", color=color)
            alt.append(
                f"difference {pair[1]} minus {pair[0]}: "
                + ", ".join(
                    f"{CASE_LABELS.get(d['case'], d['case'])} {d['difference'].difference_pp:+.1f}"
                    f" pp [{d['difference'].low:+.1f}, {d['difference'].high:+.1f}]"
                    for d in mine
                )
            )
        dax.axvline(0, color="grey", lw=1, ls="--")
        dax.set_xlabel("difference B − A (percentage points), 95 % interval")
        names = "; ".join(f"B = {b}, A = {a}" for a, b in pairs)
        dax.set_title(textwrap.fill(f"Same configuration: {names}", 60), fontsize=9)
        dax.grid(axis="x", alpha=0.3)
        dax.legend(
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
    if caption:
        fig.supxlabel(textwrap.fill(caption, 150), fontsize=9, color="#9a6700")
    fig.alt_text = (
        "Dot-and-interval plot of the host latency reduction per case for each run. "
        + "; ".join(alt)
        + (f". {caption}" if caption else ".")
    )
    return fig
