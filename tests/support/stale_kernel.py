"""A reused kernel: two runs in one Python process with a ``git checkout`` between them.

Run with the python of the vLLM-Omni CPU venv (``scripts/vllm-omni-cpu-env.sh``)::

    python tests/support/stale_kernel.py --other-ref SHA --outputs DIR -- RUN_ARGS...

``RUN_ARGS`` are ``embedbench run`` arguments without ``--output-dir`` (the repository in
``--repo``, ``--processes 1``, candidate ``WORKTREE``). The script runs them through
``embedbench.run`` (results in ``DIR/first``), checks out ``--other-ref`` in the
repository, and then, in this same process, tries again three ways: ``embedbench.run``
(``DIR/second``), the same with three worker processes (``DIR/workers``: the parent
must refuse before it starts any), the CLI's ``main`` (``DIR/cli``), and
``measure.measure_share`` alone (what a worker or a one-process run does after
building the target). Prints one JSON
object (the last line): the first run's status, checkout and ``code_fresh``; each retry's
error type and message (the CLI's exit code and stderr); the events the measuring
path emitted before it refused. Exit code 0 when it got that far.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from embedbench import cli, measure, run
from embedbench.harness import isolation
from embedbench.harness.interrupts import stop_requests


def _error(call: Any) -> dict[str, Any]:
    try:
        call()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return {"type": None, "message": None}


def main(argv: list[str] | None = None) -> int:
    """Run, check out the other ref, run again three ways; print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other-ref", required=True)
    parser.add_argument("--outputs", required=True, type=Path)
    parser.add_argument("run_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    run_args = [a for a in args.run_args if a != "--"]

    def config(output: str, *extra: str) -> Any:
        argv = ["run", *run_args, *extra, "--output-dir", output]
        return cli.config_from_args(cli.build_parser().parse_args(argv))

    first_config = config(str(args.outputs / "first"))
    first = run(first_config, progress=False, log=lambda _message: None)
    subprocess.run(
        ["git", "-C", first_config.repo, "checkout", "-q", args.other_ref],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    second = _error(lambda: run(config(str(args.outputs / "second")), progress=False))
    workers_config = config(str(args.outputs / "workers"), "--processes", "3")
    workers = _error(lambda: run(workers_config, progress=False))

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = cli.main(["run", *run_args, "--output-dir", str(args.outputs / "cli")])

    events: list[dict[str, Any]] = []
    share = measure.Share(
        config=config(str(args.outputs / "share")),
        worker=0,
        first_block=0,
        block_count=first_config.blocks,
        cpu_core=isolation.resolve_cpu_core(None),
        device="cpu",
        model_dir=first.metadata["model"],
    )
    with stop_requests() as stop:
        share_error = _error(
            lambda: measure.measure_share(share, events.append, check_stop=stop.check)
        )

    report = {
        "first": {
            "status": first.metadata["status"],
            "checkout": first.metadata["checkout"],
            "code_fresh": first.metadata["code_fresh"],
            "calls": {row["case"]: row["calls"] for row in first.validation},
        },
        "second": second,
        "workers": workers,
        "cli": {"exit_code": code, "stderr": stderr.getvalue()},
        "measure_share": {**share_error, "events": [e["event"] for e in events]},
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
