"""The self-test: its pure parts and a run on the real harness.

The self-test's decisions are statistical, so they are tested on the simulated host
(tests/test_sim_selftest.py): there it passes, and each harness defect it must catch
fails it, the same way on every machine. On the real harness only its structure is
checked here: which checks ran, and the two that do not depend on the host's noise.
"""

import json

import numpy as np
import pytest

from embedbench import selftest
from embedbench.harness import carriers, stats

# Short, so that each run of all five checks takes a few seconds on the real harness.
RUN_DESIGN = {"base_us": 500.0, "warmup": 5, "blocks": 10, "iterations": 10, "allow_busy": True}
CHECKS = ["arithmetic", "real work", "schedule and labels", "interval size", "host column"]


def _run(seed: int = 0) -> selftest.SelfTestResult:
    return selftest.run_selftest(50.0, seed=seed, **RUN_DESIGN)


def _evaluate(host: dict[str, float], *args, **kwargs) -> dict:
    """``selftest.evaluate`` with the headline taken as the PR's statistic of ``host``."""
    reduction = stats.reduction_pct(host["baseline"], host["fixed"])
    return selftest.evaluate(host, *args, reduction_pct=reduction, **kwargs)


def test_spin_waits_at_least_its_duration():
    import time

    start = time.perf_counter_ns()
    carriers.spin_us(200.0)
    assert time.perf_counter_ns() - start >= 200_000


def test_evaluate_passes_a_recovered_difference_inside_the_interval():
    # Baseline 550 µs, fixed 500 µs: 50 µs = 9.09 % of the baseline.
    judged = _evaluate({"baseline": 550.0, "fixed": 500.0}, (8.0, 10.0), 50.0)
    assert judged["injected_pct"] == pytest.approx(100 * 50 / 550)
    assert judged["recovered_us"] == pytest.approx(50.0)
    assert judged["ci95_us"] == pytest.approx((44.0, 55.0))
    assert judged["inside_interval"] and judged["within_tolerance"] and judged["passed"]


def test_evaluate_fails_an_interval_that_misses_or_an_estimate_that_is_off():
    host = {"baseline": 550.0, "fixed": 500.0}
    missed = _evaluate(host, (9.2, 9.4), 50.0)
    assert not missed["inside_interval"] and not missed["passed"]
    # The timer resolution widens the interval: 9.2 % of 550 = 50.6 µs, minus 1 µs.
    assert _evaluate(host, (9.2, 9.4), 50.0, resolution_us=1.0)["passed"]
    off = _evaluate({"baseline": 560.0, "fixed": 500.0}, (0.0, 20.0), 50.0)
    assert off["inside_interval"] and off["error_pct"] == pytest.approx(20.0)
    assert not off["within_tolerance"] and not off["passed"]
    # A truth known only to ±3 µs allows 7.5 + 3 µs of error: 10 µs is inside, and the
    # interval is widened by the same 3 µs; ±2 µs allows 9.5 µs and 10 µs is outside.
    assert off["allowed_error_us"] == pytest.approx(7.5)
    loose = _evaluate({"baseline": 560.0, "fixed": 500.0}, (0.0, 20.0), 50.0, resolution_us=3.0)
    assert loose["allowed_error_us"] == pytest.approx(10.5) and loose["passed"]
    tight = _evaluate({"baseline": 560.0, "fixed": 500.0}, (0.0, 20.0), 50.0, resolution_us=2.0)
    assert not tight["within_tolerance"] and not tight["passed"]
    with pytest.raises(ValueError):
        _evaluate(host, (8.0, 10.0), 50.0, resolution_us=-1.0)


def test_the_call_log_reads_block_orders_and_refuses_a_mixed_run():
    log = carriers.CallLog()
    a, b = log.carrier("baseline", lambda: None), log.carrier("fixed", lambda: None)
    for fn in (a, b, a, a, b, b):  # the work ledger's untimed call, then 2 warm-ups each
        fn()
    for first, second in ((a, b), (b, a), (b, a), (a, b)):
        for fn in (first, first, first, second, second, second):
            fn()
    assert log.block_orders(warmup=2, iterations=3) == [
        ("baseline", "fixed"),
        ("fixed", "baseline"),
        ("fixed", "baseline"),
        ("baseline", "fixed"),
    ]
    a()  # one call too many: no longer whole blocks
    assert log.block_orders(warmup=2, iterations=3) is None
    without_ledger = carriers.CallLog(names=log.names[2:-1])  # the ledger's calls missing
    assert without_ledger.block_orders(warmup=2, iterations=3) is None


def test_hash_work_is_sized_from_one_rate():
    # Sizing is arithmetic on one probed rate, so ratios are exact; two separate probes
    # on a busy host once differed by more than 25 %.
    assert carriers.bytes_for_us(50.0, 0.5) == 100_000
    assert carriers.bytes_for_us(200.0, 0.5) == 4 * carriers.bytes_for_us(50.0, 0.5)
    assert carriers.bytes_for_us(1e-9, 0.5) == 1
    with pytest.raises(ValueError):
        carriers.bytes_for_us(0.0, 0.5)
    with pytest.raises(ValueError):
        carriers.bytes_for_us(10.0, 0.0)
    rate = carriers.hash_ns_per_byte()
    assert rate > 0
    carriers.hash_work(carriers.bytes_for_us(200.0, rate))()  # runs


def test_bad_delays_are_refused():
    with pytest.raises(ValueError):
        selftest.run_selftest(0.0)
    with pytest.raises(ValueError):
        selftest.run_selftest(10.0, base_us=-1.0)


@pytest.mark.parametrize("n", [5, 10, 20])
def test_the_inverted_test_is_the_harness_interval_even_with_slow_blocks(n):
    # Two slow blocks of ten widen a rank interval far past what the blocks' sd or MAD
    # suggest; the recomputation by test inversion must still land on the same ends.
    rng = np.random.default_rng(n)
    for trial in range(20):
        d = 0.01 + 0.02 * rng.standard_t(3, size=n)
        if trial % 2:
            d[:2] += 0.25
        expected = selftest.inverted_signed_rank_interval(d, stats.CONFIDENCE)
        assert stats.hodges_lehmann(d).ci == pytest.approx(expected, abs=1e-12)


def test_the_inverted_test_rejects_a_shift_far_outside():
    d = np.array([0.10, 0.11, 0.12, 0.09, 0.10, 0.13, 0.08, 0.11, 0.10, 0.12])
    low, high = selftest.inverted_signed_rank_interval(d, 0.95)
    assert 0.08 < low < 0.10 < high < 0.13


def test_the_selftest_on_the_real_harness_reports_every_check():
    # Real timing: whether the arithmetic, real-work and host-column checks pass is the
    # host's noise of the day; what is checked is that every check ran and was decided
    # one way or another, and the two checks that hold whatever the timings were.
    result = _run()
    assert [c.name for c in result.checks] == CHECKS
    for check in result.checks:
        assert check.passed in (True, False) and check.inconclusive in (True, False)
        assert not (check.passed and check.inconclusive)
        assert check.line().startswith(("  ok   ", "  FAIL ", "  ??   ")), check.line()
        assert check.line().endswith(check.detail) and check.detail
    blocks = result.design["real_work_blocks"]
    assert blocks in (10, 20, 40)  # 10, then twice and four times as many if undecided
    schedule = result.check("schedule and labels")
    assert schedule.passed, schedule.detail
    assert schedule.numbers["baseline_first"] == blocks // 2
    assert schedule.numbers["mislabelled_blocks"] == []
    interval = result.check("interval size")
    assert interval.passed and interval.numbers["blocks"] == blocks, interval.detail
    state = "PASSED" if result.passed else "INCONCLUSIVE" if result.inconclusive else "FAILED"
    assert result.lines()[0].startswith(f"self-test {state}")
    row = result.to_json()
    json.dumps(row, allow_nan=False)
    assert row["passed"] is result.passed and row["inconclusive"] is result.inconclusive
    assert row["design"]["blocks"] == 10 and row["design"]["timer_resolution_us"] >= 0
    assert result.host_stability is not None


def test_evaluate_calls_a_miss_inside_a_wide_interval_undecided_not_a_narrow_one():
    host = {"baseline": 600.0, "fixed": 530.0}  # recovered 70 µs against a truth of 50
    wide = _evaluate(host, (5.0, 20.0), 50.0)  # [30, 120] µs: half-width 45
    assert not wide["passed"] and wide["inside_interval"] and wide["undecided"]
    narrow = _evaluate(host, (8.0, 12.0), 50.0)  # [48, 72] µs: half-width 12 > 7.5
    assert narrow["inside_interval"] and narrow["undecided"]
    tighter = _evaluate(host, (8.2, 9.3), 50.0)  # [49.2, 55.8] µs: half-width 3.3
    assert tighter["inside_interval"] and not tighter["within_tolerance"]
    assert not tighter["undecided"]  # off by more than the interval allows: a failure
    missed = _evaluate(host, (10.0, 25.0), 50.0)  # [60, 150] µs misses 50
    assert not missed["inside_interval"] and not missed["undecided"]
