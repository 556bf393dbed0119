"""What a run does not establish, in one place: the notebooks, the HTML page and the PR
comment render ``not_established`` (docs/method.md, "What a run does not establish").

Each item applies to some runs only: host latency and validation's reach to every run,
the CPU's lookup to CPU runs, the synthetic weights to synthetic-checkpoint runs.
"""

from __future__ import annotations

from typing import Any

from embedbench.report.tables import family_label, geometry_text, published_geometry

__all__ = ["TITLE", "not_established"]

TITLE = "What this does not establish"

HOST_LATENCY = (
    "This is the wrapper's host latency, not end-to-end throughput: the PR's savings "
    "did not show up as a consistent end-to-end gain."
)
VALIDATION = (
    "Validation counts the lookups and compares the two wrappers' outputs on these inputs; "
    "it does not establish batch invariance or the full model's output equality."
)
CPU_LOOKUP = (
    "This is a CPU run: on a CPU the lookup is a memory copy the host thread does itself, "
    "while on a GPU it is a kernel launch, so CPU reductions do not predict GPU ones."
)


def _synthetic(metadata: dict[str, Any]) -> str:
    """The synthetic checkpoint's item: the real geometry, or not even that."""
    geometry = geometry_text(metadata)
    if published_geometry(metadata) is False and geometry is not None:
        return (
            f"The checkpoint is synthetic, {geometry}: neither the real weights nor "
            f"{family_label(metadata)}'s published geometry."
        )
    shown = f" ({geometry})" if geometry else ""
    return f"The checkpoint is synthetic: it has the real geometry{shown}, not the real weights."


def not_established(metadata: dict[str, Any]) -> list[str]:
    """The items that apply to a run, from its metadata, one sentence each."""
    items = [HOST_LATENCY, VALIDATION]
    if metadata.get("device") == "cpu":
        items.append(CPU_LOOKUP)
    if metadata.get("synthetic"):
        items.append(_synthetic(metadata))
    return items
