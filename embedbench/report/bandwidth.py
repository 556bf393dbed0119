"""Each form's achieved memory bandwidth per call, against the run's memory ceiling.

A form's bytes moved per call (work.json's ``bytes_read + bytes_written``) over its
headline host latency (the summary row's ``host_us``: the PR table's Before and After)
is the rate it moved them at; over the streaming-copy ceiling metadata.json records
(``memory_ceiling.bytes_per_s``) it is a share of what the memory system gives the
measuring core. A share near 100 % is a form at the memory system's limit: it gets
faster only by moving fewer bytes; a fixed form far below it still has time to win
(docs/method.md, "The memory ceiling"). The arithmetic is ``achieved``; the rest reads
rows. Nothing here imports torch or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from embedbench.cases import VARIANTS
from embedbench.report.results import RunResult
from embedbench.report.tables import input_label
from embedbench.report.work import CaseWork, case_work, format_bytes

__all__ = [
    "BANDWIDTH_COLUMNS",
    "Achieved",
    "achieved",
    "achieved_rows",
    "bandwidth_caption",
    "bandwidth_table",
    "bytes_moved",
    "ceiling_bytes_per_s",
    "ceiling_text",
    "on_host",
    "share_sentence",
]

BANDWIDTH_COLUMNS = (
    *("Input", "Moved per call", "Before (GB/s)", "After (GB/s)"),
    *("Before, of ceiling", "After, of ceiling"),
)
GB = 1e9  # decimal, as format_bytes


@dataclass(frozen=True)
class Achieved:
    """One form of one case: its bytes moved per call, headline latency and the rate
    they give (``share``: of the ceiling, 1.0 at it; None without a ceiling)."""

    case: str
    tokens: int
    variant: str
    bytes_moved: int
    host_us: float
    bytes_per_s: float
    share: float | None


def achieved(
    moved: float, host_us: float, ceiling: float | None = None
) -> tuple[float, float | None]:
    """(bytes per second, its share of ``ceiling``) of ``moved`` bytes in ``host_us`` µs;
    the share is None without a ceiling."""
    if host_us <= 0:
        raise ValueError(f"a call takes a positive time, got {host_us!r} µs")
    rate = moved / (host_us * 1e-6)
    return rate, (rate / ceiling if ceiling else None)


def bytes_moved(row: Mapping[str, Any]) -> int | None:
    """A work.json row's bytes read plus written (None where either is missing)."""
    read, written = row.get("bytes_read"), row.get("bytes_written")
    return None if read is None or written is None else int(read) + int(written)


def ceiling_bytes_per_s(metadata: Mapping[str, Any]) -> float | None:
    """The run's memory ceiling in bytes per second (None where none was recorded)."""
    value = (metadata.get("memory_ceiling") or {}).get("bytes_per_s")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def on_host(metadata: Mapping[str, Any]) -> bool:
    """Whether the forms moved their bytes in the memory the ceiling was taken of: the
    host's, on a CPU run (on CUDA they move in device memory, so no share is taken)."""
    return metadata.get("device", "cpu") == "cpu"


def _host_us(result: RunResult, work: CaseWork) -> Mapping[str, Any]:
    row = result.summary_row(work.case, work.tokens) or {}
    return (row.get("host_us") or {}) if row.get("valid", True) else {}


def achieved_rows(result: RunResult) -> list[Achieved]:
    """Every form of every case with both a ledger and a headline latency, in table
    order (baseline first); no share on a device run (``on_host``)."""
    ceiling = ceiling_bytes_per_s(result.metadata) if on_host(result.metadata) else None
    rows = []
    for work in case_work(result):
        host = _host_us(result, work)
        for variant in VARIANTS:
            moved = bytes_moved(work.baseline if variant == "baseline" else work.fixed)
            latency = host.get(variant)
            if moved is None or not isinstance(latency, int | float) or latency <= 0:
                continue
            rate, share = achieved(moved, float(latency), ceiling)
            rows.append(Achieved(work.case, work.tokens, variant, moved, latency, rate, share))
    return rows


def _share_text(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f} %"


def bandwidth_table(result: RunResult) -> pd.DataFrame:
    """One row per case (and length, when several): the bytes each form moves per call,
    the rate it moved them at (GB/s) and that rate's share of the memory ceiling
    (``n/a`` without one)."""
    rows = achieved_rows(result)
    by_case: dict[tuple[str, int], dict[str, Achieved]] = {}
    for row in rows:
        by_case.setdefault((row.case, row.tokens), {})[row.variant] = row
    several = len({tokens for _, tokens in by_case}) > 1
    data = []
    for (case, tokens), forms in by_case.items():
        before, after = forms.get("baseline"), forms.get("fixed")
        moved = " → ".join(format_bytes(f.bytes_moved) if f else "n/a" for f in (before, after))
        data.append(
            {
                "Input": input_label(case, tokens, several),
                "Moved per call": moved,
                "Before (GB/s)": f"{before.bytes_per_s / GB:.2f}" if before else "n/a",
                "After (GB/s)": f"{after.bytes_per_s / GB:.2f}" if after else "n/a",
                "Before, of ceiling": _share_text(before.share if before else None),
                "After, of ceiling": _share_text(after.share if after else None),
            }
        )
    return pd.DataFrame(data, columns=list(BANDWIDTH_COLUMNS))


def ceiling_text(metadata: Mapping[str, Any]) -> str | None:
    """The ceiling in words: ``21.4 GB/s (a streaming copy of 256 MiB on core 0, best of
    5, 0.34 s)``; None where none was recorded, the reason where the copy failed."""
    found = metadata.get("memory_ceiling")
    if not found:
        return None
    rate = ceiling_bytes_per_s(metadata)
    if rate is None:
        return f"not measured ({found.get('reason') or 'no reason recorded'})"
    size = f"{int(found.get('buffer_bytes') or 0) / 2**20:.0f} MiB"
    core = found.get("core")
    where = f" on core {core}" if core is not None else ""
    cost = found.get("seconds")
    took = f", {cost:.2f} s" if isinstance(cost, int | float) and cost > 0 else ""
    best = f"best of {found.get('repetitions')}"
    return f"{rate / GB:.1f} GB/s (a streaming copy of {size}{where}, {best}{took})"


def bandwidth_caption(result: RunResult) -> str:
    """One line under the table: where the rates come from, the ceiling, and what a
    share near 100 % means."""
    ceiling = ceiling_text(result.metadata)
    source = (
        "Bytes moved per call (work.json's bytes read + written) over the headline host "
        "latency (the PR table's Before and After)"
    )
    if ceiling is None or ceiling_bytes_per_s(result.metadata) is None:
        missing = "no memory ceiling recorded" if ceiling is None else f"memory ceiling {ceiling}"
        return f"{source}; {missing}, so no share."
    if not on_host(result.metadata):
        return (
            f"{source}. No share: the memory ceiling, {ceiling}, is the host's, and on "
            f"{result.metadata.get('device')} the forms move their bytes in device memory."
        )
    return (
        f"{source}, against a memory ceiling of {ceiling}. A share near 100 % means the "
        "form sits at the memory system's limit and gets faster only by moving fewer "
        "bytes; a fixed form far below it still has time to win; above 100 %, its bytes "
        "stay in cache between calls."
    )


def _span(values: list[float]) -> str:
    low, high = (f"{100 * v:.0f}" for v in (min(values), max(values)))
    return f"{low} %" if low == high else f"{low}–{high} %"


def share_sentence(result: RunResult) -> str | None:
    """The PR comment's line: each form's share of the ceiling over the cases, e.g.
    "Memory bandwidth per call, of a 21.4 GB/s copy ceiling: baseline 71–85 %, fixed
    64–85 % (near 100 %: at the memory system's limit)." (None without a ceiling or a
    ledger, and on a device run)."""
    ceiling = ceiling_bytes_per_s(result.metadata)
    rows = [r for r in achieved_rows(result) if r.share is not None]
    if ceiling is None or not rows:
        return None
    spans = [
        f"{variant} {_span([r.share for r in rows if r.variant == variant])}"  # type: ignore[misc]
        for variant in VARIANTS
        if any(r.variant == variant for r in rows)
    ]
    return (
        f"Memory bandwidth per call, of a {ceiling / GB:.1f} GB/s copy ceiling: "
        f"{', '.join(spans)} (near 100 %: at the memory system's limit)."
    )
