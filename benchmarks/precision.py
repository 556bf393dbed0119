"""A/A precision: embedbench's paired design vs ``torch.utils.benchmark.Timer``.

The same zero-argument function is measured against itself, so every apparent
difference is noise. Per repeat:

- Timer: ``blocked_autorange`` of A, then of B (the same function, a fresh Timer);
  difference = 100 · ln(median_B / median_A) %.
- embedbench: ``paired_benchmark({"baseline": f, "fixed": f})`` with the default design
  (50 warm-up calls, 20 blocks × 20 calls); difference = 100 · ln(fixed / baseline) % of
  its ``host_us`` (its headline ``reduction_pct``, the Hodges–Lehmann estimate, is shown
  beside it with its interval).

Both run in the same process, pinned to the same core with one torch thread, gc off and
inference mode (the Timer inside ``embedbench.harness.isolation.isolated``), so only the design
differs. Budget: a calibration run of ``paired_benchmark`` measures how long its timed calls of
one variant take (T = blocks × iterations calls); each Timer side gets
``min_run_time = T``, so both tools spend the same time in timed calls of A and of B
(the Timer's own calibration and embedbench's warm-ups and timer floor come on top; both
wall times are reported). The
order of the two tools alternates between repeats. Actual wall times are reported.

Function (default ``wrapper``): the reference target's fixed wrapper on the audio case at
1172 tokens with the real 152064 × 3584 bf16 table (about 0.4 ms on a 2-core EPYC VM). A
real torch op has the noise the design is meant to handle (memory traffic, allocator,
cache state); a deadline spin (``--function spin``) is frequency-independent and absorbs
preemption, so it flatters both tools and measures only their arithmetic.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import _common as C

from embedbench.harness.isolation import isolated
from embedbench.runner import paired_benchmark
from embedbench.selftest import spin_us


def _timer_median_us(fn: Callable[[], Any], min_run_time: float) -> tuple[float, int, int]:
    """Median per-call time (µs) of one ``blocked_autorange``; (median, blocks, calls/block)."""
    from torch.utils.benchmark import Timer

    m = Timer(stmt="fn()", globals={"fn": fn}, num_threads=1).blocked_autorange(
        min_run_time=min_run_time
    )
    return m.median * 1e6, len(m.times), m.number_per_run


def _timer_repeat(fn: Callable[[], Any], core: int, budget_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    with isolated(core):
        a, blocks_a, per_a = _timer_median_us(fn, budget_s)
        b, blocks_b, per_b = _timer_median_us(fn, budget_s)
    return {
        "a_us": a,
        "b_us": b,
        "diff_pct": 100.0 * math.log(b / a),
        "wall_s": time.perf_counter() - t0,
        "blocks": [blocks_a, blocks_b],
        "calls_per_block": [per_a, per_b],
    }


def _embedbench_repeat(
    fn: Callable[[], Any], core: int, design: dict[str, int], seed: int
) -> dict[str, Any]:
    t0 = time.perf_counter()
    res = paired_benchmark(
        {"baseline": fn, "fixed": fn}, cpu_core=core, seed=seed, allow_busy=True, **design
    )
    wall_s = time.perf_counter() - t0
    base, fixed = res.host_us["baseline"], res.host_us["fixed"]
    return {
        "a_us": base,
        "b_us": fixed,
        "diff_pct": 100.0 * math.log(fixed / base),
        "reduction_pct": res.reduction_pct,
        "ci95_pct": list(res.reduction_ci95_pct),
        "verdict": res.verdict,
        "wall_s": wall_s,
        "timed_s_per_variant": sum(
            s[0] for r in res.records if r.variant == "baseline" for s in r.samples_us
        )
        / 1e6,
    }


def _spread(diffs: list[float]) -> dict[str, float]:
    return {
        "sd": C.sd(diffs),
        "range": max(diffs) - min(diffs),
        "median": C.median(diffs),
        "abs_median": abs(C.median(diffs)),
    }


@dataclass
class Measured:
    """The calibration and every repeat of both methods (one dict per repeat)."""

    what: str
    design: dict[str, int]
    core: int
    calibration: dict[str, Any]
    timer: list[dict[str, Any]] = field(default_factory=list)
    embedbench: list[dict[str, Any]] = field(default_factory=list)

    @property
    def budget(self) -> float:
        """Timed time per variant (s): each Timer side's ``min_run_time``."""
        return self.calibration["timed_s_per_variant"]

    @property
    def timer_spread(self) -> dict[str, float]:
        """Spread of the Timer's A/A differences."""
        return _spread([r["diff_pct"] for r in self.timer])

    @property
    def embedbench_spread(self) -> dict[str, float]:
        """Spread of embedbench's A/A differences."""
        return _spread([r["diff_pct"] for r in self.embedbench])

    @property
    def ratios(self) -> tuple[float, float]:
        """(SD ratio, range ratio) of embedbench over the Timer (inf when the Timer's is 0)."""
        st, se = self.timer_spread, self.embedbench_spread
        ratio = se["sd"] / st["sd"] if st["sd"] > 0 else math.inf
        range_ratio = se["range"] / st["range"] if st["range"] > 0 else math.inf
        return ratio, range_ratio


def measure(args: argparse.Namespace, core: int) -> Measured:
    """Build the function, calibrate, then alternate the two methods ``args.repeats`` times."""
    if args.function == "wrapper":
        target, facts = C.reference_setup(args.hidden)
        fn = C.scenario_call(target, facts, args.case, args.tokens, "fixed")
        what = (
            f"reference fixed wrapper, case {args.case}, {args.tokens} tokens, "
            f"table 152064 × {args.hidden} bf16"
        )
    else:

        def fn() -> None:
            spin_us(args.spin_us)

        what = f"deadline spin of {args.spin_us:g} µs"
    design = (
        {"warmup": 10, "blocks": 6, "iterations": 10}
        if args.quick
        else {"warmup": 50, "blocks": 20, "iterations": 20}
    )

    # Calibration: each Timer side gets as much timed-call time as embedbench spends timing
    # one variant (blocks x iterations calls); warm-ups and calibration are extra for both.
    calib = _embedbench_repeat(fn, core, design, seed=1000)
    data = Measured(what=what, design=design, core=core, calibration=calib)
    budget = data.budget
    for r in range(args.repeats):
        if r % 2 == 0:
            data.embedbench.append(_embedbench_repeat(fn, core, design, seed=r))
            data.timer.append(_timer_repeat(fn, core, budget))
        else:
            data.timer.append(_timer_repeat(fn, core, budget))
            data.embedbench.append(_embedbench_repeat(fn, core, design, seed=r))
    return data


def tabulate(data: Measured) -> list[C.Section]:
    """The per-repeat table, and the spread-and-bias table with the design note."""
    rows_t, rows_e, budget = data.timer, data.embedbench, data.budget
    st, se = data.timer_spread, data.embedbench_spread
    table = C.markdown_table(
        [
            "repeat",
            "Timer A (µs)",
            "Timer B (µs)",
            "Timer ln(B/A) %",
            "embedbench A (µs)",
            "embedbench B (µs)",
            "embedbench ln(B/A) %",
            "embedbench reduction % [95 % CI]",
            "verdict",
        ],
        [
            [
                str(i + 1),
                t["a_us"],
                t["b_us"],
                f"{t['diff_pct']:+.3f}",
                e["a_us"],
                e["b_us"],
                f"{e['diff_pct']:+.3f}",
                f"{e['reduction_pct']:+.2f} [{e['ci95_pct'][0]:+.2f}, {e['ci95_pct'][1]:+.2f}]",
                e["verdict"],
            ]
            for i, (t, e) in enumerate(zip(rows_t, rows_e, strict=True))
        ],
        align="rrrrrrrrl",
    )
    ratio, range_ratio = data.ratios
    summary = C.markdown_table(
        ["", "Timer (A then B)", "embedbench (paired)", "target", "met"],
        [
            ["SD of the A/A difference (%)", f"{st['sd']:.3f}", f"{se['sd']:.3f}", "", ""],
            ["max − min (%)", f"{st['range']:.3f}", f"{se['range']:.3f}", "", ""],
            [
                "embedbench / Timer spread (SD; range)",
                "",
                f"{ratio:.2f}; {range_ratio:.2f}",
                "≤ 0.50",
                C.fmt(ratio <= 0.5),
            ],
            [
                "median A/A difference (%)",
                f"{st['median']:+.3f}",
                f"{se['median']:+.3f}",
                "abs ≤ 0.5 (embedbench)",
                C.fmt(se["abs_median"] <= 0.5),
            ],
            [
                "wall time per repeat (s, median)",
                f"{C.median([r['wall_s'] for r in rows_t]):.2f}",
                f"{C.median([r['wall_s'] for r in rows_e]):.2f}",
                "",
                "",
            ],
        ],
        align="lrrll",
    )
    d = data.design
    timed = 2 * d["blocks"] * d["iterations"]
    note = (
        f"Function: {data.what}. embedbench design: {d['warmup']} warm-up calls per variant, "
        f"{d['blocks']} blocks × {d['iterations']} calls ({timed} timed calls per repeat) plus "
        f"its 1000-call timer floor; timed time per variant T = {budget:.2f} s. Timer: "
        f"`blocked_autorange(min_run_time={budget:.2f})` for A, then the same for B "
        f"(calls per block {rows_t[0]['calls_per_block']}, blocks {rows_t[0]['blocks']} in "
        f"repeat 1). Both pinned to core {data.core}, 1 torch thread, gc off, inference mode."
    )
    return [
        C.Section("A/A precision: each repeat's apparent difference", table),
        C.Section("A/A precision: spread and bias", summary, note),
    ]


def json_fields(data: Measured) -> dict[str, Any]:
    """The script's own JSON fields (next to the session's machine and load)."""
    ratio, range_ratio = data.ratios
    return {
        "function": data.what,
        "design": data.design,
        "timer_min_run_time_s": data.budget,
        "calibration": data.calibration,
        "timer": data.timer,
        "embedbench": data.embedbench,
        "timer_spread": data.timer_spread,
        "embedbench_spread": data.embedbench_spread,
        "sd_ratio": ratio,
        "range_ratio": range_ratio,
    }


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--function", choices=("wrapper", "spin"), default="wrapper")
    p.add_argument("--case", default="audio", help="case of the wrapper function")
    p.add_argument("--tokens", type=int, default=1172)
    p.add_argument("--hidden", type=int, default=C.HIDDEN_7B, help="3584: the cached 7B table")
    p.add_argument("--spin-us", type=float, default=1000.0)
    args = p.parse_args()
    session = C.Session("precision", args)
    data = measure(args, session.core)
    C.publish(session, tabulate(data), json_fields(data))


if __name__ == "__main__":
    main()
