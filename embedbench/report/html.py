"""A self-contained HTML report of one run (tables inline, figures as inline PNGs and
interactive charts).

The sections are the report notebook's: the same list (``sections.REPORT_SECTIONS``) and
the same functions, so ``embedbench report DIR --html`` needs no Jupyter kernel and shows
what the notebook shows, every figure with its alt text. The charts' JavaScript (vega,
vega-lite, vega-embed and the page's script) is inlined once, at the end of the page:
nothing is fetched (docs/interactive.md).
"""

from __future__ import annotations

import html
from pathlib import Path

from embedbench.errors import OutputDirError
from embedbench.report import sections, views
from embedbench.report.results import RunResult, write_text_atomic

__all__ = ["STYLE", "render_html", "write_html"]

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
img { max-width: 100%; }
p.note { color: #57606a; font-style: italic; }
.eb-view { margin: 0.5em 0 1.5em; }
.eb-view details.eb-static summary { color: #57606a; cursor: pointer; font-size: 13px; }
.vega-bindings { margin: 4px 0; font-size: 13px; }
.vega-bind { display: inline-block; margin-right: 1em; }
"""


def render_html(result: RunResult) -> str:
    """The whole report of ``result`` as one HTML page."""
    parts = [f"<h1>embedbench report: {html.escape(str(result.directory))}</h1>"]
    charts = False
    for section in sections.REPORT_SECTIONS:
        if section.title:
            parts.append(f"<h2>{html.escape(section.title)}</h2>")
        if section.text:
            parts.append(sections.markdown_html(section.text))
        for item in section.render(result):
            charts |= isinstance(item, views.View)
            parts.append(sections.item_html(item))
    if charts:
        parts.append(views.vega_scripts())
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>embedbench report</title><style>{STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )


def write_html(result: RunResult, path: str | Path) -> Path:
    """Write the report of ``result`` to ``path`` atomically, creating its folder (and the
    missing ones above it) as ``--output-dir`` does; return the path. A write that fails
    is one line (``OutputDirError``)."""
    target = Path(path)
    page = render_html(result)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, page)
    except OSError as exc:
        raise OutputDirError(
            f"cannot write the HTML report at {target} ({exc.strerror or exc}); "
            "choose another OUT.html"
        ) from None
    return target
