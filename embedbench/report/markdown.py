"""The one markdown table writer: unpadded GitHub tables, as the PR's own text.

``| a | b |`` rows under a ``| --- | ---: |`` rule (``l`` or ``r`` per column). The PR
table, the statistics the CLI prints and the benchmarks' tables all come from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["frame_markdown", "markdown_table"]


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, align: str | None = None
) -> str:
    """A GitHub markdown table; ``align`` has one ``l`` or ``r`` per column (default: l, r…).

    Cells are written with ``str``; format numbers before passing them.
    """
    align = align or ("l" + "r" * (len(headers) - 1))
    if len(align) != len(headers):
        raise ValueError(f"align needs one character per column: {align!r} for {len(headers)}")
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def frame_markdown(frame: Any, *, align: str | None = None) -> str:
    """A pandas DataFrame (its columns, not its index) as a ``markdown_table``."""
    return markdown_table(
        [str(c) for c in frame.columns],
        (["" if v is None else v for v in values] for values in frame.values.tolist()),
        align=align,
    )
