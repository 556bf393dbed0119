"""Build notebooks/*.ipynb (outputs stripped, kernelspec python3) from the cells below.

The notebooks are committed; this script is their source. Edit the cells here, then run
`python scripts/build_notebooks.py`; `--check` exits 1 when a committed notebook differs
(tests/test_notebooks.py runs the same comparison).

Parameter lines follow papermill's `name: type = value  # help` form; a help text must
not contain "=", or papermill cannot parse the line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import dedent

import nbformat as nbf
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

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


def params(text: str) -> nbf.NotebookNode:
    """The papermill parameters cell."""
    cell = code(text)
    cell.metadata["tags"] = ["parameters"]
    return cell


REPORT_CELLS = [
    md("## Report"),
    code("display(HTML(report.banner_html(result)))"),
    md("""
        ### Before/after in the PR's format

        The first table is the PR's; the markdown below it pastes into a review as is.
        """),
    code("""
        pr = report.pr_table(result)
        display(report.styled(pr))
        print(report.to_pr_markdown(pr))
        """),
    md("""
        ### Interval and verdict

        One interval per case, the one the verdict and `embedbench gate` use: with several
        worker processes (the default) a t interval over each worker's own headline, which
        sees what differs between processes and moments and so predicts a rerun; with one
        process, Hodges–Lehmann over its blocks. `faster` or `slower` only when an interval
        of at least 95 % excludes 0; the MDE is the reduction this rule finds 80 % of the
        time. An A/A check (`aa_check=True`) is reported beside it and never widens it.
        """),
    code("""
        display(report.styled(report.statistics_table(result)))
        plots.reduction_forest(result)
        """),
    md("""
        ### Diagnostics

        Order effect (baseline-first vs fixed-first blocks), drift over the run, outlier
        blocks (kept, with the reduction recomputed without them), within-block spread and
        CPU-frequency excursions. Anything that stood out is listed below the table.
        """),
    code("""
        display(report.styled(report.diagnostics_table(result)))
        print("\\n".join(report.notes(result)) or "nothing stood out")
        """),
    md("""
        ### Per-block distributions

        Each dot is one block's median host latency; a block runs baseline and fixed once each.
        """),
    code("plots.block_distributions(result)"),
    md("### Per-call distribution"),
    code("plots.call_distribution(result)"),
    md("### CPU frequency of the pinned core"),
    code("plots.frequency_trace(result)"),
    md("### Timer floor and validation"),
    code("""
        display(report.styled(report.timer_floor_table(result)))
        display(report.styled(report.validation_table(result)))
        """),
    md("### Provenance"),
    code("report.styled(report.provenance_table(result))"),
]

RUN = new_notebook(
    metadata=METADATA,
    cells=[
        md("""
            # embedbench: Qwen2.5-Omni `embed_input_ids` before/after (vLLM-Omni PR #7477)

            Paired host-latency microbenchmark of the baseline and the fixed wrapper. Run it
            with papermill, e.g. `papermill notebooks/run.ipynb out.ipynb -p model
            /models/Qwen2.5-Omni-7B`; with no parameters it measures the embedded default
            (a synthetic checkpoint with the real geometry and the built-in replica).
            """),
        code("""
            %matplotlib inline
            from typing import Optional

            from IPython.display import HTML, display

            from embedbench import RunConfig, plots, report, run
            """),
        params("""
            model: Optional[str] = None  # checkpoint dir; None: the embedded synthetic default
            target: str = "reference"  # reference (built-in replica) or vllm-omni (needs repo)
            repo: Optional[str] = None  # vLLM-Omni git checkout for target vllm-omni
            baseline_ref: str = "01a2f93256975c7ff9565c5414b0fe0225bc4765"  # baseline git ref
            candidate_ref: str = "WORKTREE"  # candidate git ref, or WORKTREE (the checkout as is)
            cpu_core: Optional[int] = None  # core to pin; None: the lowest allowed core
            lengths: list = [1172]  # token counts, each at least 300
            cases: list = ["text", "audio", "image", "video", "mixed", "interleaved"]  # to measure
            warmup: int = 50  # warm-up calls per variant
            blocks: int = 20  # paired blocks
            iterations: int = 20  # calls per variant per block
            device: str = "auto"  # auto, cpu or cuda
            seed: int = 0  # seed of the block order
            output_dir: Optional[str] = None  # results dir; None: ./embedbench-results/UTC-time
            overwrite: bool = False  # replace results already in output_dir
            allow_busy: bool = False  # measure even on a busy core (results are labelled)
            aa_check: bool = False  # also time each baseline against itself (A/A noise floor)
            processes: int = 5  # fresh worker processes the blocks are spread over; 1: one process
            timing_window: str = "pr"  # pr: the PR script's clock order (default) or tight
            lm_shim: str = "flat"  # flat (the PR script's lookup) or production (served call depth)
            """),
        md("""
            ## Parameters and environment

            As resolved and validated by `RunConfig`, the same validation as the CLI's.
            """),
        code("""
            config = RunConfig(
                model=model, target=target, repo=repo, baseline_ref=baseline_ref,
                candidate_ref=candidate_ref, cpu_core=cpu_core, lengths=lengths, cases=cases,
                warmup=warmup, blocks=blocks, iterations=iterations, device=device, seed=seed,
                output_dir=output_dir, overwrite=overwrite, allow_busy=allow_busy,
                aa_check=aa_check, processes=processes, timing_window=timing_window,
                lm_shim=lm_shim,
            )
            display(report.styled(report.config_table(config)))
            report.styled(report.environment_table())
            """),
        md("## Measurement"),
        code("""
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

            from embedbench import load_results, plots, report
            from embedbench.results import latest_results_dir
            """),
        params("""
            results_dir: Optional[str] = None  # a run's output dir; None: the newest run
            """),
        code("""
            result = load_results(results_dir or latest_results_dir("embedbench-results"))
            print(f"results: {result.directory}")
            """),
        *REPORT_CELLS,
    ],
)

COMPARE = new_notebook(
    metadata=METADATA,
    cells=[
        md("""
            # embedbench: compare runs

            Side-by-side table and reduction plot across runs or machines, optionally with
            the PR's published H100 table:
            `papermill notebooks/compare.ipynb cmp.ipynb -y "results_dirs: [runA, runB]"`.
            """),
        code("""
            %matplotlib inline
            from IPython.display import display

            from embedbench import gate, plots, report
            """),
        params("""
            results_dirs: list = []  # two or more run output dirs (one with the reference)
            include_reference: bool = True  # add the PR #7477 H100 reference table
            max_slowdown_pct: float = 0.0  # gate: allowed slowdown in percent (0 or more)
            allow_mixed_windows: bool = False  # show runs of different timing windows, labelled
            """),
        md("""
            The PR's table was timed in the PR script's window (its clock reads inside the
            host latency). Runs timed in another window are refused here unless
            `allow_mixed_windows=True`, which labels every column with its window.
            """),
        code("""
            runs = report.load_runs(results_dirs, include_reference=include_reference)
            reference = report.reference_results() if include_reference else None
            mixed = dict(allow_mixed_windows=allow_mixed_windows)
            report.compared_windows(runs, reference, allow_mixed=allow_mixed_windows)
            display(report.styled(report.runs_table(runs)))
            """),
        md("## Before/after per run"),
        code("report.styled(report.compare_table(runs, reference, **mixed))"),
        md("## Reduction per case"),
        code("plots.compare_reductions(runs, reference, **mixed)"),
        md("""
            ## Regression gate

            The check `embedbench gate DIR --max-slowdown PCT` makes in CI, per run: a case
            fails when its whole 95 % interval of the reduction lies below `-max_slowdown_pct`
            (slower beyond the allowance), or when it cannot be certified (not measured,
            failed validation, no interval). The lines below are what the command prints.
            """),
        code("""
            outcomes = {name: gate.gate_results(r, max_slowdown_pct) for name, r in runs.items()}
            display(report.styled(gate.gate_table(outcomes)))
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
