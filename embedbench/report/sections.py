"""The report's sections: one list for the notebooks and the HTML page.

Each section has a title, a paragraph (markdown) and a function of the run that returns
what it shows: tables (``Table``: a DataFrame), figures (``static.ReportFigure``, with alt text),
views (``views.View``: the figure's PNG and its interactive chart, docs/interactive.md),
one-line notes and preformatted text. ``scripts/build_notebooks.py`` writes one markdown
and one code cell per section (``show(sections.NAME(result))``); ``html.render_html``
calls the same functions, so both paths show the same sections from the same code.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from embedbench.report import bandwidth, banner, compare, limits, static, tables, views, work
from embedbench.report.results import RunResult

__all__ = [
    "REPORT_SECTIONS",
    "Item",
    "Note",
    "Preformatted",
    "RawHtml",
    "Section",
    "Table",
    "block_distributions",
    "call_distribution",
    "comparison",
    "cpu_frequency",
    "diagnostics",
    "interval_and_verdict",
    "item_html",
    "markdown_html",
    "memory_bandwidth",
    "not_established",
    "paired_blocks",
    "pr_format",
    "provenance",
    "show",
    "status",
    "timer_floor_and_validation",
    "work_against_time",
    "work_comparison",
    "work_per_call",
]


@dataclass(frozen=True)
class Note:
    """A line of text (e.g. why a figure is not drawn)."""

    text: str

    def to_html(self) -> str:
        """A paragraph in the note style."""
        return f'<p class="note">{html.escape(self.text)}</p>'

    def _ipython_display_(self) -> None:
        print(self.text)


@dataclass(frozen=True)
class Preformatted:
    """Text shown as is (the PR's markdown, the diagnostics' notes)."""

    text: str

    def to_html(self) -> str:
        """A ``<pre>`` block."""
        return f"<pre>{html.escape(self.text)}</pre>"

    def _ipython_display_(self) -> None:
        print(self.text)


@dataclass(frozen=True)
class RawHtml:
    """HTML shown as is (the banner)."""

    html: str

    def to_html(self) -> str:
        """The markup itself."""
        return self.html

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(HTML(self.html))


@dataclass(frozen=True, eq=False)
class Table:
    """A table: styled in a notebook (``tables.styled``), plain ``<table>`` in the page."""

    frame: pd.DataFrame

    def to_html(self) -> str:
        """The frame as an HTML table (its index only when it names the rows)."""
        index = not isinstance(self.frame.index, pd.RangeIndex)
        return self.frame.to_html(index=index, border=0, escape=True)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(tables.styled(self.frame))


# What a section shows: each item renders itself, ``to_html()`` for the page and
# ``_ipython_display_()`` in a notebook, so neither path asks what it is.
Item = Table | views.View | static.ReportFigure | Note | Preformatted | RawHtml


@dataclass(frozen=True)
class Section:
    """A titled part of the report: ``render(result)`` returns what it shows."""

    title: str | None
    text: str
    render: Callable[[RunResult], list[Item]]

    @property
    def name(self) -> str:
        """The function's name, as the notebook cell calls it."""
        return self.render.__name__


def status(result: RunResult) -> list[Item]:
    """What was measured (family, PR, device, target, checkpoint), then the banner:
    failed validations, an unfinished run, a busy core."""
    heading = f"<h3>{html.escape(tables.headline(result))}</h3>"
    return [RawHtml(heading), RawHtml(banner.banner_html(result))]


def pr_format(result: RunResult) -> list[Item]:
    """The PR's before/after table, rendered and as markdown to paste."""
    pr = tables.pr_table(result)
    return [Table(pr), Preformatted(tables.to_pr_markdown(pr))]


def work_per_call(result: RunResult) -> list[Item]:
    """Each form's counted work per call (``work.work_table``), the headline's sentence
    and the table as markdown to paste; one line for a run without a ledger."""
    sentence = work.work_sentence(result)
    if sentence is None:
        return [Note("This run recorded no per-call ledger (work.json, from schema 6 on).")]
    table = work.work_table(result)
    return [Table(table), Note(sentence), Preformatted(tables.to_pr_markdown(table))]


def memory_bandwidth(result: RunResult) -> list[Item]:
    """Each form's achieved bandwidth per call and its share of the memory ceiling
    (``bandwidth.bandwidth_table``), with its caption; one line without a ledger."""
    table = bandwidth.bandwidth_table(result)
    if table.empty:
        return [Note("No bandwidth without a per-call ledger (work.json) and a latency.")]
    return [Table(table), Note(bandwidth.bandwidth_caption(result))]


def work_against_time(result: RunResult) -> list[Item]:
    """The wall-time reduction against the counted work reduction, and each case's
    operators; one line for a run without a ledger."""
    if not work.case_work(result):
        return [Note("No per-call ledger (work.json) in this run: nothing to set against time.")]
    return [views.work_disagreement(result), views.operator_drilldown(result)]


def interval_and_verdict(result: RunResult) -> list[Item]:
    """The statistics (``tables.verdict_tables``: the verdict's table, the interval's
    method once when every row shares it, the pooled view) and the forest plot."""
    verdict, pooled, method = tables.verdict_tables(result)
    items: list[Item] = [Table(verdict)]
    if method is not None:
        items.append(Note(f"Interval method, every row: {method}."))
    return [*items, Table(pooled), views.reduction_forest(result)]


def not_established(result: RunResult) -> list[Item]:
    """What the run does not establish (``limits.not_established``), as a list."""
    items = "".join(f"<li>{html.escape(i)}</li>" for i in limits.not_established(result.metadata))
    return [RawHtml(f"<ul>{items}</ul>")]


def paired_blocks(result: RunResult) -> list[Item]:
    """Each block's reduction over time, with the diagnostics drawn."""
    return [views.paired_blocks(result)]


def diagnostics(result: RunResult) -> list[Item]:
    """The diagnostics table and one line per diagnostic that fired."""
    lines = "\n".join(tables.notes(result)) or "nothing stood out"
    return [Table(tables.diagnostics_table(result)), Preformatted(lines)]


def block_distributions(result: RunResult) -> list[Item]:
    """Box and dots of block medians, each block's halves joined."""
    return [views.block_distributions(result)]


def call_distribution(result: RunResult) -> list[Item]:
    """Every call of the most complex case."""
    return [views.call_distribution(result)]


def cpu_frequency(result: RunResult) -> list[Item]:
    """The frequency trace, or one line saying it cannot be observed; the canary trace
    (the effective speed, which a VM shows where it hides the frequency); and on a GPU run
    with NVML, the SM clock trace."""
    trace = views.frequency_trace(result)
    items: list[Item] = (
        [trace]
        if trace is not None
        else [Note(static.frequency_note(result) or "CPU frequency not observable.")]
    )
    extra = [views.canary_trace(result), views.gpu_clock_trace(result)]
    return [*items, *(fig for fig in extra if fig is not None)]


def timer_floor_and_validation(result: RunResult) -> list[Item]:
    """The empty call's cost per metric and the lookup counts per case."""
    return [Table(tables.timer_floor_table(result)), Table(tables.validation_table(result))]


def provenance(result: RunResult) -> list[Item]:
    """What was measured where."""
    return [Table(tables.provenance_table(result))]


def _text(text: str) -> str:
    return textwrap.dedent(text).strip()


REPORT_SECTIONS: tuple[Section, ...] = (
    Section(None, "", status),
    Section(
        "Before/after in the PR's format",
        _text("""
        The first table is the PR's; the markdown below it pastes into a review as is. The
        reduction is the PR's own 1 − After/Before of each row's Before and After, in every
        design. The estimate the verdict's interval is built around is in the next table:
        with several workers it is the same number; with one process it is the
        Hodges–Lehmann estimate, which can differ from it.
        """),
        pr_format,
    ),
    Section(
        "Work per call",
        _text("""
        What each form does in one call, counted exactly from one more call of each, outside
        any timed window: the embedding lookups, every aten operator, the bytes its
        operators write and allocate (from their tensors' sizes) and the host–device syncs
        (none on a CPU), with the kernels on a GPU. Counts do not move with the host, so the
        delta (after less before, in bytes where it is bytes) is exact, and `embedbench gate
        --on work` gates on it. The operators, bytes read and each worker's agreement are in
        `work.json`.
        """),
        work_per_call,
    ),
    Section(
        "Memory bandwidth per call",
        _text("""
        Each form's bytes moved in one call (read + written, from `work.json`) over its
        host latency (the Before and After above) is the rate it moved them at; beside it,
        that rate's share of the memory ceiling: a streaming copy on the measuring core,
        timed once before the first worker (`memory_ceiling` in `metadata.json`).
        """),
        memory_bandwidth,
    ),
    Section(
        "Interval and verdict",
        _text("""
        One interval per case, the one the verdict and `embedbench gate` use: with several
        worker processes (the default) a t interval over each worker's own headline, which
        sees what differs between processes and moments and so predicts a rerun; with one
        process, Hodges–Lehmann over its blocks. The estimate is the one that interval is
        built around (with workers, the PR's statistic; in one process, Hodges–Lehmann's).
        `faster` or `slower` only when an interval of at least 95 % excludes 0; the MDE is
        the reduction this rule finds 80 % of the time. An A/A check (`aa_check=True`) is
        reported beside it and never widens it.
        In the figure each row is coloured by its verdict and labelled with its figure; the
        open circles are the workers' own reductions the t interval is made of, the grey
        band the A/A interval where there is one.
        """),
        interval_and_verdict,
    ),
    Section(
        "Work against time",
        _text("""
        Each case's wall-time reduction, with the verdict's interval, against its counted
        work reduction: 1 − fixed / baseline of the bytes moved per call, and of the
        instructions where `work.json` counts them. On the dashed diagonal, time fell as
        much as work. Points far below it are memory- or launch-bound: less work did not
        buy proportionally less time. Points above it gained more than the counted work
        explains. Below, each case's operators: click a case's bar in the chart to list
        them, a form's bar to fade the other form.
        """),
        work_against_time,
    ),
    Section(
        limits.TITLE,
        _text("""
        What a wrapper microbenchmark cannot tell, for this run: the items that apply to its
        device and checkpoint.
        """),
        not_established,
    ),
    Section(
        "Paired blocks over time",
        _text("""
        The design itself: every block runs baseline and fixed once each, in an order drawn
        per block. Each dot is one block's reduction, in time order; its colour says which
        variant ran first. Shaded spans are worker processes, each with its own reduction
        (the line). Outlier blocks are ringed, and drift or an order effect is drawn where
        the diagnostics detect one.
        """),
        paired_blocks,
    ),
    Section(
        "Diagnostics",
        _text("""
        Order effect (baseline-first vs fixed-first blocks), drift over the run, outlier
        blocks (kept, with the reduction recomputed without them), within-block spread and
        CPU-frequency excursions. Anything that stood out is listed below the table.
        """),
        diagnostics,
    ),
    Section(
        "Per-block distributions",
        _text("""
        Each dot is one block's median host latency; a line joins the baseline and fixed
        halves of the same block. Each panel has its own scale.
        """),
        block_distributions,
    ),
    Section(
        "Per-call distribution",
        _text("""
        Every timed call of one case. The violins are drawn from the calls inside the
        plotted range; the calls outside it are counted, not hidden.
        """),
        call_distribution,
    ),
    Section("CPU frequency and the canary", "", cpu_frequency),
    Section("Timer floor and validation", "", timer_floor_and_validation),
    Section("Provenance", "", provenance),
)


def comparison(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> list[Item]:
    """The compare notebook's reductions: the figure (captioned under it, and in its alt
    text, when CPU rows sit beside GPU rows: the caption travels with the image) and the
    row-wise differences of runs of one configuration (when any)."""
    items: list[Item] = [
        views.compare_reductions(runs, reference, allow_mixed_windows=allow_mixed_windows)
    ]
    differences = compare.difference_table(dict(runs))
    if differences.empty:
        items.append(Note("No two runs share a configuration: no row-wise difference."))
    else:
        items.append(Table(differences))
    return items


def work_comparison(runs: Mapping[str, RunResult]) -> list[Item]:
    """The compare notebook's ledgers: each run's against the first run of the same code
    (``work.ledger_differences``), with one line saying whether any differs."""
    table = work.ledger_differences(runs)
    if table.empty:
        return [
            Note(
                "No two runs with a per-call ledger share their code, torch, configuration "
                "and family: no ledger compared."
            )
        ]
    differ = table[table["Ledger"] != "same"]
    if differ.empty:
        line = f"Runs of the same code counted the same work: {len(table)} ledgers, all equal."
    else:
        line = (
            f"{len(differ)} of {len(table)} ledgers DIFFER between runs of the same code and "
            "torch: the inputs, the code path or the counter changed between them."
        )
    return [Note(line), Table(table)]


def show(items: Iterable[Item]) -> None:
    """Display a section's items in a notebook: each displays itself (tables styled,
    figures and charts with their PNG and alt text)."""
    from IPython.display import display

    for item in items:
        display(item)


def markdown_html(text: str) -> str:
    """A section's paragraph as HTML: escaped, `code` spans, blank lines between paragraphs."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    out = []
    for paragraph in paragraphs:
        escaped = html.escape(paragraph)
        out.append("<p>" + re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped) + "</p>")
    return "\n".join(out)


def item_html(item: Item) -> str:
    """One item as HTML for the standalone page: its own ``to_html()``."""
    return item.to_html()
