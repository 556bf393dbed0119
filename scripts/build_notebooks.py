"""Build notebooks/*.ipynb (outputs stripped, kernelspec python3) from the cells below.

The notebooks are committed; this script is their source. Edit the cells here, then run
`python scripts/build_notebooks.py`; `--check` exits 1 when a committed notebook differs
(tests/test_notebooks.py runs the same comparison).

The parameters cells are generated from the fields of RunConfig, ReportConfig and
CompareConfig (embedbench/config.py), one `name: type = default  # help` line per field,
papermill's form, so `papermill --help-notebook` documents each; the notebook hands them
straight to the config class, which coerces papermill's strings as the CLI's.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path
from textwrap import dedent
from typing import Any

import nbformat as nbf
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from embedbench.config import CompareConfig, ReportConfig, RunConfig
from embedbench.report.sections import REPORT_SECTIONS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def md(text: str) -> nbf.NotebookNode:
    """A markdown cell from an indented block."""
    return new_markdown_cell(dedent(text).strip())


def code(text: str) -> nbf.NotebookNode:
    """A code cell from an indented block."""
    return new_code_cell(dedent(text).strip())


# The notebook's annotation of each field type (the fields' annotations are strings).
NOTEBOOK_TYPES = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str | None": "Optional[str]",
    "int | None": "Optional[int]",
    "tuple[int, ...]": "list",
    "tuple[str, ...]": "list",
}


def literal(value: Any) -> str:
    """A default as the notebook writes it: Python syntax, strings in double quotes."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def params(config_class: type) -> nbf.NotebookNode:
    """The papermill parameters cell: one line per field of ``config_class``."""
    lines = []
    for param in dataclasses.fields(config_class):
        annotation = NOTEBOOK_TYPES[param.type]
        help_ = param.metadata["help"]
        lines.append(f"{param.name}: {annotation} = {literal(param.default)}  # {help_}")
    cell = new_code_cell("\n".join(lines))
    cell.metadata["tags"] = ["parameters"]
    return cell


def config_call(config_class: type) -> str:
    """``config = ConfigClass(name=name, ...)``: every parameter, coerced and checked."""
    names = [param.name for param in dataclasses.fields(config_class)]
    arguments = textwrap.fill(
        ", ".join(f"{name}={name}" for name in names) + ",",
        width=88,
        initial_indent="    ",
        subsequent_indent="    ",
        break_on_hyphens=False,
    )
    return f"config = {config_class.__name__}(\n{arguments}\n)"


def report_cells() -> list[nbf.NotebookNode]:
    """One markdown and one code cell per report section (``sections.REPORT_SECTIONS``,
    the list ``embedbench report --html`` renders too)."""
    cells = [md("## Report")]
    for section in REPORT_SECTIONS:
        if section.title:
            cells.append(md(f"### {section.title}\n\n{section.text}"))
        cells.append(code(f"show(sections.{section.name}(result))"))
    return cells


REPORT_CELLS = report_cells()

RUN = new_notebook(
    metadata=METADATA,
    cells=[
        md("""
            # embedbench: a thinker's `embed_input_ids` before/after (vLLM-Omni PR #7477)

            Paired host-latency microbenchmark of the baseline and the fixed wrapper of
            Qwen2.5-Omni's thinker (PR #7477) or Qwen3-Omni's (PR #7573; `family`, taken from
            the checkpoint by default). Run it with papermill, e.g. `papermill
            notebooks/run.ipynb out.ipynb -p model /models/Qwen2.5-Omni-7B`; with no
            parameters it measures the embedded default (a synthetic Qwen2.5-Omni-7B
            checkpoint with the real geometry and the built-in replica).
            """),
        code("""
            %matplotlib inline
            from typing import Optional

            from IPython.display import HTML, display

            from embedbench.config import ENTRY_NOTEBOOK, RunConfig, entry_point
            """),
        params(RunConfig),
        md("""
            ## Parameters and environment

            As resolved and validated by `RunConfig`, the same validation as the CLI's. The
            harness and the report are imported once the parameters have passed (seconds:
            torch among them), so a bad one fails at once.
            """),
        code(
            config_call(RunConfig)
            + dedent("""

                from embedbench import run
                from embedbench.report import sections, tables
                from embedbench.report.sections import show

                display(tables.styled(tables.config_table(config)))
                tables.styled(tables.environment_table())
                """)
        ),
        md("""
            ## Measurement

            The run records that it was started here, so its PR comment
            (`embedbench report DIR --pr-comment OUT.md`) gives this notebook's papermill
            line to reproduce it.
            """),
        code("""
            with entry_point(ENTRY_NOTEBOOK):
                result = run(config, log=print)
            print(f"results: {result.directory}")
            """),
        *REPORT_CELLS,
    ],
)

REPORT = new_notebook(
    metadata=METADATA,
    cells=[
        md("""
            # embedbench report

            Renders the report of an existing output directory without measuring, e.g. a GPU
            box's run on a laptop: `papermill notebooks/report.ipynb report.ipynb -p
            results_dir DIR`.
            """),
        code("""
            %matplotlib inline
            from typing import Optional

            from IPython.display import HTML, display

            from embedbench import load_results

            from embedbench.report import sections
            from embedbench.report.sections import show
            from embedbench.config import ReportConfig
            from embedbench.report.results import latest_results_dir
            """),
        params(ReportConfig),
        code(
            config_call(ReportConfig)
            + dedent("""
                directory = config.results_dir or latest_results_dir("embedbench-results")
                result = load_results(directory)
                print(f"results: {result.directory}")
                """)
        ),
        *REPORT_CELLS,
    ],
)

COMPARE = new_notebook(
    metadata=METADATA,
    cells=[
        md("""
            # embedbench: compare runs

            Side-by-side table and reduction plot across runs or machines, optionally with
            the PR's published H100 table. Each run is named by its device, target and
            checkpoint (synthetic or real), then its directory where those repeat:
            `papermill notebooks/compare.ipynb cmp.ipynb -y "results_dirs: [runA, runB]"`.
            """),
        code("""
            %matplotlib inline
            from IPython.display import display

            from embedbench.report import compare, gate, sections, tables
            from embedbench.report.sections import show
            from embedbench.config import CompareConfig
            """),
        params(CompareConfig),
        md("""
            The PR's table was timed in the PR script's window (its clock reads inside the
            host latency). Runs timed in another window are refused here unless
            `allow_mixed_windows=True`, which labels every column with its window.
            """),
        code(
            config_call(CompareConfig)
            + dedent("""
                with_reference = config.include_reference
                runs = compare.load_runs(config.results_dirs, include_reference=with_reference)
                reference = compare.reference_results() if with_reference else None
                mixed = dict(allow_mixed_windows=config.allow_mixed_windows)
                compare.compared_windows(runs, reference, allow_mixed=config.allow_mixed_windows)
                display(tables.styled(compare.runs_table(runs, reference)))
                """)
        ),
        md("""
            ## Before/after per run

            Each run's columns are headed by its key from the table above (A, B, …; PR for the
            PR's table), so the long run names appear once. One table per family:
            Qwen2.5-Omni's and Qwen3-Omni's wrappers differ, so their
            reductions never share a table. The PR's H100 table (PR #7477) sits beside the
            Qwen2.5-Omni runs; PR #7573 published no before/after table to set beside
            Qwen3-Omni's.
            """),
        code("""
            for family, table in compare.compare_tables(runs, reference, **mixed).items():
                print(family)
                display(tables.styled(table))
            """),
        md("""
            ## Reduction per case

            Each run's reduction with the interval its verdict uses (the PR's table has
            none). Runs of one configuration (family, device, target, checkpoint, geometry, LM
            shim and window) measured on different machines or days get a row-wise difference:
            the later run's reduction minus the first's, in percentage points, with a 95 %
            Welch interval from each run's worker processes. A caption says when CPU rows
            sit beside GPU rows, which measure different regimes.
            """),
        code("show(sections.comparison(runs, reference, **mixed))"),
        md("""
            ## Work per call

            Each run's per-call ledger (`work.json`: operators, bytes, syncs, kernels,
            counted exactly) against the first run of the same code, torch, configuration
            and family. The same code counts the same work on any host, so any row that is
            not `same` is flagged: the inputs, the code path or the counter changed.
            """),
        code("show(sections.work_comparison(runs))"),
        md("""
            ## Regression gate

            The check `embedbench gate DIR --max-slowdown PCT` makes in CI, per run: a case
            fails when its whole 95 % interval of the reduction lies below `-max_slowdown_pct`
            (slower beyond the allowance), or when it cannot be certified (not measured,
            failed validation, no interval). The lines below are what the command prints.
            """),
        code("""
            slowdown = config.max_slowdown_pct
            outcomes = {name: gate.gate_results(r, slowdown) for name, r in runs.items()}
            display(tables.styled(gate.gate_table(outcomes)))
            for name, outcome in outcomes.items():
                print("\\n".join(f"{name}: {line}" for line in gate.gate_lines(outcome)))
            """),
    ],
)

NOTEBOOK_SOURCES = {"run.ipynb": RUN, "report.ipynb": REPORT, "compare.ipynb": COMPARE}


def cell_sources(nb: nbf.NotebookNode) -> list[tuple[str, str, list[str]]]:
    """What a notebook is made of, ignoring cell ids: (type, source, tags) per cell."""
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def main(argv: list[str]) -> int:
    """Write the notebooks, or with --check report the ones that differ."""
    stale = []
    for name, nb in NOTEBOOK_SOURCES.items():
        for index, cell in enumerate(nb.cells):  # stable ids keep the committed diffs small
            cell.id = f"{name.removesuffix('.ipynb')}-{index:02d}"
        nbf.validate(nb)
        path = NOTEBOOKS / name
        if "--check" not in argv:
            nbf.write(nb, path)
        elif not path.exists() or cell_sources(nbf.read(path, 4)) != cell_sources(nb):
            stale.append(name)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/build_notebooks.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
