"""Wall time: the default notebook, the first build, and how ``embedbench run`` scales.

1. ``papermill notebooks/run.ipynb OUT.ipynb`` with no parameters (the embedded default),
   run in a temporary working directory, with the synthetic checkpoint already cached
   (target ≤ 60 s on 2 cores). The whole command is timed: interpreter, kernel start, imports,
   table load, measurement and plots.
2. The same notebook with a fresh, empty ``EMBEDBENCH_CACHE``: the first run, which also
   builds the 1.09 GB synthetic checkpoint (its build time is read from the notebook's
   own log line, "done in … s").
3. ``python -m embedbench run`` (all six cases, default warm-up and iterations) at
   lengths 512 / 1172 / 4096 / 16384 with the default 20 blocks and 5 processes, at
   1172 tokens with 10 / 20 / 40 blocks, and at 20 blocks with 1 / 2 / 5 / 10 worker
   processes. Per run: the process's wall time, the time between the run's recorded
   start and end (``metadata.json``), and the number of timed + warm-up calls.

``--quick``: notebook (cached) only once, no first build, and a reduced design
(warm-up 1, 4 blocks × 3 calls in one process; lengths 512 / 1172; blocks 4 / 8; 1 / 2
processes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import _common as C

NOTEBOOK = C.REPO_ROOT / "notebooks" / "run.ipynb"
CASES = 6


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return {
        "cmd": cmd,
        "wall_s": wall,
        "returncode": proc.returncode,
        "stderr_tail": proc.stderr[-2000:],
    }


def _notebook(work: Path, cache: Path | None, name: str) -> dict[str, Any]:
    env = dict(os.environ)
    if cache is not None:
        env["EMBEDBENCH_CACHE"] = str(cache)
    out = work / f"{name}.ipynb"
    res = _timed([sys.executable, "-m", "papermill", str(NOTEBOOK), str(out)], work, env)
    res["build_s"] = None
    if out.exists():
        text = out.read_text()
        match = re.search(r"done in ([0-9.]+) s", text)
        res["build_s"] = float(match.group(1)) if match else None
    return res


def _timed_call_s(directory: Path) -> float | None:
    """Seconds spent inside timed calls (sum of host samples of every measured block)."""
    try:
        records = json.loads((directory / "micro-raw.json").read_text())
    except (OSError, ValueError):
        return None
    records = records["records"] if isinstance(records, dict) else records
    return sum(s[0] for r in records if r.get("case") != "timer" for s in r["samples_us"]) / 1e6


def _metadata_span(directory: Path) -> float | None:
    """Seconds between the run's recorded start and end (epoch seconds or ISO strings)."""
    try:
        meta = json.loads((directory / "metadata.json").read_text())
        start, end = (_as_epoch(meta[k]) for k in ("start_time", "end_time"))
    except (OSError, KeyError, TypeError, ValueError):
        return None
    return end - start


def _as_epoch(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return datetime.fromisoformat(str(value)).timestamp()


def _cli_run(
    work: Path,
    core: int,
    length: int,
    blocks: int,
    design: dict[str, int],
    processes: int,
    model: str | None = None,
) -> dict[str, Any]:
    out = work / f"run-{length}-{blocks}-{processes}"
    cmd = [
        sys.executable,
        "-m",
        "embedbench",
        "run",
        "--lengths",
        str(length),
        "--blocks",
        str(blocks),
        "--processes",
        str(processes),
        "--warmup",
        str(design["warmup"]),
        "--iterations",
        str(design["iterations"]),
        "--cpu-core",
        str(core),
        "--output-dir",
        str(out),
        "--no-progress",
        "--allow-busy",
    ]
    if model is not None:
        cmd += ["--model", model]
    res = _timed(cmd, work)
    res.update(
        {
            "length": length,
            "blocks": blocks,
            "processes": processes,
            "calls": CASES * 2 * (processes * design["warmup"] + blocks * design["iterations"]),
            "measure_s": _metadata_span(out),
            "timed_s": _timed_call_s(out),
        }
    )
    shutil.rmtree(out, ignore_errors=True)
    return res


@dataclass
class Plan:
    """The runs to make: the design and the grid (from the arguments and --quick)."""

    design: dict[str, int]
    lengths: list[int]
    block_list: list[int]
    process_list: list[int]
    first_build: bool
    notebook: bool
    scaling: bool
    model: str | None


def plan(args: argparse.Namespace) -> Plan:
    """The design and grid for these arguments (a smaller one with --quick)."""
    if args.quick:
        return Plan(
            design={"warmup": 1, "blocks": 4, "iterations": 3, "processes": 1},
            lengths=args.lengths or [512, 1172],
            block_list=args.blocks or [4, 8],
            process_list=args.processes or [1, 2],
            first_build=False,
            notebook=not args.no_notebook,
            scaling=not args.no_scaling,
            model=args.model,
        )
    return Plan(
        design={"warmup": 50, "blocks": 20, "iterations": 20, "processes": 5},
        lengths=args.lengths or [512, 1172, 4096, 16384],
        block_list=args.blocks or [10, 20, 40],
        process_list=args.processes or [1, 2, 5, 10],
        first_build=not args.no_first_build,
        notebook=not args.no_notebook,
        scaling=not args.no_scaling,
        model=args.model,
    )


@dataclass
class Measured:
    """The notebook runs and the CLI scaling runs, one dict per run."""

    design: dict[str, int]
    core: int
    model: str | None
    notebook_rows: list[dict[str, Any]] = field(default_factory=list)
    scaling: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether any run exited non-zero."""
        return any(r["returncode"] != 0 for r in self.notebook_rows + self.scaling)


def measure(plan: Plan, core: int) -> Measured:
    """Run the notebook and the CLI grid in a temporary directory (removed afterwards)."""
    design = plan.design
    default = (design["blocks"], design["processes"])
    data = Measured(design=design, core=core, model=plan.model)
    scaling = data.scaling
    work = Path(tempfile.mkdtemp(prefix="embedbench-walltime-"))
    try:
        if plan.notebook:
            from embedbench.omni import synthetic

            synthetic.default_synthetic_checkpoint()  # the cached case needs it to exist
            data.notebook_rows.append(
                {"run": "cached checkpoint", **_notebook(work, None, "cached")}
            )
            if plan.first_build:
                fresh = work / "fresh-cache"
                res = _notebook(work, fresh, "first")
                data.notebook_rows.append({"run": "first run (fresh EMBEDBENCH_CACHE)", **res})
                shutil.rmtree(fresh, ignore_errors=True)
        if plan.scaling:
            for length in plan.lengths:
                scaling.append(
                    _cli_run(
                        work,
                        core,
                        length,
                        design["blocks"],
                        design,
                        design["processes"],
                        plan.model,
                    )
                )
            grid = [(b, min(design["processes"], b // 2)) for b in plan.block_list]
            grid += [(design["blocks"], n) for n in plan.process_list]
            for blocks, processes in grid:
                if (blocks, processes) == default and 1172 in plan.lengths:
                    prior = next(r for r in scaling if r["length"] == 1172)
                    scaling.append({**prior, "reused": True})
                    continue
                scaling.append(_cli_run(work, core, 1172, blocks, design, processes, plan.model))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return data


def tabulate(data: Measured) -> list[C.Section]:
    """The notebook table and the scaling table (each only when there were such runs)."""
    sections: list[C.Section] = []
    if data.notebook_rows:
        rows = []
        for r in data.notebook_rows:
            ok = r["returncode"] == 0
            rows.append(
                [
                    r["run"],
                    f"{r['wall_s']:.1f}",
                    "–" if r["build_s"] is None else f"{r['build_s']:.1f}",
                    "ok" if ok else f"FAILED (exit {r['returncode']})",
                    "≤ 60 s" if r["run"] == "cached checkpoint" else "(reported)",
                    C.fmt(r["wall_s"] <= 60 and ok) if r["run"] == "cached checkpoint" else "",
                ]
            )
        sections.append(
            C.Section(
                "Default notebook (`papermill notebooks/run.ipynb OUT.ipynb`, no parameters)",
                C.markdown_table(
                    ["run", "wall (s)", "of it: synthetic build (s)", "status", "target", "met"],
                    rows,
                    align="lrrlll",
                ),
                "Default design: 6 cases at 1172 tokens, 50 warm-up calls, 20 blocks × 20 calls "
                "over 5 worker processes.",
            )
        )
    if data.scaling:
        rows = []
        for r in data.scaling:
            span, timed = r["measure_s"], r["timed_s"]
            rest = span - timed if span is not None and timed is not None else None
            rows.append(
                [
                    str(r["length"]),
                    str(r["blocks"]),
                    str(r["processes"]),
                    str(r["calls"]),
                    f"{r['wall_s']:.1f}",
                    "–" if span is None else f"{span:.1f}",
                    "–" if timed is None else f"{timed:.1f}",
                    "–" if rest is None else f"{rest:.1f}",
                    "ok" if r["returncode"] == 0 else f"exit {r['returncode']}",
                ]
            )
        design = data.design
        sections.append(
            C.Section(
                "`embedbench run` wall time by length, blocks and worker processes",
                C.markdown_table(
                    [
                        "tokens",
                        "blocks",
                        "processes",
                        "calls (warm-up + timed)",
                        "process wall (s)",
                        "start→end in metadata (s)",
                        "inside timed calls (s)",
                        "rest: warm-up, validation, floor, stats, I/O (s)",
                        "status",
                    ],
                    rows,
                    align="rrrrrrrrl",
                ),
                f"Design: warm-up {design['warmup']}, {design['iterations']} calls per block, "
                f"all six cases, `--cpu-core {data.core} --allow-busy --no-progress`"
                + (f" `--model {data.model}`" if data.model else "")
                + ". Process wall includes interpreter start, imports and loading the table "
                "(1.09 GB for the embedded default, page-cached).",
            )
        )
    return sections


def report_failures(data: Measured) -> None:
    """Print the stderr tail of every failed run to stderr."""
    for r in data.notebook_rows:
        if r["returncode"] != 0:
            print(f"notebook {r['run']} failed:\n{r['stderr_tail']}", file=sys.stderr)
    for r in data.scaling:
        if r["returncode"] != 0:
            print(f"run {r['cmd']} failed:\n{r['stderr_tail']}", file=sys.stderr)


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--no-notebook", action="store_true", help="skip the notebook runs")
    p.add_argument("--no-first-build", action="store_true", help="skip the fresh-cache run")
    p.add_argument("--no-scaling", action="store_true", help="skip the CLI scaling runs")
    p.add_argument("--lengths", type=int, nargs="+", default=None)
    p.add_argument("--blocks", type=int, nargs="+", default=None)
    p.add_argument("--processes", type=int, nargs="+", default=None)
    p.add_argument(
        "--model", help="checkpoint for the scaling runs (default: the embedded synthetic one)"
    )
    args = p.parse_args()
    session = C.Session("walltime", args)
    data = measure(plan(args), session.core)
    report_failures(data)
    C.publish(
        session,
        tabulate(data),
        {"design": data.design, "notebook": data.notebook_rows, "scaling": data.scaling},
    )
    if data.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
