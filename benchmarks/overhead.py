"""Overhead: the timer floor of the exact timing path, and the harness's cost per call.

1. Timer floor: ``embedbench.harness.timing.measure_timer_floor`` (10 blocks × 100 empty calls
   through ``time_calls``, exactly what every run records as case "timer"), repeated;
   median, p5 and p95 of each clock (host, calling-thread CPU, synchronized completion).
   The host floor is the bias inside every host sample (the cost of one
   ``perf_counter_ns`` read plus calling an empty function).
2. Per-call cost of timing N empty calls, wall clock around the whole loop / N:
   a bare call loop; a minimal timing loop (two ``perf_counter_ns`` reads and an append);
   ``time_calls`` (the harness: also two ``thread_time_ns`` reads, two syncs and a third
   clock read per call, and turning the stamps into µs afterwards). The harness's
   overhead beyond the timer is ``time_calls`` minus the minimal timing loop. Target:
   ≤ 0.5 µs per call.
3. ``time_calls`` wall time per call against the host latency it reports (the part of each
   call's cost that is outside the timed window: it lengthens runs, it does not bias the
   host latency), for an empty call and for a 10 µs spin.
4. The cost of each clock and of the no-op CPU sync, per call.
5. The host floor in each timing window (``embedbench.harness.windows``): the PR's window holds
   the two ``thread_time_ns`` reads, the tight window does not.

Sections 1–4 use the default window (the PR script's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import _common as C

from embedbench.harness.isolation import isolated
from embedbench.harness.timing import METRIC_ORDER, measure_timer_floor, no_sync, time_calls
from embedbench.harness.windows import MEASURABLE
from embedbench.selftest import spin_us


def _empty() -> None:
    return None


def _spin10() -> None:
    spin_us(10.0)


def _bare_loop(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n / 1e3


def _timing_loop(fn: Callable[[], Any], n: int) -> float:
    perf = time.perf_counter_ns
    stamps: list[tuple[int, int]] = []
    append = stamps.append
    t0 = perf()
    for _ in range(n):
        a = perf()
        fn()
        b = perf()
        append((a, b))
    out = [(b - a) / 1e3 for a, b in stamps]
    total = perf() - t0
    del out
    return total / n / 1e3


def _time_calls_loop(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    """(wall per call, median reported host latency), both in µs."""
    t0 = time.perf_counter_ns()
    samples = time_calls(fn, n, no_sync)
    per_call = (time.perf_counter_ns() - t0) / n / 1e3
    return per_call, C.median([s[0] for s in samples])


def _clock_cost(clock: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        clock()
    return (time.perf_counter_ns() - t0) / n / 1e3


@dataclass
class Measured:
    """Every repeat's numbers (µs): timer floors, loop costs, clock costs."""

    repeats: int
    calls: int
    spin_calls: int
    floor_samples: list[list[float]] = field(default_factory=list)
    floor_medians: list[float] = field(default_factory=list)
    loops: dict[str, list[float]] = field(
        default_factory=lambda: {
            k: []
            for k in ("bare", "timing", "time_calls", "reported", "spin_wall", "spin_reported")
        }
    )
    clocks: dict[str, list[float]] = field(
        default_factory=lambda: {k: [] for k in ("perf_counter_ns", "thread_time_ns", "sync")}
    )
    window_floors: dict[str, list[float]] = field(
        default_factory=lambda: {w: [] for w in MEASURABLE}
    )
    loop_only: float = 0.0

    @property
    def medians(self) -> dict[str, float]:
        """Median of the repeats of each loop measurement."""
        return {k: C.median(v) for k, v in self.loops.items()}

    @property
    def beyond(self) -> float:
        """The harness's cost per call beyond the minimal timing loop."""
        med = self.medians
        return med["time_calls"] - med["timing"]

    @property
    def cpu_clock(self) -> float:
        """Cost of the two ``thread_time_ns`` reads per call (loop subtracted)."""
        return 2 * max(C.median(self.clocks["thread_time_ns"]) - self.loop_only, 0.0)


def measure(repeats: int, n: int, core: int) -> Measured:
    """Run every measurement ``repeats`` times on ``core`` (loops of ``n`` calls)."""
    data = Measured(repeats=repeats, calls=n, spin_calls=max(1000, n // 50))
    loops, clocks = data.loops, data.clocks
    with isolated(core):
        for _ in range(repeats):
            for window in MEASURABLE:
                floor = measure_timer_floor(device="cpu", warmup=50, window=window)
                data.window_floors[window].append(
                    C.median([s[0] for r in floor for s in r.samples_us])
                )
            records = measure_timer_floor(device="cpu", warmup=50)
            samples = [s for r in records for s in r.samples_us]
            data.floor_samples.extend(samples)
            data.floor_medians.append(C.median([s[0] for s in samples]))
            loops["bare"].append(_bare_loop(_empty, n))
            loops["timing"].append(_timing_loop(_empty, n))
            wall, reported = _time_calls_loop(_empty, n)
            loops["time_calls"].append(wall)
            loops["reported"].append(reported)
            wall, reported = _time_calls_loop(_spin10, data.spin_calls)
            loops["spin_wall"].append(wall)
            loops["spin_reported"].append(reported)
            clocks["perf_counter_ns"].append(_clock_cost(time.perf_counter_ns, n))
            clocks["thread_time_ns"].append(_clock_cost(time.thread_time_ns, n))
            clocks["sync"].append(_clock_cost(no_sync, n))
        data.loop_only = _clock_cost(lambda: None, n)
    return data


def tabulate(data: Measured) -> list[C.Section]:
    """The five report sections: floor, per-call cost, spin, clocks, windows."""
    floor_rows = []
    for i, name in enumerate(METRIC_ORDER):
        vals = [s[i] for s in data.floor_samples]
        floor_rows.append(
            [
                name,
                f"{C.percentile(vals, 50):.3f}",
                f"{C.percentile(vals, 5):.3f}",
                f"{C.percentile(vals, 95):.3f}",
                f"{max(vals):.3f}",
            ]
        )
    floor_table = C.markdown_table(
        ["clock (empty call)", "median (µs)", "p5 (µs)", "p95 (µs)", "max (µs)"], floor_rows
    )
    floor_note = (
        f"{data.repeats} × `measure_timer_floor` (10 blocks × 100 calls each, "
        f"{len(data.floor_samples)} calls); median host floor per repeat: "
        + ", ".join(f"{m:.3f}" for m in data.floor_medians)
        + " µs."
    )

    med = data.medians
    beyond, cpu_clock, loop_only = data.beyond, data.cpu_clock, data.loop_only
    per_call_table = C.markdown_table(
        ["per call (µs, median of repeats)", "empty call", "note"],
        [
            ["bare call loop `for _: fn()`", f"{med['bare']:.3f}", "the floor of Python"],
            [
                "minimal timing loop (2 × perf_counter_ns + append)",
                f"{med['timing']:.3f}",
                "the bare timer",
            ],
            ["`time_calls` (the harness), wall / N", f"{med['time_calls']:.3f}", ""],
            [
                "**harness overhead beyond the timer** (time_calls − minimal loop)",
                f"**{beyond:.3f}**",
                f"target ≤ 0.5 µs: {'met' if beyond <= 0.5 else 'missed'}",
            ],
            [
                "of which the two `thread_time_ns` reads (CPU-time clock)",
                f"{cpu_clock:.3f}",
                f"without them: {beyond - cpu_clock:.3f}",
            ],
            [
                "host latency `time_calls` reports (median)",
                f"{med['reported']:.3f}",
                "= the timer floor",
            ],
            [
                "time_calls wall − reported host latency",
                f"{med['time_calls'] - med['reported']:.3f}",
                "outside the timed window",
            ],
        ],
        align="lrl",
    )
    spin_table = C.markdown_table(
        ["10 µs spin through `time_calls`", "µs"],
        [
            ["wall per call", f"{med['spin_wall']:.3f}"],
            ["reported host latency (median)", f"{med['spin_reported']:.3f}"],
            [
                "difference (outside the timed window)",
                f"{med['spin_wall'] - med['spin_reported']:.3f}",
            ],
        ],
    )
    clock_table = C.markdown_table(
        ["one call of", "µs (incl. loop)", "µs (loop subtracted)"],
        [
            [k, f"{C.median(v):.3f}", f"{max(C.median(v) - loop_only, 0.0):.3f}"]
            for k, v in data.clocks.items()
        ]
        + [["(empty lambda: the loop)", f"{loop_only:.3f}", "0.000"]],
    )
    window_table = C.markdown_table(
        ["timing window", "host floor, median of repeats (µs)", "per repeat (µs)"],
        [
            [w, f"{C.median(v):.3f}", ", ".join(f"{m:.3f}" for m in v)]
            for w, v in data.window_floors.items()
        ],
    )
    return [
        C.Section("Timer floor of the exact timing path", floor_table, floor_note),
        C.Section(
            f"Per-call cost of timing N = {data.calls} empty calls ({data.repeats} repeats)",
            per_call_table,
            "Wall clock around the whole loop divided by N; `time_calls` includes turning the "
            "stamps into µs triples afterwards.",
        ),
        C.Section(f"time_calls on a 10 µs spin (N = {data.spin_calls})", spin_table),
        C.Section("Cost of each clock read (N calls in a loop)", clock_table),
        C.Section(
            "Host floor per timing window (50 warm-up calls, 10 × 100 empty calls)",
            window_table,
            "The difference is what the PR's window adds to every host latency, in both variants.",
        ),
    ]


def json_fields(data: Measured) -> dict[str, Any]:
    """The script's own JSON fields (next to the session's machine and load)."""
    return {
        "floor_samples_us": data.floor_samples,
        "floor_medians_us": data.floor_medians,
        "window_floor_medians_us": data.window_floors,
        "loops_us": data.loops,
        "clocks_us": data.clocks,
        "loop_only_us": data.loop_only,
        "beyond_timer_us": data.beyond,
        "thread_time_pair_us": data.cpu_clock,
        "calls": data.calls,
        "repeats": data.repeats,
    }


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--calls", type=int, default=100_000, help="N calls per loop measurement")
    args = p.parse_args()
    session = C.Session("overhead", args)
    repeats = 3 if args.quick else args.repeats
    n = 10_000 if args.quick else args.calls
    data = measure(repeats, n, session.core)
    C.publish(session, tabulate(data), json_fields(data))


if __name__ == "__main__":
    main()
