"""CLI start-up: wall time of whole ``python -m embedbench`` processes.

Its numbers of record are in docs/archive/PERFORMANCE-2026-11.md, "CLI start-up".

Each command is a fresh process, timed from ``subprocess.run`` to its exit, repeated
``--repeats`` times round-robin over the commands (so a burst of load hits all alike):

- ``python -c pass``: the interpreter alone, the floor under every row;
- ``--help`` and ``run --help``: the argument table only;
- ``run --blocks 7``: an argument error (one line on stderr, exit 2);
- ``report DIR``: the PR table of a small results dir (a tiny quick run made here on a
  hidden-32 synthetic checkpoint, or ``--results DIR``);
- ``run``, a tiny design in 2 worker processes (text and audio, 300 tokens, 4 blocks of
  3 calls) on that checkpoint, each into a fresh output dir: the parent's start and end
  and two workers' starts and ends, with almost nothing timed. The runs made here keep
  their quiet reference in the temporary folder, never in the user's cache.

``--quick`` (a smoke run): each command once, and ``report`` reads the tiny run, timed
just before it, instead of a results dir made first in this process (a run here imports
torch and scipy).

``--root DIR`` times another checkout's code instead (its ``.venv/bin/python`` if it
has one, run from DIR), e.g. an older checkout, for a before/after table. The
processes are not pinned; the environment (``PYTHONDONTWRITEBYTECODE`` included) is
this script's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

REPORT = "embedbench report DIR"
# (label, arguments after "python", the exit code it must end with)
COMMANDS: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("python -c pass", ("-c", "pass"), 0),
    ("embedbench --help", ("-m", "embedbench", "--help"), 0),
    ("embedbench run --help", ("-m", "embedbench", "run", "--help"), 0),
    ("embedbench run --blocks 7 (error)", ("-m", "embedbench", "run", "--blocks", "7"), 2),
    (REPORT, ("-m", "embedbench", "report", "{results}"), 0),
    ("embedbench run, 2 workers (tiny)", ("-m", "embedbench", "run", "{tiny_run}"), 0),
)
# The tiny run's flags after ``--model CKPT``; ``--output-dir`` is a new folder each time.
TINY_RUN = ("--cases", "text", "audio", "--lengths", "300", "--warmup", "2", "--blocks", "4")
TINY_RUN += ("--iterations", "3", "--processes", "2", "--allow-busy", "--no-progress")


def _small_checkpoint(directory: Path) -> Path:
    """A hidden-32 synthetic checkpoint with the real vocabulary."""
    from embedbench.omni import synthetic

    return synthetic.write_synthetic_checkpoint(directory / "ckpt", hidden_size=32)


def _small_results(model: Path, directory: Path) -> Path:
    """A complete tiny run: 300 tokens, 2 blocks in one process."""
    from embedbench import RunConfig, run

    out = directory / "results"
    config = RunConfig(
        model=str(model),
        lengths=300,
        warmup=1,
        blocks=2,
        iterations=2,
        processes=1,
        output_dir=str(out),
        allow_busy=True,
    )
    run(config, progress=False, log=lambda _message: None)
    return out


def _python(root: Path) -> str:
    venv = root / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _fill(argv: tuple[str, ...], results: Path, model: Path, out: Path) -> tuple[str, ...]:
    """``argv`` with the results dir in, and the tiny run's flags on ``model`` into ``out``."""
    filled: list[str] = []
    for arg in argv:
        if arg == "{tiny_run}":
            filled += ["--model", str(model), *TINY_RUN, "--output-dir", str(out)]
        else:
            filled.append(arg.format(results=results))
    return tuple(filled)


def _time(python: str, args: tuple[str, ...], root: Path, expected: int) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([python, *args], cwd=root, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - t0
    if proc.returncode != expected:
        raise SystemExit(
            f"cli_startup: {' '.join(args)} exited {proc.returncode}, not {expected}: "
            f"{proc.stderr.strip()[-500:]}"
        )
    return elapsed


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10, help="processes per command")
    p.add_argument("--results", metavar="DIR", help="results dir for `report` (default: made here)")
    p.add_argument("--root", metavar="DIR", default=str(C.REPO_ROOT), help="checkout to time")
    args = p.parse_args()
    session = C.Session("cli_startup", args)
    repeats = 1 if args.quick else args.repeats
    root = Path(args.root).resolve()
    python = _python(root)

    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        scratch = Path(tmp)
        # Runs here, in this process and in the timed ones, keep their quiet reference here.
        os.environ["EMBEDBENCH_HOST_REFERENCE"] = str(scratch / "host-reference.json")
        model = _small_checkpoint(scratch)
        commands = list(COMMANDS)
        if args.results:
            results = Path(args.results)
        elif args.quick:
            results = scratch / "run-0"  # the first tiny run's output dir (see _fill)
            commands.sort(key=lambda command: command[0] == REPORT)  # report last
        else:
            results = _small_results(model, scratch)
        times: dict[str, list[float]] = {label: [] for label, _, _ in COMMANDS}
        for index in range(repeats):
            for label, argv, expected in commands:
                filled = _fill(argv, results, model, scratch / f"run-{index}")
                times[label].append(_time(python, filled, root, expected))

    rows = [
        [label, C.median(t) * 1000, min(t) * 1000, max(t) * 1000, len(t)]
        for label, t in times.items()
    ]
    session.add(
        f"Whole-process wall time, ms ({root}, {repeats} repeats each)",
        C.markdown_table(["command", "median", "min", "max", "n"], rows, align="lrrrr"),
        note=f"python: `{python}`; PYTHONDONTWRITEBYTECODE="
        f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}",
    )
    session.data = {"root": str(root), "python": python, "repeats": repeats, "seconds": times}
    session.finish()


if __name__ == "__main__":
    main()
