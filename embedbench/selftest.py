"""Self-test: does the harness recover differences it is told about, under real noise?

Five checks, each through ``runner.paired_benchmark`` (the schedule, timing and
statistics of a real run, in one process), with carriers from ``carriers``: this host's
(``carriers.REAL_CARRIERS``), or those ``run_selftest`` is given with the host they run
on (``embedbench.sim.simulate_selftest``: a simulated host, whose clock the carriers and
the harness read through the one clock seam):

1. **arithmetic**: ``spin(base + delay)`` against ``spin(base)``, deadline spins on the
   clock the harness reads. The recovered difference (the harness's headline estimate,
   in µs of its baseline) must be the injected one (±15 % plus the timer resolution),
   and the interval widened by that resolution must hold it.
   Noise never lands on a spin, so this checks the arithmetic only.
2. **real work**: BLAKE2b over ``base/2`` µs of data against the same plus ``base/10``
   µs more. Real computation, so preemption, cache and frequency effects land on it.
   The truth is what a plain alternating loop measures outside the harness
   (``carriers.difference_us``, before and after the pair); the harness must recover it
   within ±15 % plus the calibration's own error (its spread and its drift from before
   to after), and hold it inside its interval widened by that error. A run whose
   interval holds the truth but is wider than that tolerance cannot decide the check
   (the host's noise, not the harness): the pair is timed again with twice the blocks,
   up to ``REAL_WORK_ROUNDS`` designs, and a check still undecided then is
   *inconclusive*, neither passed nor failed.
3. **schedule and labels**: the carriers log their own calls. Each must have run
   first in exactly half of the blocks, and for every block the harness's records must
   name as first the carrier that really ran first.
4. **interval size**: the verdict interval against one recomputed here from the raw
   records by another route: the per-block log-ratios' signed-rank test (scipy's exact
   Wilcoxon) inverted over every candidate shift. Both ends must agree within 1 % of the
   half-width. (A yardstick from the blocks' sd or MAD is not one: a rank interval over
   10 blocks with two slow ones is legitimately six times wider than either suggests.)
5. **host column**: a pair that differs only by an off-CPU sleep, which host latency
   sees and the calling thread's CPU time does not: the harness must recover the
   sleep's wall time as the plain loop measures it (±30 %).

Each check names what a broken harness would get wrong: swapped labels (1, 2, 3), a
biased block order (3), the wrong metric column (5), a wrongly sized interval (4).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from embedbench.harness import stability, stats
from embedbench.harness.carriers import (
    REAL_CARRIERS,
    Call,
    CallLog,
    Carriers,
    bytes_for_us,
    chain,
    difference_us,
    spin_us,  # noqa: F401  (public: benchmarks time with it)
)
from embedbench.jsonvalues import plain

if TYPE_CHECKING:
    from embedbench.runhost import RunHost

__all__ = [
    "INTERVAL_AGREEMENT",
    "REAL_WORK_ROUNDS",
    "SLEEP_TOLERANCE",
    "SLEEP_US",
    "TOLERANCE",
    "Check",
    "SelfTestResult",
    "evaluate",
    "inverted_signed_rank_interval",
    "run_selftest",
]

TOLERANCE = 0.15
SLEEP_TOLERANCE = 0.30
SLEEP_US = 200.0
INTERVAL_AGREEMENT = 0.01
# The real-work pair's designs: the given blocks, then twice and four times as many, for
# as long as the interval is too wide to decide the check (the host's noise).
REAL_WORK_ROUNDS = 3


def evaluate(
    host_us: dict[str, float],
    reduction_ci95_pct: tuple[float, float],
    delay_us: float,
    *,
    resolution_us: float = 0.0,
    tolerance: float = TOLERANCE,
    reduction_pct: float,
) -> dict[str, Any]:
    """Recovered against injected difference: error and whether the interval holds it.

    ``resolution_us`` is how well the truth itself is known (the timer floor for a spin,
    the plain loop's spread and drift for real work). The interval (reduction %) is
    converted to µs of the measured baseline and widened on each side by it before
    asking whether it holds ``delay_us``; the recovered difference may miss the truth
    by ``tolerance`` of it plus the same amount, since no harness can beat the
    yardstick it is judged by. ``undecided`` marks a miss that the interval itself
    allows: one wider than the allowed error, holding the truth.

    ``reduction_pct`` is the harness's headline (the estimate its interval belongs to),
    converted to µs of the measured baseline as the interval is, so the recovered
    difference lies inside the interval (the PR's ``baseline − fixed`` of ``host_us``
    can fall outside it under noise).
    """
    if resolution_us < 0:
        raise ValueError(f"resolution_us must be non-negative, got {resolution_us}")
    baseline = host_us["baseline"]
    recovered_us = baseline * reduction_pct / 100.0
    low, high = reduction_ci95_pct
    ci_us = (baseline * low / 100.0, baseline * high / 100.0)
    inside_raw = ci_us[0] <= delay_us <= ci_us[1]
    inside = ci_us[0] - resolution_us <= delay_us <= ci_us[1] + resolution_us
    error = (recovered_us - delay_us) / delay_us
    allowed_us = tolerance * abs(delay_us) + resolution_us
    within = abs(recovered_us - delay_us) <= allowed_us
    half_width_us = (ci_us[1] - ci_us[0]) / 2.0
    return {
        "injected_us": float(delay_us),
        "injected_pct": 100.0 * delay_us / baseline,
        "recovered_us": recovered_us,
        "recovered_pct": reduction_pct,
        "ci95_us": ci_us,
        "resolution_us": float(resolution_us),
        "inside_raw_interval": inside_raw,
        "error_pct": 100.0 * error,
        "allowed_error_us": allowed_us,
        "inside_interval": inside,
        "within_tolerance": within,
        "passed": inside and within,
        # Off by more than allowed, yet by no more than the harness's own interval says it
        # can be: this design cannot tell a wrong harness from a noisy host.
        "undecided": inside and not within and half_width_us > allowed_us,
    }


@dataclass(frozen=True)
class Check:
    """One check: its name, the decision, one line of detail and the numbers behind it.

    ``inconclusive`` (never with ``passed``): the check could not be decided, the host's
    noise being wider than what it must resolve; it found the harness neither right nor
    wrong.
    """

    name: str
    passed: bool
    detail: str
    numbers: dict[str, Any] = field(default_factory=dict)
    inconclusive: bool = False

    def line(self) -> str:
        """``  ok   arithmetic: …``, ``  FAIL arithmetic: …`` or ``  ??   real work: …``."""
        mark = "ok  " if self.passed else "??  " if self.inconclusive else "FAIL"
        return f"  {mark} {self.name}: {self.detail}"


@dataclass(frozen=True)
class SelfTestResult:
    """Every check, the design it ran with, and the overall decision."""

    checks: tuple[Check, ...]
    design: dict[str, Any]
    host_stability: stability.HostStability | None = None

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> tuple[str, ...]:
        """The checks that found the harness wrong (inconclusive ones are not among them)."""
        return tuple(c.name for c in self.checks if not c.passed and not c.inconclusive)

    @property
    def inconclusive(self) -> bool:
        """True when no check failed but one or more could not be decided on this host."""
        return not self.passed and not self.failed

    def check(self, name: str) -> Check:
        """The check called ``name``."""
        return next(c for c in self.checks if c.name == name)

    def lines(self) -> list[str]:
        """A headline and one line per check, for a terminal or a README."""
        failed = list(self.failed)
        undecided = [c.name for c in self.checks if c.inconclusive]
        if self.passed:
            head = f"self-test PASSED: {len(self.checks)} of {len(self.checks)} checks"
        elif failed:
            head = f"self-test FAILED: {', '.join(failed)}"
        else:
            head = (
                f"self-test INCONCLUSIVE: {', '.join(undecided)} (this host's noise was "
                "wider than the check must resolve, at every design tried; no check found "
                "the harness wrong)"
            )
        lines = [head, *(c.line() for c in self.checks)]
        host = self.host_stability
        if host is not None and host.noisy:
            cause = "the host, not the harness, is the likely cause of the failure; "
            lines.append(
                f"  host noisy: {'; '.join(host.reasons)}: "
                f"{cause if failed else ''}rerun on a quiet host"
            )
        elif host is not None:
            lines.append(f"  host stable: {host.canary_reads} canary reads agree")
        if undecided:
            lines.append(
                "  rerun on a quieter host, or with more --blocks, for a decision: the "
                "canary reads the memory system, not every kind of noise that widens a pair"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return plain(
            {
                "passed": self.passed,
                "inconclusive": self.inconclusive,
                "design": self.design,
                "checks": [asdict(c) for c in self.checks],
                "host_stability": self.host_stability.to_json() if self.host_stability else None,
            }
        )


def _us(value: float) -> str:
    return f"{value:.2f} µs"


def _block_count(pair: Any) -> int:
    """How many blocks a pair's records hold (its design, read off what it timed)."""
    return len({r.block for r in pair.records})


def _recovery_check(
    name: str,
    pair: Any,
    truth_us: float,
    widen_us: float,
    tolerance: float,
    *,
    tried: tuple[int, ...] = (),
) -> Check:
    """Recovered against truth; ``tried`` lists the block counts of earlier, undecided
    designs (the check then says so, and is inconclusive if this one is undecided too)."""
    judged = evaluate(
        pair.summary.host_us,
        pair.reduction_ci95_pct,
        truth_us,
        resolution_us=widen_us,
        tolerance=tolerance,
        reduction_pct=pair.reduction_pct,
    )
    low, high = judged["ci95_us"]
    detail = (
        f"truth {_us(truth_us)}, recovered {_us(judged['recovered_us'])} "
        f"(error {judged['error_pct']:+.1f} %, tolerance ±{100 * tolerance:.0f} % "
        f"+ {_us(widen_us)}), "
        f"interval [{low:.2f}, {high:.2f}] µs ± {_us(widen_us)} "
        f"{'holds' if judged['inside_interval'] else 'misses'} the truth"
    )
    if tried:
        detail += (
            f"; {_block_count(pair)} blocks, after {len(tried)} undecided design"
            f"{'s' if len(tried) > 1 else ''} ({', '.join(map(str, tried))} blocks)"
        )
    if judged["undecided"]:
        detail += (
            f"; undecided: the interval is wider than the ±{_us(judged['allowed_error_us'])} "
            "the check must resolve"
        )
    judged["undecided_blocks"] = list(tried)
    return Check(name, judged["passed"], detail, judged, inconclusive=judged["undecided"])


def _schedule_check(log: CallLog, pair: Any, warmup: int, iterations: int) -> Check:
    orders = log.block_orders(warmup, iterations)
    if orders is None:
        return Check(
            "schedule and labels",
            False,
            f"the carriers' own log is not {warmup} warm-up calls each followed by runs "
            f"of {iterations} calls of one carrier",
        )
    blocks = len(orders)
    baseline_first = sum(order[0] == "baseline" for order in orders)
    claimed = {}
    for record in pair.records:
        if record.position == 0:
            claimed[record.block] = record.variant
    wrong = [b for b, order in enumerate(orders) if claimed.get(b) != order[0]]
    balanced = 2 * baseline_first == blocks
    passed = balanced and not wrong
    detail = (
        f"baseline ran first in {baseline_first} of {blocks} blocks"
        + ("" if balanced else f" (must be {blocks // 2})")
        + (
            "; the records name the first carrier right in every block"
            if not wrong
            else f"; the records name the wrong first carrier in {len(wrong)} blocks"
        )
    )
    numbers = {"blocks": blocks, "baseline_first": baseline_first, "mislabelled_blocks": wrong}
    return Check("schedule and labels", passed, detail, numbers)


def _block_medians(pair: Any, variant: str, column: int = 0) -> np.ndarray:
    """Each block's median of one metric column, by block, read from the raw records here
    (not through the harness's statistics, which are under test)."""
    records = sorted((r for r in pair.records if r.variant == variant), key=lambda r: r.block)
    return np.array([np.median([s[column] for s in r.samples_us]) for r in records])


def inverted_signed_rank_interval(d: np.ndarray, confidence: float) -> tuple[float, float]:
    """The shifts θ that scipy's exact two-sided Wilcoxon test of ``d − θ`` does not reject.

    The test statistic only changes where θ crosses a Walsh average, so one candidate
    between each neighbouring pair (and one beyond each end) decides every θ.
    """
    i, j = np.triu_indices(d.size)
    walsh = np.sort((d[i] + d[j]) / 2.0)
    gaps = np.diff(walsh)
    step = float(gaps[gaps > 0].min()) if np.any(gaps > 0) else 1.0
    candidates = np.concatenate(
        ([walsh[0] - step], (walsh[:-1] + walsh[1:]) / 2.0, [walsh[-1] + step])
    )
    accepted = [
        k
        for k, theta in enumerate(candidates)
        if sps.wilcoxon(d - theta, method="exact").pvalue > 1.0 - confidence
    ]
    if not accepted:
        return float(walsh[0]), float(walsh[-1])
    # Candidate k lies between walsh[k - 1] and walsh[k]; the accepted run's ends are
    # the Walsh averages that bound it.
    return float(walsh[max(accepted[0] - 1, 0)]), float(walsh[min(accepted[-1], walsh.size - 1)])


def _interval_check(pair: Any) -> Check:
    d = np.log(_block_medians(pair, "fixed") / _block_medians(pair, "baseline"))
    n = d.size
    low, high = pair.reduction_ci95_pct
    expected = inverted_signed_rank_interval(d, stats.CONFIDENCE)
    if high >= 100.0:
        # No ratio of positive times reaches a 100 % reduction: the interval is wrong.
        detail = f"interval reaches a {high:.1f} % reduction, which no positive time can"
        return Check("interval size", False, detail, {"ratio": math.inf, "blocks": n})
    # reduction % = 100 · (1 − fixed/baseline): its low end is the log-ratio's high end.
    harness = (math.log(1 - high / 100.0), math.log(1 - low / 100.0))
    half = (expected[1] - expected[0]) / 2.0
    off = max(abs(harness[0] - expected[0]), abs(harness[1] - expected[1]))
    passed = off <= INTERVAL_AGREEMENT * half if half > 0 else off < 1e-12
    ratio = ((harness[1] - harness[0]) / 2.0) / half if half > 0 else 1.0
    detail = (
        f"half-width {100 * (harness[1] - harness[0]) / 2:.3f} % of log-ratio; the "
        f"signed-rank test inverted over the same {n} blocks gives {100 * half:.3f} %: "
        f"ratio {ratio:.2f}, ends "
        + (
            "agree"
            if passed
            else f"off by {100 * off:.3f} % (allowed {100 * INTERVAL_AGREEMENT:.0f} % of it)"
        )
    )
    return Check("interval size", passed, detail, {"ratio": ratio, "blocks": n})


def _column_medians(pair: Any, column: int) -> dict[str, float]:
    """Median of block medians of one metric column, per variant."""
    return {v: float(np.median(_block_medians(pair, v, column))) for v in ("baseline", "fixed")}


def run_selftest(
    delay_us: float = 20.0,
    *,
    base_us: float = 1000.0,
    warmup: int = 10,
    blocks: int = 20,
    iterations: int = 20,
    seed: int = 0,
    cpu_core: int | None = None,
    tolerance: float = TOLERANCE,
    allow_busy: bool = False,
    carriers: Carriers = REAL_CARRIERS,
    host: RunHost | None = None,
) -> SelfTestResult:
    """Run the five checks (see the module docstring) on one pinned core.

    ``carriers``: what is timed, and how the calibration loops are pinned (default: this
    host's); ``host``: where ``paired_benchmark`` measures (default: this machine).
    """
    from embedbench.harness.isolation import resolve_cpu_core
    from embedbench.runner import paired_benchmark  # late: the runner imports half the package

    if delay_us <= 0 or base_us <= 0:
        raise ValueError(f"delay_us and base_us must be positive, got {delay_us} and {base_us}")
    core = resolve_cpu_core(cpu_core)
    design = {"warmup": warmup, "blocks": blocks, "iterations": iterations}

    def pair(baseline: Call, fixed: Call, offset: int, scale: int = 1) -> Any:
        return paired_benchmark(
            {"baseline": baseline, "fixed": fixed},
            cpu_core=core,
            seed=seed + offset,
            allow_busy=allow_busy,
            host=host,
            **{**design, "blocks": blocks * scale},
        )

    spin = pair(carriers.spinner(base_us + delay_us), carriers.spinner(base_us), 0)
    floor = [[s[0] for s in r.samples_us] for r in spin.timer_floor]
    resolution = stats.median_of_block_medians(floor) if floor else 0.0
    checks = [_recovery_check("arithmetic", spin, delay_us, resolution, tolerance)]

    with carriers.pinned(core):
        rate = carriers.hash_ns_per_byte()
        small = bytes_for_us(base_us / 2.0, rate)
        extra = bytes_for_us(base_us / 10.0, rate)
        slow, fast = carriers.hash_work(small + extra), carriers.hash_work(small)
    tried: list[int] = []
    for round_ in range(REAL_WORK_ROUNDS):
        with carriers.pinned(core):
            before = difference_us(slow, fast)
        log = CallLog()
        work = pair(log.carrier("baseline", slow), log.carrier("fixed", fast), 1, 2**round_)
        with carriers.pinned(core):
            after = difference_us(slow, fast)
        truth = (before.difference_us + after.difference_us) / 2.0
        drift = abs(before.difference_us - after.difference_us) / 2.0
        widen = max(resolution, math.hypot(before.spread_us, after.spread_us) + drift)
        real = _recovery_check("real work", work, truth, widen, tolerance, tried=tuple(tried))
        if not real.inconclusive or round_ == REAL_WORK_ROUNDS - 1:
            break
        tried.append(_block_count(work))
    checks.append(real)
    checks.append(_schedule_check(log, work, warmup, iterations))
    checks.append(_interval_check(work))

    with carriers.pinned(core):
        light = carriers.hash_work(bytes_for_us(base_us / 10.0, carriers.hash_ns_per_byte()))
        slept = chain(light, carriers.sleep_us(SLEEP_US))
        wall = difference_us(slept, light).difference_us
    off_cpu = pair(slept, light, 2)
    host, cpu = _column_medians(off_cpu, 0), _column_medians(off_cpu, 1)
    recovered = off_cpu.host_us["baseline"] - off_cpu.host_us["fixed"]
    error = (recovered - wall) / wall
    checks.append(
        Check(
            "host column",
            abs(error) <= SLEEP_TOLERANCE,
            f"a {SLEEP_US:.0f} µs sleep costs {_us(wall)} of wall time; the harness recovered "
            f"{_us(recovered)} (error {100 * error:+.1f} %, tolerance ±"
            f"{100 * SLEEP_TOLERANCE:.0f} %); the CPU-time column differs by "
            f"{_us(cpu['baseline'] - cpu['fixed'])}",
            {"wall_us": wall, "recovered_us": recovered, "host_us": host, "cpu_us": cpu},
        )
    )
    records = [r for p in (spin, work, off_cpu) for r in (*p.timer_floor, *p.records)]
    return SelfTestResult(
        tuple(checks),
        {
            **design,
            "seed": seed,
            "delay_us": delay_us,
            "base_us": base_us,
            "tolerance": tolerance,
            "cpu_core": core,
            "real_work_blocks": _block_count(work),
            "timer_resolution_us": resolution,
        },
        stability.assess_host(records),
    )
