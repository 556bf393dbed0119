"""Figures of a run, returned to the caller (never shown, never a backend switch).

Figures are built with ``matplotlib.figure.Figure`` rather than pyplot, so
library code holds no global figure state; a notebook displays the returned
figure, the HTML export saves it as an inline PNG.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.report import tables
from embedbench.report.results import RunResult

COLORS = {"baseline": "#cf4520", "fixed": "#1f6fb2"}


def _message_panel(fig: Figure, title: str, message: str) -> Figure:
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(
        0.5,
        0.5,
        textwrap.fill(message, 80),
        ha="center",
        va="center",
        fontsize=11,
        transform=ax.transAxes,
    )
    return fig


def _case_keys(frame: pd.DataFrame) -> list[tuple[str, int]]:
    keys = {(c, t) for c, t in zip(frame["case"], frame["tokens"], strict=True)}
    return sorted(keys, key=lambda k: tables.table_order(*k))


def block_distributions(result: RunResult) -> Figure:
    """Block medians of host latency per variant: one panel per case (and length)."""
    frame = tables.blocks_frame(result)
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    if frame.empty:
        return _message_panel(fig, "Per-block host latency", "no measured blocks in this run")
    keys = _case_keys(frame)
    several = len({t for _, t in keys}) > 1
    ncols = min(3, len(keys))
    nrows = int(np.ceil(len(keys) / ncols))
    fig.set_size_inches(4.2 * ncols, 3.3 * nrows + 0.4)
    rng = np.random.default_rng(0)
    for i, (case, tokens) in enumerate(keys):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        sub = frame[(frame["case"] == case) & (frame["tokens"] == tokens)]
        data = [sub[sub["variant"] == v]["median_host_observed_us"].to_numpy() for v in VARIANTS]
        box = ax.boxplot(data, widths=0.5, patch_artist=True, showfliers=False)
        ax.set_xticks([1, 2], list(VARIANTS))
        for patch, variant in zip(box["boxes"], VARIANTS, strict=True):
            patch.set_facecolor(COLORS[variant])
            patch.set_alpha(0.25)
        for x, (values, variant) in enumerate(zip(data, VARIANTS, strict=True), start=1):
            jitter = rng.uniform(-0.12, 0.12, size=len(values))
            ax.scatter(x + jitter, values, s=14, color=COLORS[variant], zorder=3)
        row = result.summary_row(case, tokens) or {}
        reduction = row.get("reduction_pct")
        suffix = "" if reduction is None else f"  ({reduction:.1f} % lower)"
        ax.set_title(tables.input_label(case, tokens, several) + suffix, fontsize=10)
        ax.set_ylabel("block median host latency (μs)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Per-block medians: baseline vs fixed (each dot is one block)")
    return fig


def call_distribution(result: RunResult, case: str | None = None) -> Figure:
    """Every call's host latency for one case, per variant (violin + block medians)."""
    case = case or tables.detail_case(result)
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    calls = tables.calls_frame(result, case) if case else pd.DataFrame()
    if calls.empty:
        return _message_panel(fig, "Per-call host latency", "no measured calls in this run")
    ax = fig.add_subplot()
    data = [calls[calls["variant"] == v]["host_observed_us"].to_numpy() for v in VARIANTS]
    parts = ax.violinplot(data, showmedians=True, showextrema=False)
    for body, variant in zip(parts["bodies"], VARIANTS, strict=True):
        body.set_facecolor(COLORS[variant])
        body.set_alpha(0.35)
    high = max(np.percentile(d, 99) for d in data if len(d))
    low = min(np.percentile(d, 0.5) for d in data if len(d))
    ax.set_ylim(low * 0.95, high * 1.05)
    ax.set_xticks([1, 2], [f"{v}\n({len(d)} calls)" for v, d in zip(VARIANTS, data, strict=True)])
    ax.set_ylabel("host latency per call (μs), 0.5th–99th percentile shown")
    ax.set_title(f"Per-call distribution: {CASE_LABELS.get(case, case)}")
    ax.grid(axis="y", alpha=0.3)
    return fig


def frequency_trace(result: RunResult) -> Figure:
    """CPU MHz of the pinned core at block start and end over wall time, per variant."""
    frame = tables.blocks_frame(result)
    source = result.metadata.get("cpu_frequency_source", "unknown")
    core = result.metadata.get("cpu_core")
    fig = Figure(figsize=(10, 4), layout="constrained")
    title = f"CPU frequency of core {core} (source: {source})"
    if frame.empty:
        return _message_panel(fig, title, "no measured blocks in this run")
    mhz = pd.concat([frame["cpu_mhz_start"], frame["cpu_mhz_end"]]).dropna()
    if mhz.empty:
        return _message_panel(
            fig, title, f"CPU frequency not observable on this machine (source: {source})."
        )
    if mhz.nunique() == 1:
        return _message_panel(
            fig,
            title,
            f"CPU frequency not observable on this machine: {source} reports a constant "
            f"{mhz.iloc[0]:.0f} MHz at every block (typical of a VM or a fixed nominal value).",
        )
    ax = fig.add_subplot()
    t0 = frame["wall_start"].min()
    for variant in VARIANTS:
        sub = frame[frame["variant"] == variant]
        times = np.concatenate([sub["wall_start"] - t0, sub["wall_end"] - t0])
        values = np.concatenate([sub["cpu_mhz_start"], sub["cpu_mhz_end"]])
        order = np.argsort(times)
        ax.plot(
            times[order], values[order], marker=".", lw=0.8, color=COLORS[variant], label=variant
        )
    ax.set_xlabel("wall time since first block (s)")
    ax.set_ylabel("MHz")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


def reduction_forest(result: RunResult) -> Figure:
    """Reduction per case with its 95 % interval; the dashed line is no change."""
    rows = [r for r in result.summary if r.get("valid") and r.get("reduction_ci95_pct")]
    fig = Figure(figsize=(8, 0.55 * max(len(rows), 1) + 1.5), layout="constrained")
    if not rows:
        return _message_panel(fig, "Host latency reduction", "no valid measured case")
    several = len({r["tokens"] for r in rows}) > 1
    rows.sort(key=lambda r: tables.table_order(r["case"], r["tokens"]), reverse=True)
    ax = fig.add_subplot()
    for y, row in enumerate(rows):
        # The interval and the headline are drawn apart: in one process the interval is
        # Hodges–Lehmann's, which need not be centred on the PR's ratio of medians.
        low, high = row["reduction_ci95_pct"]
        ax.hlines(y, low, high, color="#333", lw=2)
        ax.plot([low, high], [y, y], "|", color="#333", ms=10)
        ax.plot(row["reduction_pct"], y, "o", color="#333")
    ax.axvline(0, color="grey", ls="--", lw=1)
    ax.set_yticks(
        range(len(rows)), [tables.input_label(r["case"], r["tokens"], several) for r in rows]
    )
    ax.set_xlabel("host latency reduction (%) with the interval the verdict uses")
    ax.set_title("Reduction per case (positive: fixed is faster)")
    ax.grid(axis="x", alpha=0.3)
    return fig


def compare_reductions(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> Figure:
    """Reduction per case across runs (and the PR's reference table), side by side.

    Runs timed with different windows are refused unless ``allow_mixed_windows``, which
    labels every series with its window (``report.compared_windows``).
    """
    seen = tables.compared_windows(
        dict(runs), dict(reference) if reference else None, allow_mixed=allow_mixed_windows
    )
    series: list[tuple[str, dict[str, tuple[float, tuple[float, float] | None]]]] = []
    for name, result in runs.items():
        values = {}
        for row in result.summary:
            if row.get("valid") and row.get("reduction_pct") is not None:
                ci = row.get("reduction_ci95_pct")
                values[f"{row['case']}@{row['tokens']}"] = (
                    row["reduction_pct"],
                    tuple(ci) if ci else None,
                )
        series.append((tables.series_label(name, seen), values))
    if reference is not None:
        tokens = reference.get("tokens")
        series.append(
            (
                tables.series_label(tables.reference_name(dict(reference)), seen),
                {f"{r['case']}@{tokens}": (r["reduction_pct"], None) for r in reference["rows"]},
            )
        )
    keys = sorted(
        {k for _, v in series for k in v},
        key=lambda k: tables.table_order(k.split("@")[0], int(k.split("@")[1])),
    )
    fig = Figure(
        figsize=(10, 0.5 * max(len(keys), 1) * max(len(series), 1) / 2 + 2), layout="constrained"
    )
    if not keys:
        return _message_panel(fig, "Reduction across runs", "no valid rows to compare")
    ax = fig.add_subplot()
    height = 0.8 / len(series)
    several = len({k.split("@")[1] for k in keys}) > 1
    for i, (name, values) in enumerate(series):
        ys, xs, errs = [], [], [[], []]
        for j, key in enumerate(keys):
            if key not in values:
                continue
            value, ci = values[key]
            ys.append(len(keys) - 1 - j - (i - (len(series) - 1) / 2) * height)
            xs.append(value)
            errs[0].append(value - ci[0] if ci else 0.0)
            errs[1].append(ci[1] - value if ci else 0.0)
        has_ci = any(errs[0]) or any(errs[1])
        ax.barh(
            ys,
            xs,
            height=height * 0.9,
            xerr=errs if has_ci else None,
            capsize=3,
            label=name,
            alpha=0.8,
        )
    labels = [tables.input_label(k.split("@")[0], int(k.split("@")[1]), several) for k in keys]
    ax.set_yticks(range(len(keys)), labels[::-1])
    ax.axvline(0, color="grey", lw=1)
    ax.set_xlabel("host latency reduction (%)")
    ax.set_title("Reduction per case across runs (bars: 95 % interval where measured)")
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return fig
