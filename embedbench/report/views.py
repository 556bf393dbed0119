"""Views: one figure drawn twice from one table, the matplotlib PNG and the Vega-Lite chart.

A ``View`` is what a report section shows for an interactive figure. In a notebook its
display bundle holds both (``application/vnd.vegalite.v5+json``, which JupyterLab renders,
and ``image/png`` with the alt text, which GitHub and nbviewer show); in the HTML page it
is a chart container, its spec, and the PNG, which the page keeps under the chart.
docs/interactive.md says why this pair and how the page renders it offline.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from embedbench.report import figuredata, interactive, static, workcharts, workfigures
from embedbench.report.results import RunResult

__all__ = [
    "VEGA_FILES",
    "View",
    "block_distributions",
    "call_distribution",
    "canary_trace",
    "chart_html",
    "compare_reductions",
    "frequency_trace",
    "gpu_clock_trace",
    "operator_drilldown",
    "paired_blocks",
    "reduction_forest",
    "spec_json",
    "vega_scripts",
    "work_disagreement",
]

VEGA_FILES = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js", "embed.js")


@dataclass(frozen=True)
class View:
    """A static figure and the interactive chart of the same table."""

    figure: static.ReportFigure
    spec: dict[str, Any]

    @property
    def alt_text(self) -> str:
        """The static figure's alt text (the chart's description too)."""
        return self.figure.alt_text or "figure"

    def bundle(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The display bundle: the chart, the PNG (alt text in its metadata), a text line.
        No text/html: JupyterLab would prefer it to the chart."""
        png = base64.b64encode(self.figure.png()).decode("ascii")
        data = {
            interactive.MIME: self.spec,
            "image/png": png,
            "text/plain": f"<figure: {self.alt_text}>",
        }
        metadata = {
            "image/png": {"alt": self.alt_text},
            interactive.MIME: {"embed_options": interactive.EMBED_OPTIONS},
        }
        return data, metadata

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.bundle()

    def _ipython_display_(self) -> None:
        """Display once, from the bundle (the inline backend would draw the PNG again)."""
        from IPython.display import display

        data, metadata = self.bundle()
        display(data, raw=True, metadata=metadata)

    def html(self) -> str:
        """The chart's container, its spec and the PNG with its alt text (shown until the
        page's script renders the chart, and kept below it)."""
        return chart_html(self.spec, self.figure.img_html())

    def to_html(self) -> str:
        """As a report section's item in the HTML page: ``html()``."""
        return self.html()


def spec_json(spec: dict[str, Any]) -> str:
    """A spec as JSON safe inside a ``<script>`` element (no ``<`` at all)."""
    return json.dumps(spec, ensure_ascii=False).replace("<", "\\u003c")


def chart_html(spec: dict[str, Any], img: str) -> str:
    """The markup ``data/vega/embed.js`` renders: the same as the nbconvert template's."""
    return (
        '<div class="eb-view"><div class="eb-chart"></div>'
        f'<script type="application/json" class="eb-spec">{spec_json(spec)}</script>'
        f"{img}</div>"
    )


def vega_scripts() -> str:
    """The vega, vega-lite and vega-embed builds and the page's script, each inlined once."""
    folder = resources.files("embedbench.report") / "data" / "vega"
    return "\n".join(
        f"<script>\n{(folder / name).read_text(encoding='utf-8')}\n</script>" for name in VEGA_FILES
    )


def paired_blocks(result: RunResult) -> View:
    """The paired blocks over time."""
    figure = static.paired_blocks(result)
    table = figuredata.paired_table(result)
    spec = interactive.paired_blocks(table, figure.alt_text, figuredata.worker_spans(table))
    return View(figure, spec)


def block_distributions(result: RunResult) -> View:
    """The per-block distributions."""
    figure = static.block_distributions(result)
    spec = interactive.block_distributions(figuredata.paired_table(result), figure.alt_text)
    return View(figure, spec)


def call_distribution(result: RunResult) -> View:
    """Every call: the PNG of the most complex case, the chart of any case and length."""
    figure = static.call_distribution(result)
    spec = interactive.call_distribution(figuredata.call_table(result), figure.alt_text)
    return View(figure, spec)


def reduction_forest(result: RunResult) -> View:
    """The verdict's intervals."""
    figure = static.reduction_forest(result)
    spec = interactive.reduction_forest(
        figuredata.forest_table(result), figuredata.forest_workers(result), figure.alt_text
    )
    return View(figure, spec)


def work_disagreement(result: RunResult) -> View:
    """Each case's wall-time reduction against its counted work reduction."""
    figure = workfigures.work_disagreement(result)
    table = figuredata.disagreement_table(result)
    spec = workcharts.work_disagreement(table, figuredata.diagonal_table(table), figure.alt_text)
    return View(figure, spec)


def operator_drilldown(result: RunResult) -> View:
    """Each case's operators: a panel per case in the PNG, a case picked by a click in the
    chart."""
    figure = workfigures.operator_drilldown(result)
    spec = workcharts.operator_drilldown(
        figuredata.operator_table(result), figuredata.operator_cases(result), figure.alt_text
    )
    return View(figure, spec)


def _trace(
    result: RunResult, figure: static.ReportFigure | None, column: str, y_title: str, **kw: Any
) -> View | None:
    if figure is None:
        return None
    title = figure.axes[0].get_title()
    spec = interactive.edge_trace(
        figuredata.edge_table(result),
        figuredata.paired_table(result),
        column,
        title,
        y_title,
        figure.alt_text,
        **kw,
    )
    return View(figure, spec)


def frequency_trace(result: RunResult) -> View | None:
    """The core's MHz at each block half's edges (None where not observable)."""
    figure = static.frequency_trace(result)
    return _trace(result, figure, "cpu_mhz", "MHz (axis not from 0)", segments=True)


def gpu_clock_trace(result: RunResult) -> View | None:
    """The GPU's SM clock at each block half's edges (None where not recorded)."""
    figure = static.gpu_clock_trace(result)
    return _trace(result, figure, "gpu_mhz", "SM clock, MHz (axis not from 0)", segments=True)


def canary_trace(result: RunResult) -> View | None:
    """The canary at each block half's edge, with each worker's median (None without)."""
    figure = static.canary_trace(result)
    medians = figuredata.worker_medians(result)
    return _trace(result, figure, "canary_us", "canary read, µs (axis not from 0)", medians=medians)


def compare_reductions(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> View:
    """The reductions across runs (and the PR's table); the PNG adds the same-configuration
    differences beside them."""
    mixed = {"allow_mixed_windows": allow_mixed_windows}
    figure = static.compare_reductions(runs, reference, **mixed)
    table = figuredata.compare_table(runs, reference, **mixed)
    return View(figure, interactive.compare_reductions(table, figure.alt_text))
