"""A self-contained HTML report of one run (tables inline, figures as inline PNGs).

The sections are the report notebook's, from the same ``report`` and ``plots``
functions, so ``embedbench report DIR --html`` needs no Jupyter kernel.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from embedbench.report import plots, tables
from embedbench.report.results import RunResult, write_text_atomic

FIGURE_DPI = 90
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
img { max-width: 100%; }
"""


def figure_png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI)
    return buffer.getvalue()


def _img(fig: Figure) -> str:
    data = base64.b64encode(figure_png(fig)).decode("ascii")
    return f'<img alt="figure" src="data:image/png;base64,{data}">'


def _table(frame: pd.DataFrame, index: bool = False) -> str:
    return frame.to_html(index=index, border=0, escape=True)


def render_html(result: RunResult) -> str:
    """The whole report of ``result`` as one HTML page."""
    pr = tables.pr_table(result)
    parts = [
        f"<h1>embedbench report: {html.escape(str(result.directory))}</h1>",
        tables.banner_html(result),
        "<h2>Before/after (PR #7477 format)</h2>",
        _table(pr),
        "<p>Markdown, ready to paste:</p>",
        f"<pre>{html.escape(tables.to_pr_markdown(pr))}</pre>",
        "<h2>Interval and verdict</h2>",
        _table(tables.statistics_table(result)),
        _img(plots.reduction_forest(result)),
        "<h2>Diagnostics</h2>",
        _table(tables.diagnostics_table(result)),
        "<pre>" + html.escape("\n".join(tables.notes(result)) or "nothing stood out") + "</pre>",
        "<h2>Per-block distributions</h2>",
        _img(plots.block_distributions(result)),
        "<h2>Per-call distribution</h2>",
        _img(plots.call_distribution(result)),
        "<h2>CPU frequency</h2>",
        _img(plots.frequency_trace(result)),
        "<h2>Timer floor (empty call, μs)</h2>",
        _table(tables.timer_floor_table(result)),
        "<h2>Validation</h2>",
        _table(tables.validation_table(result)),
        "<h2>Provenance</h2>",
        _table(tables.provenance_table(result), index=True),
    ]
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>embedbench report</title><style>{STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )


def write_html(result: RunResult, path: str | Path) -> Path:
    """Write the report of ``result`` to ``path`` atomically; return the path."""
    target = Path(path)
    write_text_atomic(target, render_html(result))
    return target
