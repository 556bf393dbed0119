"""Two checkouts of the kit, A against B: alternating default runs, per case and per arm.

    git worktree add --detach /tmp/kit-b HEAD     # then change what B should differ in
    python benchmarks/checkout_ab.py --cpu-core 1 --arm a=. --arm b=/tmp/kit-b --pairs 3
    python benchmarks/checkout_ab.py --from /tmp/ab                # re-analyse kept runs

Each run is ``python -m embedbench run`` (all defaults plus any ``-- EXTRA`` flags) with
its arm's checkout first on ``PYTHONPATH``, in the order a, b, b, a, … so that neither arm
owns a period of the host. Per arm: the runs' wall time, the canary's cost (its reads at
every block edge and in the probes, as a share of the wall time), how many runs the canary
labelled noisy, and per case the mean reduction, between-run SD, mean 95 % half-width,
cross-coverage and, for Text, the verdicts other than "no detectable difference". Used to
decide the canary's size (docs/archive/PERFORMANCE-2026-11.md, "Interference").

``--quick``: one pair of runs (a, then b) of a reduced design (warm-up 1, 2 blocks × 3
calls in one process; the ``-- EXTRA`` flags come after it), a smoke run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C
from between_runs import CASE_ORDER, cross_coverage
from interference import by_case, kept_run


def schedule(arms: list[str], pairs: int) -> list[str]:
    """a, b, b, a, … for two arms: each arm first in half the pairs."""
    order: list[str] = []
    for i in range(pairs):
        order += arms if i % 2 == 0 else arms[::-1]
    return order


def one_run(out: Path, checkout: Path, flags: list[str], core: int) -> float:
    """One default run from ``checkout``; its wall time in seconds."""
    cmd = [sys.executable, "-m", "embedbench", "run", "--no-progress", "--output-dir", str(out)]
    cmd += ["--cpu-core", str(core), *flags]
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"run {out.name} exited {proc.returncode}: {proc.stderr[-400:]}")
    return time.perf_counter() - start


def kept(top: Path) -> dict[str, list[dict[str, Any]]]:
    """The finished runs under ``top`` (``runNN-ARM``), per arm."""
    arms: dict[str, list[dict[str, Any]]] = {}
    for out in sorted(top.glob("run*-*")):
        if not (out / "summary.json").is_file():
            continue
        arm = out.name.split("-", 1)[1]
        run = kept_run(out, arm)
        run["cost"] = run["canary_s"] / run["wall_s"]
        arms.setdefault(arm, []).append(run)
    return arms


def arm_rows(arm: str, runs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per case of one arm: runs, mean, SD, mean half-width, cross-coverage, Text calls."""
    cases = by_case(runs)
    rows = []
    for case in sorted(cases, key=lambda c: CASE_ORDER.index(c) if c in CASE_ORDER else 99):
        e = cases[case]
        half = sum((high - low) / 2 for low, high in e["ci"]) / len(e["ci"])
        wrong = sum(v != "no detectable difference" for v in e["verdicts"])
        rows.append(
            [
                arm,
                case,
                len(e["red"]),
                sum(e["red"]) / len(e["red"]),
                C.sd(e["red"]),
                half,
                cross_coverage(e["red"], e["ci"]),
                str(wrong) if case == "text" else "–",
            ]
        )
    return rows


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--arm", action="append", default=[], metavar="NAME=CHECKOUT")
    p.add_argument("--pairs", type=int, default=3, help="pairs of runs per arm pair (default 3)")
    p.add_argument("--keep", metavar="DIR", help="keep every run's output directory under DIR")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="analyse runs kept with --keep")
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    pairs = dict(a.split("=", 1) for a in args.arm if "=" in a)
    if not args.from_dir and (len(pairs) != 2 or len(args.arm) != 2):
        # Before the session: an argument error need not wait for the machine's facts.
        print("checkout_ab: give two --arm NAME=CHECKOUT (--arm a=. --arm b=../b)", file=sys.stderr)
        raise SystemExit(2)
    session = C.Session("checkout_ab", args)
    if args.from_dir:
        arms = kept(Path(args.from_dir))
    else:
        order = schedule(list(pairs), 1 if args.quick else args.pairs)
        flags = [*(C.QUICK_ONE_RUN_FLAGS if args.quick else []), *args.extra]
        with tempfile.TemporaryDirectory(prefix="embedbench-ab-") as tmp:
            top = Path(args.keep or tmp)
            top.mkdir(parents=True, exist_ok=True)
            for i, arm in enumerate(order):
                print(f"run {i + 1}/{len(order)} ({arm}) ...", file=sys.stderr, flush=True)
                one_run(top / f"run{i:02d}-{arm}", Path(pairs[arm]), flags, session.core)
            arms = kept(top)
    if not arms:
        print("checkout_ab: no finished runs to analyse (runNN-ARM directories)", file=sys.stderr)
        raise SystemExit(2)
    walls = [
        [
            arm,
            len(runs),
            C.median([r["wall_s"] for r in runs]),
            100 * max(r["cost"] for r in runs),
            sum(r["outcome"] == "noisy" for r in runs),
        ]
        for arm, runs in arms.items()
    ]
    session.add(
        "Per arm",
        C.markdown_table(
            ["arm", "runs", "median wall (s)", "canary cost, at most (%)", "labelled noisy"],
            walls,
        ),
    )
    headers = [
        "arm",
        "case",
        "runs",
        "mean %",
        "between-run SD (pp)",
        "mean 95 % half-width (pp)",
        "cross-coverage",
        "Text verdicts not 'no detectable difference'",
    ]
    rows = [row for arm, runs in arms.items() for row in arm_rows(arm, runs)]
    session.add("Per case", C.markdown_table(headers, rows))
    session.data.update({"arms": {a: [r["wall_s"] for r in runs] for a, runs in arms.items()}})
    session.finish()


if __name__ == "__main__":
    main()
