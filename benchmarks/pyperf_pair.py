"""One side of a known pair under ``pyperf.Runner``, as a pyperf user would time it.

``python benchmarks/pyperf_pair.py --pair blake2b --variant fixed -o OUT.json [pyperf
flags]``: pyperf's defaults (its own worker processes, warm-ups, values and loop
calibration) plus whatever pyperf flags follow, e.g. ``--affinity 1``. The callable
comes from ``known_pairs``' factory, built in each worker (never in the parent, which
only spawns workers). ``benchmarks/side_by_side.py`` runs both variants and lets
``python -m pyperf compare_to`` call the verdict.
"""

from __future__ import annotations

import argparse

import known_pairs
import pyperf


def _forward(cmd: list[str], args: argparse.Namespace) -> None:
    cmd.extend(["--pair", args.pair, "--variant", args.variant])


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_forward)
    runner.argparser.add_argument("--pair", choices=sorted(known_pairs.PAIRS), required=True)
    runner.argparser.add_argument("--variant", choices=("baseline", "fixed"), required=True)
    args = runner.parse_args()
    # The parent only spawns workers; it never calls the function, so only workers build it.
    fn = known_pairs.PAIRS[args.pair].factory()[args.variant] if args.worker else None
    runner.bench_func(args.pair, fn)


if __name__ == "__main__":
    main()
