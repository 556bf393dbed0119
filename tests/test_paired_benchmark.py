"""paired_benchmark: any two zero-argument callables through the same harness.

On the real clock only what a pair records is checked; that a planted difference is
recovered inside its interval is checked on the simulated host (tests/test_sim.py)."""

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


def test_a_pair_on_the_real_clock_keeps_its_structure_and_the_prs_statistic():
    # Real timing: the shape of the result and what holds by construction, never its numbers.
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
    assert result.verdict in ("faster", "slower", "no detectable difference")
    assert result.processes_source == "derived"  # unset: a dict's callables, one process
    host = result.host_us
    assert result.pr_reduction_pct == pytest.approx(
        100.0 * (1.0 - host["fixed"] / host["baseline"])
    )
    assert result.pr_reduction_pct == result.summary.pr_reduction_pct
    assert len(result.records) == 12
    assert len(result.timer_floor) == 10
    assert all(len(r.samples_us) == 5 for r in result.records)
    # the canary at every block half's edge (one read where two halves meet), its reading
    assert all(r.canary_us_end > 0 for r in (*result.records, *result.timer_floor))
    assert result.records[0].canary_us_start > 0 and result.records[1].canary_us_start is None
    assert result.host_stability.canary_reads == (12 + 1) + (10 + 1)
    assert (
        # the one measuring sequence: a probe before the timer floor and one before the pair
        result.host_stability.verdict in ("stable", "noisy") and result.host_stability.probes == 2
    )


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
