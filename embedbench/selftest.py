"""Injected-delay self-test: does the harness recover a difference it is told about?

Both variants spin on ``time.perf_counter_ns`` until a deadline: the fixed one
for ``base_us``, the baseline for ``base_us + delay_us``. Everything else (the
call path, the timer reads, the loop) is identical, so the true difference is
``delay_us`` microseconds. The pair runs through ``runner.paired_benchmark``
(the same schedule, timing and statistics as a real run). A deadline spin is
frequency-independent and absorbs preemption before the deadline, so the
self-test checks the harness's arithmetic, not the machine's noise.

The injected reduction in % is ``100 * delay_us / measured baseline``: the
measured baseline includes the call overhead that both variants share, so this
is the reduction the harness should report. The nominal
``100 * delay_us / (base_us + delay_us)`` is recorded beside it.

The test passes when the injected difference lies inside the headline 95 %
interval and the headline estimate is within ±15 % of the injected difference.
A deadline spin is so regular that the interval can be a few nanoseconds wide,
narrower than the timer can resolve; the interval is therefore widened on each
side by the timer's resolution, the median time of an empty timed call (about
0.1–0.3 µs), before asking whether it holds the injected difference. The
strict answer is recorded too (``inside_raw_interval``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from embedbench import stats

TOLERANCE = 0.15


def spin_us(duration_us: float) -> None:
    """Busy-wait until ``duration_us`` microseconds have passed (perf_counter_ns deadline)."""
    clock = time.perf_counter_ns
    deadline = clock() + round(duration_us * 1000.0)
    while clock() < deadline:
        pass


def _spinner(duration_us: float):
    def call() -> None:
        spin_us(duration_us)

    return call


@dataclass(frozen=True)
class SelfTestResult:
    """Injected against recovered difference, the interval, and the pass decision."""

    delay_us: float
    base_us: float
    host_us: dict[str, float]
    injected_us: float
    injected_pct: float
    nominal_injected_pct: float
    recovered_us: float
    recovered_pct: float
    ci95_pct: tuple[float, float]
    ci95_us: tuple[float, float]
    resolution_us: float
    inside_raw_interval: bool
    hl_reduction_pct: float | None
    hl_ci95_pct: tuple[float, float] | None
    wilcoxon_p: float | None
    verdict: str
    error_pct: float
    inside_interval: bool
    within_tolerance: bool
    tolerance: float
    passed: bool
    warmup: int
    blocks: int
    iterations: int
    seed: int
    cpu_core: int | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        out = asdict(self)
        for key in ("ci95_pct", "ci95_us", "hl_ci95_pct"):
            if out[key] is not None:
                out[key] = list(out[key])
        return out

    def summary_line(self) -> str:
        """One line for a terminal or README."""
        low, high = self.ci95_us
        return (
            f"self-test {'PASSED' if self.passed else 'FAILED'}: "
            f"injected {self.injected_us:.2f} µs "
            f"({self.injected_pct:.2f} %), recovered {self.recovered_us:.2f} µs "
            f"({self.recovered_pct:.2f} %), 95 % interval [{low:.2f}, {high:.2f}] µs "
            f"(± timer resolution {self.resolution_us:.2f} µs), "
            f"error {self.error_pct:+.1f} % (tolerance ±{100 * self.tolerance:.0f} %)"
        )


def evaluate(
    host_us: dict[str, float],
    reduction_ci95_pct: tuple[float, float],
    delay_us: float,
    *,
    resolution_us: float = 0.0,
    tolerance: float = TOLERANCE,
) -> dict[str, Any]:
    """The pass decision from measured medians and interval (pure; see the module docstring)."""
    if resolution_us < 0:
        raise ValueError(f"resolution_us must be non-negative, got {resolution_us}")
    baseline = host_us["baseline"]
    injected_pct = 100.0 * delay_us / baseline
    recovered_us = baseline - host_us["fixed"]
    low, high = reduction_ci95_pct
    ci_us = (baseline * low / 100.0, baseline * high / 100.0)
    inside_raw = ci_us[0] <= delay_us <= ci_us[1]
    inside = ci_us[0] - resolution_us <= delay_us <= ci_us[1] + resolution_us
    error = (recovered_us - delay_us) / delay_us
    within = abs(error) <= tolerance
    return {
        "injected_us": float(delay_us),
        "injected_pct": injected_pct,
        "recovered_us": recovered_us,
        "recovered_pct": stats.reduction_pct(baseline, host_us["fixed"]),
        "ci95_us": ci_us,
        "resolution_us": float(resolution_us),
        "inside_raw_interval": inside_raw,
        "error_pct": 100.0 * error,
        "inside_interval": inside,
        "within_tolerance": within,
        "passed": inside and within,
    }


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
) -> SelfTestResult:
    """Time ``spin(base_us + delay_us)`` against ``spin(base_us)`` and judge the recovery."""
    from embedbench.runner import paired_benchmark  # late: the runner imports half the package

    if delay_us <= 0 or base_us <= 0:
        raise ValueError(f"delay_us and base_us must be positive, got {delay_us} and {base_us}")
    result = paired_benchmark(
        {"baseline": _spinner(base_us + delay_us), "fixed": _spinner(base_us)},
        warmup=warmup,
        blocks=blocks,
        iterations=iterations,
        cpu_core=cpu_core,
        seed=seed,
        allow_busy=allow_busy,
    )
    summary = result.statistics
    floor = [[s[0] for s in r.samples_us] for r in result.timer_floor]
    resolution = stats.median_of_block_medians(floor) if floor else 0.0
    judged = evaluate(
        summary.host_us,
        summary.reduction_ci95_pct,
        delay_us,
        resolution_us=resolution,
        tolerance=tolerance,
    )
    return SelfTestResult(
        delay_us=float(delay_us),
        base_us=float(base_us),
        host_us=dict(summary.host_us),
        nominal_injected_pct=100.0 * delay_us / (base_us + delay_us),
        ci95_pct=summary.reduction_ci95_pct,
        hl_reduction_pct=summary.hl_reduction_pct,
        hl_ci95_pct=summary.hl_ci95_pct,
        wilcoxon_p=summary.wilcoxon_p,
        verdict=summary.verdict,
        tolerance=tolerance,
        warmup=warmup,
        blocks=blocks,
        iterations=iterations,
        seed=seed,
        cpu_core=cpu_core,
        **judged,
    )
