"""paired_benchmark: any two zero-argument callables through the same harness."""

import os
import time

import pytest

from embedbench import ConfigError, paired_benchmark
from embedbench.errors import HostLockError
from embedbench.harness.hostlock import host_lock


def _busy(us: float):
    def call() -> None:
        end = time.perf_counter_ns() + us * 1e3
        while time.perf_counter_ns() < end:
            pass

    return call


def test_a_known_difference_is_recovered():
    result = paired_benchmark(
        {"baseline": _busy(400), "fixed": _busy(300)},
        warmup=5,
        blocks=8,
        iterations=10,
        allow_busy=True,
    )
    assert result.verdict == "faster"
    low, high = result.reduction_ci95_pct
    assert low <= result.reduction_pct <= high
    # 25 % injected; the timer floor adds well under a microsecond to each side.
    assert 20.0 < result.reduction_pct < 30.0
    assert result.host_us["baseline"] > result.host_us["fixed"] > 300
    assert len(result.records) == 16
    assert len(result.timer_floor) == 10
    # the canary at every block half's edge (one read where two halves meet), its reading
    assert all(r.canary_us_end > 0 for r in (*result.records, *result.timer_floor))
    assert result.records[0].canary_us_start > 0 and result.records[1].canary_us_start is None
    assert result.host_stability.canary_reads == (16 + 1) + (10 + 1)
    assert (
        # the one measuring sequence: a probe before the timer floor and one before the pair
        result.host_stability.verdict in ("stable", "noisy") and result.host_stability.probes == 2
    )


def test_the_headline_lies_inside_its_interval_and_the_prs_statistic_is_kept():
    result = paired_benchmark(
        {"baseline": _busy(3), "fixed": lambda: None},
        warmup=2,
        blocks=6,
        iterations=5,
        allow_busy=True,
    )
    low, high = result.reduction_ci95_pct
    assert low <= result.reduction_pct <= high
    assert result.reduction_pct == result.summary.interval.estimate_pct
    assert result.processes_source == "derived"  # unset: a dict's callables, one process
    host = result.host_us
    assert result.pr_reduction_pct == pytest.approx(
        100.0 * (1.0 - host["fixed"] / host["baseline"])
    )
    assert result.pr_reduction_pct == result.summary.pr_reduction_pct


def test_variants_must_be_named_baseline_and_fixed():
    with pytest.raises(ConfigError, match="baseline"):
        paired_benchmark({"a": _busy(1), "b": _busy(1)}, warmup=0, blocks=1, iterations=1)


def test_it_takes_the_host_lock_like_run():
    with host_lock(), pytest.raises(HostLockError, match=f"pid {os.getpid()}"):
        paired_benchmark(
            {"baseline": _busy(1), "fixed": _busy(1)},
            warmup=0,
            blocks=2,
            iterations=1,
            allow_busy=True,
        )
