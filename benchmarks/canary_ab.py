"""The canary on against off: what it costs, and whether reading it changes the numbers.

Alternates default runs (``python -m embedbench run``, plus any ``-- EXTRA`` flags) with
the canary on and off (``EMBEDBENCH_CANARY=off``: no reads at block edges, no probes,
host stability not observed), ``--pairs`` of each (default 6), in the order on, off,
off, on, on, off, … so that a drift of the host lands on both arms alike. Reports:

- per case and arm: mean reduction, between-run SD, mean 95 % half-width and
  cross-coverage, and the F-test p-value that the SDs of the two arms differ
  (two-sided): does a gather read between block halves add spread?
- wall time per arm, the paired difference of neighbouring on/off runs (median, and its
  range), and the canary's own accounted time (its reads' recorded µs, every probe's)
  as a share of each "on" run's wall time: the cost (target ≤ 2 %).

``--quick``: one pair of a reduced design (warm-up 1, 2 blocks × 3 calls in one process; a
smoke run, not evidence).
``--from DIR``: analyse runs kept with ``--keep DIR``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as C
from between_runs import CASE_ORDER, _per_case
from interference import canary_seconds

__all__ = ["arm_order", "sd_ratio_p", "tables"]

ON, OFF = "on", "off"
TARGET_COST = 0.02


def arm_order(pairs: int) -> list[str]:
    """on, off, off, on, on, off, …: each arm first in every other pair."""
    order: list[str] = []
    for i in range(pairs):
        order += [ON, OFF] if i % 2 == 0 else [OFF, ON]
    return order


def sd_ratio_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided F-test p-value that the variances of ``a`` and ``b`` differ."""
    import numpy as np
    from scipy import stats as sps

    if len(a) < 2 or len(b) < 2:
        return float("nan")
    va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
    if va == 0.0 or vb == 0.0:
        return float("nan")
    f = va / vb
    one = sps.f.sf(f, len(a) - 1, len(b) - 1) if f > 1 else sps.f.cdf(f, len(a) - 1, len(b) - 1)
    return float(min(1.0, 2.0 * one))


def _one_run(out: Path, arm: str, flags: list[str], core: int) -> dict[str, Any]:
    env = {"EMBEDBENCH_CANARY": arm}  # "on" or "off", whatever this shell has set
    wall, _, _ = C.embedbench_run(out, flags, core=core, label=f"canary {arm} run", env=env)
    (out.parent / f"{out.name}.arm").write_text(arm)
    return _kept_run(out, arm, wall)


def _kept_run(out: Path, arm: str, wall: float | None = None) -> dict[str, Any]:
    meta = json.loads((out / "metadata.json").read_text())
    records = json.loads((out / "micro-raw.json").read_text())
    seconds = wall if wall is not None else meta["end_time"] - meta["start_time"]
    return {
        "arm": arm,
        "wall_s": seconds,
        "canary_s": canary_seconds(meta, records) if arm == ON else 0.0,
        "summary": json.loads((out / "summary.json").read_text()),
        "processes": meta.get("processes"),
        "host_stability": (meta.get("host_stability") or {}).get("verdict"),
    }


def _kept(top: Path) -> list[dict[str, Any]]:
    runs = []
    for marker in sorted(top.glob("run*.arm")):
        runs.append(_kept_run(marker.with_suffix(""), marker.read_text()))
    if not runs:
        print(f"canary_ab: no kept runs (run*.arm) under {top}", file=sys.stderr)
        raise SystemExit(2)
    return runs


def tables(runs: list[dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    """(per-case table, wall-time table, the numbers) of on against off."""
    arms = {arm: [r for r in runs if r["arm"] == arm] for arm in (ON, OFF)}
    cases = {arm: _per_case(arms[arm]) for arm in (ON, OFF)}
    rows = []
    known = set(cases[ON]) & set(cases[OFF])
    for case in sorted(known, key=lambda c: CASE_ORDER.index(c) if c in CASE_ORDER else 99):
        on, off = cases[ON][case], cases[OFF][case]
        rows.append(
            [
                on["label"],
                f"{on['mean']:.2f} / {off['mean']:.2f}",
                f"{on['sd']:.2f} / {off['sd']:.2f}",
                C.fmt(sd_ratio_p(on["red"], off["red"])),
                f"{on['half_width']:.2f} / {off['half_width']:.2f}",
                f"{on['coverage']:.2f} / {off['coverage']:.2f}",
            ]
        )
    headers = [
        "case",
        "mean % (on / off)",
        "between-run SD, pp (on / off)",
        "p (SDs differ)",
        "mean half-width, pp (on / off)",
        "cross-coverage (on / off)",
    ]
    per_case = C.markdown_table(headers, rows, align="lllrll")
    # Neighbouring runs pair up in run order (the arms alternate within every pair).
    diffs = [
        a["wall_s"] - b["wall_s"] if a["arm"] == ON else b["wall_s"] - a["wall_s"]
        for a, b in zip(runs[0::2], runs[1::2], strict=False)
        if {a["arm"], b["arm"]} == {ON, OFF}
    ]
    shares = [r["canary_s"] / r["wall_s"] for r in arms[ON] if r["wall_s"]]
    wall_rows = [
        [
            arm,
            len(arms[arm]),
            C.median([r["wall_s"] for r in arms[arm]]) if arms[arm] else float("nan"),
            " ".join(f"{r['wall_s']:.1f}" for r in arms[arm]),
        ]
        for arm in (ON, OFF)
    ]
    walls = C.markdown_table(["canary", "runs", "median wall (s)", "each run (s)"], wall_rows)
    numbers = {
        "wall_diff_s": diffs,
        "cost_shares": shares,
        "cost_max": max(shares) if shares else float("nan"),
        "cases": {
            arm: {c: {k: v for k, v in e.items() if k != "label"} for c, e in cases[arm].items()}
            for arm in (ON, OFF)
        },
    }
    return per_case, walls, numbers


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=None, help="on + off pairs (default 6)")
    p.add_argument("--keep", metavar="DIR", help="keep every run's output directory under DIR")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="analyse runs kept with --keep")
    p.add_argument("extra", nargs="*", help="flags passed to every run (after --)")
    args = p.parse_args()
    session = C.Session("canary_ab", args)
    flags = [*(C.QUICK_ONE_RUN_FLAGS if args.quick else []), *args.extra]
    if args.from_dir:
        runs = _kept(Path(args.from_dir))
    else:
        order = arm_order(args.pairs or (1 if args.quick else 6))
        with tempfile.TemporaryDirectory(prefix="embedbench-canary-ab-") as tmp:
            where = Path(args.keep) if args.keep else Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            runs = []
            for i, arm in enumerate(order):
                print(f"run {i + 1}/{len(order)} (canary {arm}) ...", file=sys.stderr, flush=True)
                runs.append(_one_run(where / f"run{i:02d}", arm, flags, session.core))
    per_case, walls, numbers = tables(runs)
    what = f"`embedbench run {' '.join(flags) or '(all defaults)'}`"
    session.add("Canary on against off, per case", per_case, f"{what}; arms alternate.")
    diffs = numbers["wall_diff_s"]
    spread = f" (range {min(diffs):.1f} to {max(diffs):.1f})" if diffs else ""
    session.add(
        "Wall time",
        walls,
        f"On minus off, neighbouring runs: median {C.fmt(C.median(diffs) if diffs else None)} s"
        f"{spread}. The canary's accounted time: at most {100 * numbers['cost_max']:.2f} % "
        f"of an 'on' run's wall time (target ≤ {100 * TARGET_COST:.0f} %).",
    )
    session.data.update(
        {
            "flags": flags,
            **numbers,
            "runs": [{k: v for k, v in r.items() if k != "summary"} for r in runs],
        }
    )
    session.finish()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
